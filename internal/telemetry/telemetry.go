// Package telemetry sets up OpenTelemetry once per process: tracer and meter
// providers (OTLP over HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set, off
// otherwise), W3C trace-context propagation, and a slog handler that stamps
// every log line with the active trace and span ids.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry is what Setup installed.
type Telemetry struct {
	// Metrics serves every OTel metric of this process (Temporal SDK's
	// included) in the Prometheus text format, OTLP or not.
	Metrics http.Handler
	// Shutdown flushes and stops the providers.
	Shutdown func(context.Context) error
}

// Setup installs global providers for service: metrics always (a Prometheus
// registry, plus OTLP when configured), traces only when an OTLP endpoint is
// set. The exporters read the standard OTEL_* variables.
func Setup(ctx context.Context, service string) (*Telemetry, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	reg := prom.NewRegistry()
	pe, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	readers := []sdkmetric.Option{sdkmetric.WithReader(pe), sdkmetric.WithResource(res)}
	otlp := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	var tp *sdktrace.TracerProvider
	if otlp {
		te, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("otlp trace exporter: %w", err)
		}
		me, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("otlp metric exporter: %w", err)
		}
		tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(te), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me)))
	}
	mp := sdkmetric.NewMeterProvider(readers...)
	otel.SetMeterProvider(mp)
	return &Telemetry{
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Shutdown: func(ctx context.Context) error {
			var errs []error
			if tp != nil {
				errs = append(errs, tp.Shutdown(ctx))
			}
			return errors.Join(append(errs, mp.Shutdown(ctx))...)
		},
	}, nil
}

// NewLogger returns a JSON or text slog logger at level whose records carry
// trace_id and span_id when the context has a recording span.
func NewLogger(w io.Writer, level slog.Level, json bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if json {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(traceHandler{h})
}

type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(a)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}
