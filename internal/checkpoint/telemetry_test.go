package checkpoint

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestTelemetry: a save and a restore are spans under the caller's span
// with sizes and chunk counts, and feed the checkpoint metrics.
func TestTelemetry(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))

	s := newStore(t)
	ctx, parent := otel.Tracer("test").Start(t.Context(), "segment")
	files := map[string][]byte{"a.bin": randBytes(7, 300<<10), "b.json": []byte(`{"x":1}`)}
	if _, _, err := s.Save(ctx, "tele", readers(files), Meta{Iteration: 3}); err != nil {
		t.Fatal(err)
	}
	files["b.json"] = []byte(`{"x":2}`) // a.bin's chunks are stored already
	m, st, err := s.Save(ctx, "tele", readers(files), Meta{Iteration: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RestoreManifest(ctx, m, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	parent.End()

	var saves, restores []sdktrace.ReadOnlySpan
	for _, sp := range spans.Ended() {
		if sp.Parent().SpanID() != parent.SpanContext().SpanID() {
			continue
		}
		switch sp.Name() {
		case SpanSave:
			saves = append(saves, sp)
		case SpanRestore:
			restores = append(restores, sp)
		}
	}
	if len(saves) != 2 || len(restores) != 1 {
		t.Fatalf("got %d save and %d restore spans under the caller's span, want 2 and 1", len(saves), len(restores))
	}
	attrs := func(sp sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
		out := map[attribute.Key]attribute.Value{}
		for _, kv := range sp.Attributes() {
			out[kv.Key] = kv.Value
		}
		return out
	}
	second := attrs(saves[1])
	if second[AttrSeq].AsInt64() != 2 || second[AttrIteration].AsInt64() != 4 || second[AttrRun].AsString() != "tele" {
		t.Errorf("second save span: %v", second)
	}
	if second[AttrBytes].AsInt64() != st.BytesTotal || second[AttrChunksUploaded].AsInt64() != int64(st.ChunksUploaded) ||
		second[AttrChunksSkipped].AsInt64() != int64(st.ChunksTotal-st.ChunksUploaded) || second[AttrChunksSkipped].AsInt64() < 3 {
		t.Errorf("second save span %v does not match its stats %+v", second, st)
	}
	if r := attrs(restores[0]); r[AttrSeq].AsInt64() != 2 || r[AttrBytes].AsInt64() != m.Size() || r[AttrChunks].AsInt64() != int64(st.ChunksTotal) {
		t.Errorf("restore span: %v", r)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	hists := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sums[mt.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					hists[mt.Name] += p.Count
				}
			}
		}
	}
	if sums["trainyard.checkpoint.saved"] < 2*m.Size() || sums["trainyard.checkpoint.uploaded"] <= 0 ||
		sums["trainyard.checkpoint.restored"] < m.Size() || sums["trainyard.checkpoint.chunks"] < int64(2*st.ChunksTotal) {
		t.Errorf("checkpoint counters: %v", sums)
	}
	if hists["trainyard.checkpoint.save.duration"] < 2 || hists["trainyard.checkpoint.restore.duration"] < 1 {
		t.Errorf("checkpoint duration histograms: %v", hists)
	}
}
