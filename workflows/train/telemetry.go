package train

import (
	"context"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"

	"github.com/trainyard/trainyard/internal/learner"
	"github.com/trainyard/trainyard/internal/training"
)

// Telemetry of a segment on the agent: one span per segment (a child of
// the Temporal interceptor's RunActivity:RunSegment span, so the plugin
// loads and checkpoint saves and restores inside it nest under it), and
// per-iteration training metrics through the global meter provider
// (Prometheus /metrics on the agent, OTLP when configured).

const instrumentation = "github.com/trainyard/trainyard/workflows/train"

// SpanSegment is the span of one RunSegment activity's training.
const SpanSegment = "training.segment"

// Span and metric attribute keys.
const (
	AttrRun            = attribute.Key("trainyard.run_id")
	AttrNode           = attribute.Key("trainyard.node")
	AttrFromCheckpoint = attribute.Key("trainyard.segment.from_checkpoint")
	AttrIterations     = attribute.Key("trainyard.segment.iterations")
	AttrFromIteration  = attribute.Key("trainyard.segment.from_iteration")
	AttrToIteration    = attribute.Key("trainyard.segment.to_iteration")
	AttrCheckpoint     = attribute.Key("trainyard.segment.checkpoint")
	AttrRestoredFrom   = attribute.Key("trainyard.segment.restored_from")
	AttrDone           = attribute.Key("trainyard.segment.done")
	AttrMeanReturn     = attribute.Key("trainyard.segment.mean_return")
)

// instruments are the training metrics, labelled run_id and node.
type instruments struct {
	iterations, timesteps, episodes                metric.Int64Counter
	returnMean, returnMin, returnMax, recentReturn metric.Float64Gauge
	stepsPerSecond                                 metric.Float64Gauge
	// named are the algorithm's own metrics with a gauge of their own
	// (PPO's, by the names in learner.Metrics.Values); other is every
	// other one, labelled metric.
	named map[string]metric.Float64Gauge
	other metric.Float64Gauge
}

func newInstruments(m metric.Meter) *instruments {
	in := &instruments{}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, _ := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	gauge := func(name, desc string) metric.Float64Gauge {
		g, _ := m.Float64Gauge(name, metric.WithDescription(desc))
		return g
	}
	in.iterations = counter("trainyard.training.iterations", "{iteration}", "Training iterations completed.")
	in.timesteps = counter("trainyard.training.timesteps", "{step}", "Env steps taken by training (redone segments count again).")
	in.episodes = counter("trainyard.training.episodes", "{episode}", "Episodes finished during rollouts.")
	in.returnMean = gauge("trainyard.training.episode_return.mean", "Mean return of the episodes finished in the latest iteration.")
	in.returnMin = gauge("trainyard.training.episode_return.min", "Lowest return of the episodes finished in the latest iteration.")
	in.returnMax = gauge("trainyard.training.episode_return.max", "Highest return of the episodes finished in the latest iteration.")
	in.recentReturn = gauge("trainyard.training.episode_return.recent_mean", "Mean return of the last 100 episodes (what target_return compares).")
	in.stepsPerSecond = gauge("trainyard.training.env_steps_per_second", "Env steps per second over the latest iteration (rollout and update).")
	in.named = map[string]metric.Float64Gauge{
		"policy_loss":   gauge("trainyard.training.policy_loss", "Clipped policy loss of the latest iteration."),
		"value_loss":    gauge("trainyard.training.value_loss", "Value loss of the latest iteration."),
		"entropy":       gauge("trainyard.training.entropy", "Policy entropy of the latest iteration."),
		"approx_kl":     gauge("trainyard.training.approx_kl", "Approximate KL divergence between old and new policy in the latest iteration."),
		"learning_rate": gauge("trainyard.training.learning_rate", "Learning rate of the latest iteration."),
	}
	in.other = gauge("trainyard.training.algorithm_metric", "The algorithm's other metrics of the latest iteration (label metric: q_loss, epsilon, ...).")
	return in
}

