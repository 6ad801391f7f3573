package train

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/training"
)

// TestSegmentTelemetry: a segment's span carries run, iterations and
// checkpoint; its iterations show up on /metrics under the names the
// README lists, labelled by run.
func TestSegmentTelemetry(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	reg := prom.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	inst := newInstruments(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)).Meter(instrumentation))

	ctx, tel := startSegmentWith(context.Background(), training.SegmentInput{RunID: "run-1", FromCheckpoint: 3, Iterations: 2}, inst)
	for i := int64(7); i <= 8; i++ {
		tel.iteration(ctx, learner.Metrics{Iteration: i, Timesteps: 100 * i, Episodes: 2, EpisodeReturnMean: 20, EpisodeReturnMin: 10, EpisodeReturnMax: 30,
			RecentReturnMean: 19, RecentEpisodes: 50, StepsPerSecond: 1234,
			Values: map[string]float64{"policy_loss": -0.01, "value_loss": 0.5, "entropy": 0.69, "approx_kl": 0.002, "learning_rate": 3e-4, "epsilon": 0.25}})
	}
	tel.end(training.SegmentResult{Iteration: 8, Checkpoint: 4, MeanReturn: 19}, nil)
	_, failed := startSegmentWith(context.Background(), training.SegmentInput{RunID: "run-2"}, inst)
	failed.end(training.SegmentResult{}, errors.New("node lost"))

	ended := spans.Ended()
	if len(ended) != 2 || ended[0].Name() != SpanSegment {
		t.Fatalf("spans: %v", ended)
	}
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range ended[0].Attributes() {
		got[kv.Key] = kv.Value
	}
	for k, want := range map[attribute.Key]int64{AttrFromCheckpoint: 3, AttrIterations: 2, AttrFromIteration: 6, AttrToIteration: 8, AttrCheckpoint: 4} {
		if got[k].AsInt64() != want {
			t.Errorf("span attribute %s = %v, want %d", k, got[k].Emit(), want)
		}
	}
	if got[AttrRun].AsString() != "run-1" {
		t.Errorf("span run id %q", got[AttrRun].AsString())
	}
	if ended[1].Status().Code != codes.Error {
		t.Errorf("failed segment's span status %v", ended[1].Status())
	}

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`trainyard_training_iterations_total{node="",otel_scope_name="github.com/trainyard/trainyard/workflows/train",otel_scope_version="",run_id="run-1"} 2`,
		`trainyard_training_timesteps_total{`,
		`trainyard_training_episodes_total{`,
		`trainyard_training_episode_return_mean{`,
		`trainyard_training_episode_return_min{`,
		`trainyard_training_episode_return_max{`,
		`trainyard_training_episode_return_recent_mean{`,
		`trainyard_training_env_steps_per_second{`,
		`trainyard_training_policy_loss{`,
		`trainyard_training_value_loss{`,
		`trainyard_training_entropy{`,
		`trainyard_training_approx_kl{`,
		`trainyard_training_learning_rate{`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, want := range []string{`run_id="run-1"} 200`, `run_id="run-1"} 20`, `run_id="run-1"} 1234`} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks a sample ending %s", want)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}
