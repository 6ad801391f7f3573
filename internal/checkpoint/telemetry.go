package checkpoint

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry: a span per save and per restore (children of whatever span
// the caller's context holds, e.g. a training segment), and metrics through
// the global meter provider (Prometheus /metrics, OTLP when configured).

const instrumentation = "github.com/trainyard/trainyard/internal/checkpoint"

// Span names.
const (
	SpanSave    = "checkpoint.save"
	SpanRestore = "checkpoint.restore"
)

// Span attribute keys.
const (
	AttrRun            = attribute.Key("trainyard.run_id")
	AttrSeq            = attribute.Key("trainyard.checkpoint.seq")
	AttrIteration      = attribute.Key("trainyard.checkpoint.iteration")
	AttrFiles          = attribute.Key("trainyard.checkpoint.files")
	AttrBytes          = attribute.Key("trainyard.checkpoint.bytes")
	AttrBytesUploaded  = attribute.Key("trainyard.checkpoint.bytes_uploaded")
	AttrChunks         = attribute.Key("trainyard.checkpoint.chunks")
	AttrChunksUploaded = attribute.Key("trainyard.checkpoint.chunks_uploaded")
	AttrChunksSkipped  = attribute.Key("trainyard.checkpoint.chunks_skipped")
)

type instruments struct {
	saveDuration, restoreDuration metric.Float64Histogram
	saveBytes, uploadedBytes      metric.Int64Counter
	restoredBytes                 metric.Int64Counter
	chunks                        metric.Int64Counter
	staleRefused                  metric.Int64Counter
}

// meter is built on first use, after the process installed its provider
// (the global one delegates either way).
var meter = sync.OnceValue(func() *instruments { return newInstruments(otel.Meter(instrumentation)) })

func newInstruments(m metric.Meter) *instruments {
	// Errors only come from invalid names; the instruments are then no-ops.
	in := &instruments{}
	buckets := metric.WithExplicitBucketBoundaries(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
	in.saveDuration, _ = m.Float64Histogram("trainyard.checkpoint.save.duration", metric.WithUnit("s"), buckets,
		metric.WithDescription("Wall time of a checkpoint save: chunking, uploads of new chunks, manifest."))
	in.restoreDuration, _ = m.Float64Histogram("trainyard.checkpoint.restore.duration", metric.WithUnit("s"), buckets,
		metric.WithDescription("Wall time of a checkpoint restore, checksums verified."))
	in.saveBytes, _ = m.Int64Counter("trainyard.checkpoint.saved", metric.WithUnit("By"),
		metric.WithDescription("Bytes in the files of saved checkpoints (what a full copy would send)."))
	in.uploadedBytes, _ = m.Int64Counter("trainyard.checkpoint.uploaded", metric.WithUnit("By"),
		metric.WithDescription("Chunk bytes actually uploaded; 1 - uploaded/saved is the share deduplication saved."))
	in.restoredBytes, _ = m.Int64Counter("trainyard.checkpoint.restored", metric.WithUnit("By"),
		metric.WithDescription("Bytes restored from checkpoints."))
	in.chunks, _ = m.Int64Counter("trainyard.checkpoint.chunks",
		metric.WithDescription("Chunks of saved checkpoints, by whether they were uploaded or already stored (uploaded=false)."))
	in.staleRefused, _ = m.Int64Counter("trainyard.checkpoint.stale_refused",
		metric.WithDescription("Writes and claims refused because a newer placement holds the run (a late writer: partitioned, or declared lost)."))
	return in
}

func result(err error) attribute.KeyValue {
	if err != nil {
		return attribute.String("result", "error")
	}
	return attribute.String("result", "ok")
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// tracedSave is save inside a checkpoint.save span, with its metrics.
func (s *Store) tracedSave(ctx context.Context, run string, srcs []source, meta Meta) (Manifest, Stats, error) {
	ctx, span := otel.Tracer(instrumentation).Start(ctx, SpanSave, trace.WithAttributes(
		AttrRun.String(run), AttrIteration.Int64(meta.Iteration), AttrFiles.Int(len(srcs))))
	start := time.Now()
	m, st, err := s.save(ctx, run, srcs, meta)
	in := meter()
	in.saveDuration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(result(err)))
	if err == nil {
		in.saveBytes.Add(ctx, st.BytesTotal)
		in.uploadedBytes.Add(ctx, st.BytesUploaded)
		in.chunks.Add(ctx, int64(st.ChunksUploaded), metric.WithAttributes(attribute.Bool("uploaded", true)))
		in.chunks.Add(ctx, int64(st.ChunksTotal-st.ChunksUploaded), metric.WithAttributes(attribute.Bool("uploaded", false)))
		span.SetAttributes(AttrSeq.Int64(m.Seq))
	}
	span.SetAttributes(AttrBytes.Int64(st.BytesTotal), AttrBytesUploaded.Int64(st.BytesUploaded),
		AttrChunks.Int(st.ChunksTotal), AttrChunksUploaded.Int(st.ChunksUploaded),
		AttrChunksSkipped.Int(st.ChunksTotal-st.ChunksUploaded))
	endSpan(span, err)
	return m, st, err
}

// tracedRestore is restoreManifest inside a checkpoint.restore span.
func (s *Store) tracedRestore(ctx context.Context, m Manifest, dstDir string) error {
	chunks := 0
	for _, f := range m.Files {
		chunks += len(f.Chunks)
	}
	ctx, span := otel.Tracer(instrumentation).Start(ctx, SpanRestore, trace.WithAttributes(
		AttrRun.String(m.Run), AttrSeq.Int64(m.Seq), AttrIteration.Int64(m.Meta.Iteration),
		AttrFiles.Int(len(m.Files)), AttrBytes.Int64(m.Size()), AttrChunks.Int(chunks)))
	start := time.Now()
	err := s.restoreManifest(ctx, m, dstDir)
	in := meter()
	in.restoreDuration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(result(err)))
	if err == nil {
		in.restoredBytes.Add(ctx, m.Size())
	}
	endSpan(span, err)
	return err
}
