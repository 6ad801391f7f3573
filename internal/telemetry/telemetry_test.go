package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestLogLinesCarryTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(traceHandler{slog.NewJSONHandler(&buf, nil)})
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "op")
	log.InfoContext(ctx, "inside")
	span.End()
	log.InfoContext(context.Background(), "outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines", len(lines))
	}
	want := `"trace_id":"` + span.SpanContext().TraceID().String() + `"`
	if !strings.Contains(lines[0], want) {
		t.Errorf("line in span lacks %s: %s", want, lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("line outside span has a trace id: %s", lines[1])
	}
}
