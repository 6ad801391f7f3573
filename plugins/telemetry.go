package plugins

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// SpanLoad is the span of one Load: compile (or compile-cache hit), checks
// and the first instance, under whatever span the caller's context holds.
const SpanLoad = "plugin.load"

// Span attribute keys.
const (
	AttrSHA256       = attribute.Key("trainyard.plugin.sha256")
	AttrBytes        = attribute.Key("trainyard.plugin.bytes")
	AttrName         = attribute.Key("trainyard.plugin.name")
	AttrKind         = attribute.Key("trainyard.plugin.kind")
	AttrInstrumented = attribute.Key("trainyard.plugin.instrumented")
)

// Load compiles and checks a module (imports, exports, ABI version,
// metadata). Errors wrap ErrInvalidPlugin. The returned Module must be
// closed.
func (r *Runtime) Load(ctx context.Context, wasm []byte, opts LoadOptions) (*Module, error) {
	ctx, span := otel.Tracer("github.com/trainyard/trainyard/plugins").Start(ctx, SpanLoad,
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
