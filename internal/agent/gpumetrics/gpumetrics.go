// Package gpumetrics exports a node's GPU utilisation and memory, as
// nvidia-smi reports them, as OpenTelemetry gauges (so on the agent's
// Prometheus /metrics and over OTLP).
package gpumetrics

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/trainyard/trainyard/internal/agent/detect"
)

// Source reads the GPUs now (detect.GPUs in the agent).
type Source func(ctx context.Context) ([]detect.GPUStatus, error)

// Register adds the gauges to meter, labelled cluster and node and, per
// device, gpu (index) and model:
//
//	trainyard_node_gpu_utilization_ratio      0..1, nvidia-smi utilization.gpu
//	trainyard_node_gpu_memory_used_bytes      memory.used
//	trainyard_node_gpu_memory_capacity_bytes  memory.total
//	trainyard_node_gpus                       devices seen
//
// A collection reads src at most once per maxAge (every scrape and the
// OTLP reader share one nvidia-smi call). Devices whose load is unknown
// (described with --gpus, not measured) report capacity only.
func Register(meter metric.Meter, cluster, node string, src Source, maxAge time.Duration) (metric.Registration, error) {
	util, err := meter.Float64ObservableGauge("trainyard.node.gpu.utilization", metric.WithUnit("1"),
		metric.WithDescription("GPU utilisation (0..1) as nvidia-smi reports it."))
	if err != nil {
		return nil, err
	}
	used, err := meter.Int64ObservableGauge("trainyard.node.gpu.memory.used", metric.WithUnit("By"),
		metric.WithDescription("GPU memory in use, bytes."))
	if err != nil {
		return nil, err
	}
	capacity, err := meter.Int64ObservableGauge("trainyard.node.gpu.memory.capacity", metric.WithUnit("By"),
		metric.WithDescription("GPU memory in all, bytes."))
	if err != nil {
		return nil, err
	}
	count, err := meter.Int64ObservableGauge("trainyard.node.gpus", metric.WithUnit("{gpu}"),
		metric.WithDescription("GPUs the node has."))
	if err != nil {
		return nil, err
	}
	c := &cache{src: src, maxAge: maxAge}
	base := []attribute.KeyValue{attribute.String("cluster", cluster), attribute.String("node", node)}
	return meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		gs, err := c.read(ctx)
		if err != nil {
			return nil // no sample beats an error per scrape; the agent logs detection errors
		}
		o.ObserveInt64(count, int64(len(gs)), metric.WithAttributes(base...))
		for _, g := range gs {
			attrs := metric.WithAttributes(append(base[:len(base):len(base)],
				attribute.String("gpu", strconv.Itoa(g.Index)), attribute.String("model", g.Model))...)
			o.ObserveInt64(capacity, int64(g.VRAMMB)<<20, attrs)
			if g.UtilizationPct >= 0 {
				o.ObserveFloat64(util, float64(g.UtilizationPct)/100, attrs)
			}
			if g.MemoryUsedMB >= 0 {
				o.ObserveInt64(used, int64(g.MemoryUsedMB)<<20, attrs)
			}
		}
		return nil
	}, util, used, capacity, count)
}

type cache struct {
	src    Source
	maxAge time.Duration
	mu     sync.Mutex
	at     time.Time
	gs     []detect.GPUStatus
	err    error
}

func (c *cache) read(ctx context.Context) ([]detect.GPUStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= c.maxAge {
		c.gs, c.err = c.src(ctx)
		c.at = time.Now()
	}
	return c.gs, c.err
}
