package weightsync

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/embedded/s3test"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/objstore"
)

var bucket *objstore.Store

func TestMain(m *testing.M) {
	os.Exit(s3test.Main(m, "weights", func(s *objstore.Store, _ string) { bucket = s }))
}

// reloads is a loopback server playing the reload APIs of each type.
type reloads struct {
	mu   sync.Mutex
	got  map[string]map[string]any // path → body
	fail bool
}

func (r *reloads) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(req.Body).Decode(&body)
	r.mu.Lock()
	r.got[req.URL.Path] = body
	fail := r.fail
	r.mu.Unlock()
	if fail {
		http.Error(w, "weights not found", http.StatusNotFound)
	}
}

// TestPublishNotifiesEachType: one publish is a checkpoint in S3 and one
// notification per endpoint in the form its type expects; an endpoint that
// fails keeps its version and is reported.
func TestPublishNotifiesEachType(t *testing.T) {
	r := &reloads{got: map[string]map[string]any{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: r}
	go hs.Serve(l)
	defer hs.Close()
	base := "http://" + l.Addr().String()
	marker := filepath.Join(t.TempDir(), "reloaded")

	client := func(e inference.Endpoint) *inference.Client {
		c, err := inference.NewClient(e, inference.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	eps := []*inference.Client{
		client(inference.Endpoint{Name: "hook", URL: base, Model: "m", Type: inference.TypeWebhook, ReloadURL: base + "/reload"}),
		client(inference.Endpoint{Name: "sgl", URL: base, Model: "m", Type: inference.TypeSGLang}),
		client(inference.Endpoint{Name: "vllm", URL: base, Model: "lora-m", Type: inference.TypeVLLM}),
		client(inference.Endpoint{Name: "cmd", URL: base, Model: "m", ReloadCommand: []string{"sh", "-c", `echo "$TRAINYARD_WEIGHTS_VERSION $TRAINYARD_WEIGHTS_URI" > ` + marker}}),
		client(inference.Endpoint{Name: "hosted", URL: base, Model: "gpt"}),
	}
	s := &Syncer{Store: checkpoint.New(bucket, checkpoint.Options{Prefix: "t"}), Bucket: "weights", Run: "r-weights", Endpoints: eps}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "adapter.bin"), []byte(strings.Repeat("w", 1000)), 0o600)
	p, err := s.Publish(t.Context(), dir, checkpoint.Meta{Iteration: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("published %+v", p)
	if !strings.HasPrefix(p.URI, "s3://weights/t/runs/r-weights/") || p.Bytes != 1000 {
		t.Fatalf("published %+v", p)
	}
	if len(p.Notified) != 4 || len(p.Failed) != 1 || !strings.HasPrefix(p.Failed[0], "hosted: ") {
		t.Fatalf("notified %v failed %v: want 4 notified and the hosted endpoint failed", p.Notified, p.Failed)
	}
	want := map[string]map[string]any{
		"/reload":                   {"endpoint": "hook", "model": "m", "version": float64(p.Version), "uri": p.URI},
		"/update_weights_from_disk": {"model_path": p.URI},
		"/v1/load_lora_adapter":     {"lora_name": "lora-m", "lora_path": p.URI},
	}
	for path, body := range want {
		if fmt.Sprint(r.got[path]) != fmt.Sprint(body) {
			t.Errorf("%s got %v, want %v", path, r.got[path], body)
		}
	}
	if b, _ := os.ReadFile(marker); strings.TrimSpace(string(b)) != fmt.Sprintf("%d %s", p.Version, p.URI) {
		t.Errorf("reload command wrote %q", b)
	}
	for _, c := range eps {
		want := p.Version
		if c.Endpoint().Name == "hosted" {
			want = 0
		}
		if c.WeightVersion() != want {
			t.Errorf("%s serves v%d, want v%d", c.Endpoint().Name, c.WeightVersion(), want)
		}
	}

	// Every endpoint refuses: the publish is an error, versions stay.
	r.mu.Lock()
	r.fail = true
	r.mu.Unlock()
	s.Endpoints = eps[:3]
	p2, err := s.Publish(t.Context(), dir, checkpoint.Meta{Iteration: 2})
	if err == nil || len(p2.Failed) != 3 || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("publish to refusing endpoints: %+v, %v", p2, err)
	}
	if eps[0].WeightVersion() != p.Version {
		t.Errorf("a refused reload moved the version to %d", eps[0].WeightVersion())
	}
}
