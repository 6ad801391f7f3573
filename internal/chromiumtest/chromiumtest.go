//go:build unix

// Package chromiumtest drives a headless Chromium for tests that must see a
// page as a browser renders it (the API reference at /docs, the dashboard
// at /ui): with no network but loopback, scripts run, the DOM read back or
// a screenshot taken. `make test` installs Debian's chromium (mk/docs.mk)
// and sets TRAINYARD_REQUIRE_CHROMIUM, so there a missing browser fails
// the test instead of skipping it.
package chromiumtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Find returns a headless-capable Chromium, or skips the test (fails it
// when TRAINYARD_REQUIRE_CHROMIUM is set).
func Find(t testing.TB) string {
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

// DumpDOM loads url and returns the DOM after scripts ran, and Chromium's
// stderr for failure messages.
func DumpDOM(t testing.TB, bin, url string) (dom, stderr string) {
	t.Helper()
	return run(t, bin, "--dump-dom", url)
}

// Screenshot loads url in a window of width×height CSS pixels, saves what
// it shows, once scripts ran, as a PNG at file, and returns the DOM as
// DumpDOM does: one browser start for both (each start costs seconds on a
// busy machine).
func Screenshot(t testing.TB, bin, url, file string, width, height int) (dom, stderr string) {
	t.Helper()
	dom, stderr = run(t, bin, "--dump-dom", "--screenshot="+file, "--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height), "--hide-scrollbars", url)
	if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
		t.Fatalf("chromium wrote no screenshot %s (%v)\n%s", file, err, Tail(stderr, 2000))
	}
	return dom, stderr
}

// run starts Chromium headless, offline, in a fresh profile, with args.
func run(t testing.TB, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + home + "/profile", "--no-first-run", "--disable-sync",
		"--disable-background-networking", "--disable-component-update", "--disable-extensions",
		// Offline: no name resolves but 127.0.0.1, and whatever would go
		// through a proxy goes to a closed port (loopback bypasses proxies).
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
		"--proxy-server=http://127.0.0.1:9",
		// Virtual time runs only while the page is idle, so a busy machine
		// does not cut rendering short.
		"--virtual-time-budget=15000",
	}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home+"/config", "XDG_CACHE_HOME="+home+"/cache")
	// Chromium's helper processes share its group; a timeout kills them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, Tail(errb.String(), 2000))
	}
	return out.String(), errb.String()
}

// Tail is the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
