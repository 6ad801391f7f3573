package training

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/trajpool"
)

// TestParseStepLine: the trainer protocol's acknowledgement.
func TestParseStepLine(t *testing.T) {
	for _, tc := range []struct {
		line     string
		ok       bool
		step     int64
		loss     float64
		hasLoss  bool
		malforms bool
	}{
		{"TRAINYARD_STEP step=3 loss=0.25", true, 3, 0.25, true, false},
		{"[INFO] TRAINYARD_STEP step=7", true, 7, 0, false, false},
		{"step 3 done", false, 0, 0, false, false},
		{"TRAINYARD_STEP step=0", true, 0, 0, false, true},
		{"TRAINYARD_STEP loss=1", true, 0, 0, false, true},
		{"TRAINYARD_STEP step=2 lr=3", true, 0, 0, false, true},
		{"TRAINYARD_STEP step=2 loss=x", true, 0, 0, false, true},
	} {
		r, ok, err := ParseStepLine(tc.line)
		if ok != tc.ok || (err != nil) != tc.malforms {
			t.Errorf("%q: ok %v err %v", tc.line, ok, err)
			continue
		}
		if err == nil && ok && (r.Step != tc.step || (r.Loss != nil) != tc.hasLoss || (r.Loss != nil && *r.Loss != tc.loss)) {
			t.Errorf("%q: %+v", tc.line, r)
		}
	}
}

func FuzzParseStepLine(f *testing.F) {
	f.Add("TRAINYARD_STEP step=3 loss=0.25")
	f.Fuzz(func(t *testing.T, line string) {
		r, ok, err := ParseStepLine(line)
		if ok && err == nil && r.Step < 1 {
			t.Fatalf("%q: step %d accepted", line, r.Step)
		}
	})
}

// TestRemoteTrainer: a remote training API, an endpoint of type trainer
// the cluster declares, gets each batch with the bearer token its
// credentials_ref names (never in the run's spec), and its answer lands in
// remote.json for the publish; a 4xx is fatal, a 5xx not. A name that is
// no trainer of the cluster's is refused before any secret is read.
func TestRemoteTrainer(t *testing.T) {
	t.Setenv("REMOTE_TRAINER_KEY", "sk-test")
	var got Batch
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk-test" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(status)
		w.Write([]byte(`{"loss": 0.5, "checkpoint": {"model": "ft-123", "step": 4}}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	trainer := inference.Endpoint{Name: "tuner", URL: srv.URL, Type: inference.TypeTrainer, CredentialsRef: "env:REMOTE_TRAINER_KEY"}
	eps := []inference.Endpoint{{Name: "llm", URL: "http://127.0.0.1:1", Model: "m", CredentialsRef: "env:REMOTE_TRAINER_KEY"}, trainer}
	for _, name := range []string{"llm", "nope", ""} {
		if _, err := newRemoteStepper(&RemoteTrainer{Endpoint: name}, eps, dir); !errors.Is(err, ErrFatal) {
			t.Fatalf("remote trainer %q (not a declared trainer): %v, want fatal", name, err)
		}
	}
	s, err := newRemoteStepper(&RemoteTrainer{Endpoint: "tuner"}, eps, dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.step(context.Background(), Batch{Step: 4, WeightVersion: 3, Trajectories: []trajpool.Trajectory{{Episode: 9, Return: 1}}})
	if err != nil || r.Step != 4 || r.Loss == nil || *r.Loss != 0.5 {
		t.Fatalf("step: %+v %v", r, err)
	}
	if got.Step != 4 || got.WeightVersion != 3 || len(got.Trajectories) != 1 || got.Trajectories[0].Episode != 9 {
		t.Fatalf("the API got %+v", got)
	}
	b, err := os.ReadFile(filepath.Join(dir, "remote.json"))
	if err != nil || string(b) != `{"checkpoint":{"model":"ft-123","step":4},"loss":0.5,"step":4}` {
		t.Fatalf("remote.json: %s %v", b, err)
	}
	status = http.StatusServiceUnavailable
	if _, err := s.step(context.Background(), Batch{Step: 5}); err == nil || errors.Is(err, ErrFatal) {
		t.Fatalf("503: %v, want a retryable error", err)
	}
	t.Setenv("REMOTE_TRAINER_KEY", "wrong")
	s, _ = newRemoteStepper(&RemoteTrainer{Endpoint: "tuner"}, eps, dir)
	if _, err := s.step(context.Background(), Batch{Step: 5}); !errors.Is(err, ErrFatal) {
		t.Fatalf("401: %v, want fatal", err)
	}
	eps[1].CredentialsRef = "env:NOT_SET_ANYWHERE"
	if _, err := newRemoteStepper(&RemoteTrainer{Endpoint: "tuner"}, eps, dir); !errors.Is(err, ErrFatal) {
		t.Fatalf("missing key: %v", err)
	}
}
