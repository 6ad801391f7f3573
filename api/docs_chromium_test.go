//go:build unix

package api

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// findChromium returns a headless-capable Chromium, or skips the test
// (fails it under `make test`, which installs one: mk/docs.mk).
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("TRAINYARD_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium not found; install it (make docs-chromium)")
	}
	t.Skip("chromium not found; install Debian's chromium or run through make test")
	return ""
}

// dumpDOM loads url in headless Chromium with no network but loopback
// and returns the DOM after scripts ran. Chromium's stderr comes back
// for failure messages.
func dumpDOM(t *testing.T, bin, url string) (dom, stderr string) {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+home+"/profile", "--no-first-run", "--disable-sync",
		"--disable-background-networking", "--disable-component-update", "--disable-extensions",
		// Offline: no name resolves but 127.0.0.1, and whatever would go
		// through a proxy goes to a closed port (loopback bypasses proxies).
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
		"--proxy-server=http://127.0.0.1:9",
		// Virtual time runs only while the page is idle, so a busy machine
		// does not cut rendering short.
		"--virtual-time-budget=15000",
		"--dump-dom", url)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home+"/config", "XDG_CACHE_HOME="+home+"/cache")
	// Chromium's helper processes share its group; a timeout kills them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, tail(errb.String(), 2000))
	}
	return out.String(), errb.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// TestDocsRenderOffline opens /docs of the real API router in headless
// Chromium with every host but 127.0.0.1 unresolvable and everything
// proxied sent to a closed port, and checks that the renderer ran: the
// sidebar lists every tag of the OpenAPI document and, on one operation's
// page, the summaries of all operations of its tag and its path. None of
// that text is in the static HTML; it exists only if the embedded scripts
// loaded, fetched /openapi.yaml from this server and rendered it.
func TestDocsRenderOffline(t *testing.T) {
	bin := findChromium(t)
	s := New(Deps{})
	srv := httptest.NewServer(s.Handler()) // listens on 127.0.0.1
	defer srv.Close()

	const opID = "submit-run"
	var target *huma.Operation
	var ops []*huma.Operation
	tags := map[string]bool{}
	for _, item := range s.API.OpenAPI().Paths {
		for _, o := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch} {
			if o == nil {
				continue
			}
			ops = append(ops, o)
			for _, tag := range o.Tags {
				tags[tag] = true
			}
			if o.OperationID == opID {
				target = o
			}
		}
	}
	if target == nil || len(target.Tags) == 0 {
		t.Fatalf("operation %s (with a tag) not in the API", opID)
	}
	// What the page must show: every tag, and every summary of the
	// target's tag (its group in the sidebar is open on its page).
	want := []string{">" + target.Path + "<"}
	for tag := range tags {
		want = append(want, ">"+html(tag)+"<")
	}
	for _, o := range ops {
		if len(o.Tags) > 0 && o.Tags[0] == target.Tags[0] {
			want = append(want, html(o.Summary))
		}
	}

	page := docsGet(t, s.Handler(), "/docs").Body.String()
	for _, w := range want[1+len(tags):] {
		if strings.Contains(page, w) {
			t.Fatalf("the static page already contains %q: the check would prove nothing", w)
		}
	}

	start := time.Now()
	dom, stderr := dumpDOM(t, bin, srv.URL+"/docs#/operations/"+opID)
	t.Logf("chromium rendered /docs in %v (%d bytes of DOM)", time.Since(start).Round(time.Millisecond), len(dom))
	var missing []string
	for _, w := range want {
		if !strings.Contains(dom, w) {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the rendered /docs lacks %d of %d expected texts, e.g. %q\nDOM: %s\nchromium stderr: %s",
			len(missing), len(want), missing[0], tail(dom, 1500), tail(stderr, 1500))
	}
}

// html escapes text as a DOM serialisation writes it.
func html(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\u00a0", "&nbsp;").Replace(s)
}
