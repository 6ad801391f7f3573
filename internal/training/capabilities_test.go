package training

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/inference/inferencetest"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/plugins/arithmetic/problem"
)

// TestSegmentWithHTTPCapability: a run whose spec grants the arithmetic
// plugin the "llm" endpoint trains on it (every step asks the loopback
// chat-completions server); without the grant, or with an endpoint the
// cluster does not define, the segment fails for good with a message that
// says which capability.
func TestSegmentWithHTTPCapability(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	wasm := arithmeticWasm // built by TestMain
	// Upload validation loads it with the capability granted to nothing.
	md, err := f.rt.Validate(ctx, wasm, pluginhost.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := f.store.Put(ctx, wasm, md, "test")
	if err != nil {
		t.Fatal(err)
	}

	srv := inferencetest.Start(t, "arith-1b")
	srv.Answer = func(msgs []inference.ChatMessage) string {
		p, _ := problem.Parse(msgs[len(msgs)-1].Content)
		return strconv.Itoa(p.Answer())
	}
	llm := inference.Endpoint{Name: "llm", URL: srv.URL, Model: "arith-1b"}
	base := Spec{Cluster: "lab", Env: "arithmetic", Seed: 3, Iterations: 1, CheckpointEvery: 1, EnvsPerWorker: 4, EpisodeLength: 8, BatchSize: 16}
	for _, tc := range []struct {
		name      string
		caps      *Capabilities
		endpoints []inference.Endpoint
		wantErr   string
	}{
		{"granted", &Capabilities{HTTP: []string{"llm"}, HTTPRate: 1000}, []inference.Endpoint{llm}, ""},
		{"not granted", nil, []inference.Endpoint{llm}, `capability "http"`},
		{"endpoint not defined", &Capabilities{HTTP: []string{"llm"}}, nil, `declares no such endpoint`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := base
			spec.Capabilities = tc.caps
			spec = spec.WithDefaults()
			before := srv.Completed()
			res, err := f.runner().RunSegment(ctx, SegmentInput{RunID: "run-llm-" + strings.ReplaceAll(tc.name, " ", "-"), Spec: spec,
				EnvPlugin: rec.ID, Iterations: 1, Endpoints: tc.endpoints}, nil)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("segment: %v, want a fatal error mentioning %q", err, tc.wantErr)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			asked := srv.Completed() - before
			t.Logf("segment: iteration %d, %d episodes, mean return %.2f, %d chat completions", res.Iteration, res.Episodes, res.MeanReturn, asked)
			if res.Iteration != 1 || asked < 4*8 || res.Episodes == 0 || res.MeanReturn != 1 {
				t.Fatalf("segment %+v after %d completions: want one iteration of 32 steps, each one answered correctly", res, asked)
			}
		})
	}
}
