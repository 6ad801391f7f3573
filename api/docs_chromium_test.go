//go:build unix

package api

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/trainyard/trainyard/internal/chromiumtest"
)

// TestDocsRenderOffline opens /docs of the real API router in headless
// Chromium with every host but 127.0.0.1 unresolvable and everything
// proxied sent to a closed port, and checks that the renderer ran: the
// sidebar lists every tag of the OpenAPI document and, on one operation's
// page, the summaries of all operations of its tag and its path. None of
// that text is in the static HTML; it exists only if the embedded scripts
// loaded, fetched /openapi.yaml from this server and rendered it.
func TestDocsRenderOffline(t *testing.T) {
	bin := chromiumtest.Find(t)
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
	dom, stderr := chromiumtest.DumpDOM(t, bin, srv.URL+"/docs#/operations/"+opID)
	t.Logf("chromium rendered /docs in %v (%d bytes of DOM)", time.Since(start).Round(time.Millisecond), len(dom))
	var missing []string
	for _, w := range want {
		if !strings.Contains(dom, w) {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the rendered /docs lacks %d of %d expected texts, e.g. %q\nDOM: %s\nchromium stderr: %s",
			len(missing), len(want), missing[0], chromiumtest.Tail(dom, 1500), chromiumtest.Tail(stderr, 1500))
	}
}

// html escapes text as a DOM serialisation writes it.
func html(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\u00a0", "&nbsp;").Replace(s)
}
