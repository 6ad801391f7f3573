package pluginhost

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// MetricFaults counts plugin calls that cost their instance (traps,
// timeouts, memory exhaustion, guest faults, protocol violations), by
// plugin, call and reason: a plugin that keeps getting discarded shows up
// on /metrics before anyone reads a log.
const MetricFaults = "trainyard.plugin.faults"

// faults is created on first use, after the process installed its meter
// provider.
var faults = sync.OnceValue(func() metric.Int64Counter {
	c, _ := otel.Meter("github.com/trainyard/trainyard/internal/pluginhost").Int64Counter(MetricFaults, metric.WithUnit("{fault}"),
		metric.WithDescription("Plugin calls that failed and discarded their instance, by plugin, call and reason."))
	return c
})

// faultReasons name the sentinels of failures that discard an instance.
var faultReasons = []struct {
	err    error
	reason string
}{
	{ErrTimeout, "timeout"}, {ErrOutOfMemory, "out_of_memory"}, {ErrTrap, "trap"},
	{ErrGuestFault, "guest_fault"}, {ErrProtocol, "protocol"},
}

// recordFault counts err (a *CallError) against the plugin and call.
func recordFault(ce *CallError) {
	reason := "other"
	for _, r := range faultReasons {
		if errors.Is(ce.Err, r.err) {
			reason = r.reason
			break
		}
	}
	faults().Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("plugin", ce.Plugin), attribute.String("call", ce.Call), attribute.String("reason", reason)))
}

// SpanLoad is the span of one Load: compile (or compile-cache hit), checks
// and the first instance, under whatever span the caller's context holds.
const SpanLoad = "plugin.load"

// SpanSteps is one training iteration's step_batch calls into an env
// plugin, summed (calls, env steps, time inside the plugin), spanning the
// first call's start to the last one's end.
const SpanSteps = "plugin.step_batch"

// Span attribute keys.
const (
	AttrSHA256       = attribute.Key("trainyard.plugin.sha256")
	AttrBytes        = attribute.Key("trainyard.plugin.bytes")
	AttrName         = attribute.Key("trainyard.plugin.name")
	AttrKind         = attribute.Key("trainyard.plugin.kind")
	AttrInstrumented = attribute.Key("trainyard.plugin.instrumented")
	AttrCalls        = attribute.Key("trainyard.plugin.calls")
	AttrEnvSteps     = attribute.Key("trainyard.plugin.env_steps")
	AttrBusyMS       = attribute.Key("trainyard.plugin.busy_ms")
)

// Load compiles and checks a module (imports, exports, ABI version,
// metadata). Errors wrap ErrInvalidPlugin. The returned Module must be
// closed.
func (r *Runtime) Load(ctx context.Context, wasm []byte, opts LoadOptions) (*Module, error) {
	ctx, span := otel.Tracer("github.com/trainyard/trainyard/internal/pluginhost").Start(ctx, SpanLoad,
		trace.WithAttributes(AttrSHA256.String(SHA256(wasm)), AttrBytes.Int(len(wasm))))
	defer span.End()
	m, err := r.load(ctx, wasm, opts)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	span.SetAttributes(AttrName.String(m.meta.Label()), AttrKind.String(string(m.meta.Kind)), AttrInstrumented.Bool(m.instrumented))
	return m, nil
}

// RecordSteps ends a SpanSteps span for st under ctx's span (nothing when
// there were no calls).
func RecordSteps(ctx context.Context, st StepStats, attrs ...attribute.KeyValue) {
	if st.Calls == 0 {
		return
	}
	_, span := otel.Tracer("github.com/trainyard/trainyard/internal/pluginhost").Start(ctx, SpanSteps, trace.WithTimestamp(st.First),
		trace.WithAttributes(append(attrs, AttrCalls.Int(st.Calls), AttrEnvSteps.Int64(st.EnvSteps),
			AttrBusyMS.Float64(float64(st.Busy.Microseconds())/1000))...))
	span.End(trace.WithTimestamp(st.Last))
}