var meter = sync.OnceValue(func() *instruments { return newInstruments(otel.Meter(instrumentation)) })

// segmentTelemetry is one segment's span and metric recorder. Not safe for
// concurrent use: the runner calls iteration from its own goroutine, end
// after it returned.
type segmentTelemetry struct {
	span      trace.Span
	in        *instruments
	attrs     metric.MeasurementOption
	labels    []attribute.KeyValue // run_id and node
	first     int64                // iteration before the segment's first; -1 until one ran
	timesteps int64                // after the previous iteration
}

// startSegment starts the segment's span. The node is the agent's: the
// last element of the activity's task queue (node/<cluster>/<node>).
func startSegment(ctx context.Context, in training.SegmentInput) (context.Context, *segmentTelemetry) {
	return startSegmentWith(ctx, in, meter())
}

func startSegmentWith(ctx context.Context, in training.SegmentInput, inst *instruments) (context.Context, *segmentTelemetry) {
	node := ""
	if activity.IsActivity(ctx) {
		q := activity.GetInfo(ctx).TaskQueue
		node = q[strings.LastIndexByte(q, '/')+1:]
	}
	ctx, span := otel.Tracer(instrumentation).Start(ctx, SpanSegment, trace.WithAttributes(
		AttrRun.String(in.RunID), AttrNode.String(node),
		AttrFromCheckpoint.Int64(in.FromCheckpoint), AttrIterations.Int(in.Iterations)))
	labels := []attribute.KeyValue{attribute.String("run_id", in.RunID), attribute.String("node", node)}
	return ctx, &segmentTelemetry{span: span, in: inst, first: -1, labels: labels,
		attrs: metric.WithAttributeSet(attribute.NewSet(labels...))}
}

// iteration records one iteration's metrics.
func (t *segmentTelemetry) iteration(ctx context.Context, m learner.Metrics) {
	steps := m.Timesteps - t.timesteps
	if t.first < 0 {
		t.first = m.Iteration - 1
		// Iterations are all the same size: the first one's steps are
		// its share of the total.
		if m.Iteration > 0 {
			steps = m.Timesteps / m.Iteration
		}
	}
	t.timesteps = m.Timesteps
	in, a := t.in, t.attrs
	in.iterations.Add(ctx, 1, a)
	in.timesteps.Add(ctx, steps, a)
	in.episodes.Add(ctx, int64(m.Episodes), a)
	if m.Episodes > 0 {
		in.returnMean.Record(ctx, m.EpisodeReturnMean, a)
		in.returnMin.Record(ctx, m.EpisodeReturnMin, a)
		in.returnMax.Record(ctx, m.EpisodeReturnMax, a)
	}
	if m.RecentEpisodes > 0 {
		in.recentReturn.Record(ctx, m.RecentReturnMean, a)
	}
	in.stepsPerSecond.Record(ctx, m.StepsPerSecond, a)
	for name, v := range m.Values {
		if g, ok := in.named[name]; ok {
			g.Record(ctx, v, a)
		} else {
			in.other.Record(ctx, v, metric.WithAttributeSet(attribute.NewSet(append(t.labels, attribute.String("metric", name))...)))
		}
	}
}

// end closes the span with what the segment did.
func (t *segmentTelemetry) end(res training.SegmentResult, err error) {
	from := t.first
	if from < 0 {
		from = res.Iteration
	}
	t.span.SetAttributes(AttrFromIteration.Int64(from), AttrToIteration.Int64(res.Iteration),
		AttrCheckpoint.Int64(res.Checkpoint), AttrRestoredFrom.Int64(res.RestoredFrom),
		AttrDone.Bool(res.Done), AttrMeanReturn.Float64(res.MeanReturn))
	if err != nil {
		t.span.RecordError(err)
		t.span.SetStatus(codes.Error, err.Error())
	}
	t.span.End()
}
