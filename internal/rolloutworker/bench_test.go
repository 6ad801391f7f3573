package rolloutworker

import (
	"context"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/inference/inferencetest"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/trajpool"
	"github.com/trainyard/trainyard/plugins/arithmetic/problem"
)

// BenchmarkHundredEpisodesAt50ms is the loop's rollout side at seed 003's
// shape: one worker, 100 arithmetic episodes in flight, every answer from
// a loopback endpoint taking 50 ms. The ideal is 100 / 0.05 s = 2,000
// trajectories/s; traj/s and of-ideal report how close a worker comes,
// into a pool in the same process (local) and across HTTP as the loop's
// workers put into their trainer's node (http). heap-KiB/waiting is the
// Go heap per waiting episode (instances included), MiB/instance each
// instance's linear memory. The clock starts after the first 200
// episodes, once all 100 instances are up (instantiating a Go-built plugin
// costs more than an episode).
func BenchmarkHundredEpisodesAt50ms(b *testing.B) {
	const concurrency, latency = 100, 50 * time.Millisecond
	ctx := context.Background()
	srv := inferencetest.Start(b, "arith-1b")
	srv.SetLatency(latency)
	srv.Answer = func(msgs []inference.ChatMessage) string {
		p, _ := problem.Parse(msgs[len(msgs)-1].Content)
		return strconv.Itoa(p.Answer())
	}
	llm, err := inference.NewClient(inference.Endpoint{Name: "llm", URL: srv.URL, Model: "arith-1b", MaxConcurrency: 2 * concurrency}, inference.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	mod := loadArithmetic(b, llm, pluginhost.Limits{PoolSize: concurrency})

	for _, mode := range []string{"local", "http"} {
		b.Run("pool="+mode, func(b *testing.B) {
			pool, err := trajpool.New(trajpool.Options{Name: "bench", Capacity: 4096, Dedup: true})
			if err != nil {
				b.Fatal(err)
			}
			var sink Sink = pool
			if mode == "http" {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				hs := &http.Server{Handler: trajpool.Handler(pool, 0)}
				go hs.Serve(l)
				defer hs.Close()
				sink = &trajpool.Client{URL: "http://" + l.Addr().String()}
			}
			drained := make(chan struct{})
			dctx, stop := context.WithCancel(ctx)
			go func() { // a trainer that keeps up
				defer close(drained)
				for dctx.Err() == nil {
					_, _ = pool.Batch(dctx, 1)
				}
			}()
			var peak runtime.MemStats
			live := &Live{}
			warm := int64(2 * concurrency)
			var t0 time.Time
			done := make(chan struct{})
			go func() { // the clock starts once every instance runs; the heap is read mid-run
				defer close(done)
				t := time.NewTicker(5 * time.Millisecond)
				defer t.Stop()
				for live.Episodes.Load() < warm {
					<-t.C
				}
				t0 = time.Now()
				for live.Episodes.Load() < warm+int64(b.N)/2 {
					<-t.C
				}
				runtime.ReadMemStats(&peak)
			}()
			b.ResetTimer()
			st, err := Run(ctx, Config{Name: "bench", Module: mod, Concurrency: concurrency, Episodes: warm + int64(b.N), Pool: sink, Live: live})
			b.StopTimer()
			<-done
			took := time.Since(t0)
			stop()
			<-drained
			if err != nil {
				b.Fatal(err)
			}
			perSec := float64(st.Episodes-warm) / took.Seconds()
			ideal := concurrency / latency.Seconds()
			b.ReportMetric(perSec, "traj/s")
			b.ReportMetric(perSec/ideal, "of-ideal")
			b.ReportMetric(float64(peak.HeapInuse)/concurrency/1024, "heap-KiB/waiting")
			b.ReportMetric(float64(st.InstanceMemory)/concurrency/(1<<20), "MiB/instance")
			b.ReportMetric(0, "ns/op")
		})
	}
}
