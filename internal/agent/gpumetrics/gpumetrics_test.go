package gpumetrics

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/trainyard/trainyard/internal/agent/detect"
)

// fakeSMI stands in for nvidia-smi on this GPU-less machine, answering the
// agent's query with out and counting its calls in a file.
func fakeSMI(t *testing.T, out string) (path, calls string) {
	dir := t.TempDir()
	path, calls = filepath.Join(dir, "nvidia-smi"), filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho x >> " + calls + "\ncat <<'OUT'\n" + out + "OUT\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, calls
}

func TestGauges(t *testing.T) {
	for _, tc := range []struct {
		name, smi, gpus string
		want            map[string]float64 // metric{gpu} → value
	}{
		{
			name: "two measured GPUs",
			smi:  "0, NVIDIA TITAN X (Pascal), 12288, 87, 10240\n1, NVIDIA GeForce GTX 1080 Ti, 11264, 0, 3\n",
			want: map[string]float64{
				"trainyard.node.gpus":               2,
				"trainyard.node.gpu.utilization{0}": 0.87, "trainyard.node.gpu.utilization{1}": 0,
				"trainyard.node.gpu.memory.used{0}": 10240 << 20, "trainyard.node.gpu.memory.used{1}": 3 << 20,
				"trainyard.node.gpu.memory.capacity{0}": 12288 << 20, "trainyard.node.gpu.memory.capacity{1}": 11264 << 20,
			},
		},
		{
			name: "described GPU: capacity only",
			gpus: "1xA100:80GB",
			want: map[string]float64{"trainyard.node.gpus": 1, "trainyard.node.gpu.memory.capacity{0}": 80 << 30},
		},
		{name: "no GPUs", smi: "", want: map[string]float64{"trainyard.node.gpus": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			smi, calls := fakeSMI(t, tc.smi)
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			src := func(ctx context.Context) ([]detect.GPUStatus, error) {
				return detect.GPUs(ctx, detect.Options{GPUs: tc.gpus, NvidiaSMI: smi})
			}
			if _, err := Register(mp.Meter("test"), "lab", "nickel", src, time.Hour); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				got := collect(t, reader)
				for k, v := range tc.want {
					if g, ok := got[k]; !ok || g != v {
						t.Errorf("%s = %v (present %v), want %v; all: %v", k, g, ok, v, got)
					}
				}
				if len(got) != len(tc.want) {
					t.Errorf("got %d series, want %d: %v", len(got), len(tc.want), got)
				}
			}
			if tc.gpus == "" {
				b, _ := os.ReadFile(calls)
				if n := strings.Count(string(b), "x"); n != 1 {
					t.Errorf("nvidia-smi ran %d times for two collections within maxAge, want 1", n)
				}
			}
		})
	}
}

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	put := func(name string, set attribute.Set, v float64) {
		if c, _ := set.Value("cluster"); c.AsString() != "lab" {
			t.Errorf("%s without cluster=lab: %v", name, set.Encoded(attribute.DefaultEncoder()))
		}
		if n, _ := set.Value("node"); n.AsString() != "nickel" {
			t.Errorf("%s without node=nickel", name)
		}
		if gpu, ok := set.Value("gpu"); ok {
			name += "{" + gpu.AsString() + "}"
		}
		out[name] = v
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					put(m.Name, p.Attributes, float64(p.Value))
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					put(m.Name, p.Attributes, p.Value)
				}
			}
		}
	}
	return out
}
