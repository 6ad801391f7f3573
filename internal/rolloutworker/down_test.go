package rolloutworker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/inference/inferencetest"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/trajpool"
	"github.com/trainyard/trainyard/plugins/arithmetic/problem"
)

// TestEndpointDownIsAReason: with MaxAttempts < 0 (the LLM loop's
// workers) an endpoint that answers only 503s makes episodes wait and
// replay, with the reason in Live.LastError, instead of failing the
// worker; once it is back every episode arrives, once.
func TestEndpointDownIsAReason(t *testing.T) {
	ctx := t.Context()
	srv := inferencetest.Start(t, "arith-1b")
	srv.Answer = func(msgs []inference.ChatMessage) string {
		p, _ := problem.Parse(msgs[len(msgs)-1].Content)
		return strconv.Itoa(p.Answer())
	}
	srv.Fail503(1 << 30) // down
	llm, err := inference.NewClient(inference.Endpoint{Name: "llm", URL: srv.URL, Model: "arith-1b", MaxConcurrency: 8},
		inference.ClientOptions{Retry: inference.Retry{MaxAttempts: 2, BaseBackoff: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	mod := loadArithmetic(t, llm, pluginhost.Limits{})
	pool, err := trajpool.New(trajpool.Options{Name: "down", Capacity: 64, Dedup: true})
	if err != nil {
		t.Fatal(err)
	}
	live := &Live{}
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Config{Name: "w", Module: mod, Concurrency: 4, Episodes: 12, Pool: pool, MaxAttempts: -1, Live: live})
		done <- err
	}()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(live.LastError(), "503") {
		if time.Now().After(deadline) {
			t.Fatalf("no reason while the endpoint is down: %q, %d failing", live.LastError(), live.Failing.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Down for longer than the default five attempts per episode.
	for live.Replayed.Load() < 4*6 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d replays in a minute", live.Replayed.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("while down: %q", live.LastError())
	if live.Episodes.Load() != 0 {
		t.Fatalf("%d episodes arrived from a down endpoint", live.Episodes.Load())
	}
	srv.Fail503(0) // back
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := pool.Stats(); st.Put != 12 || st.Duplicates != 0 || live.Replayed.Load() == 0 || live.LastError() != "" {
		t.Fatalf("pool %+v, %d replayed, reason %q: want 12 episodes once each, replays, no reason left", st, live.Replayed.Load(), live.LastError())
	}
}
