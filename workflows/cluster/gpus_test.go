package cluster

import (
	"testing"

	"github.com/trainyard/trainyard/internal/resources"
)

func TestGPUsDiffer(t *testing.T) {
	titan := resources.GPU{Model: "TITAN X (Pascal)", VRAMMB: 12288}
	h200 := resources.GPU{Model: "NVIDIA H200", VRAMMB: 143771}
	for _, tc := range []struct {
		name                string
		described, reported []resources.GPU
		want                string
	}{
		{"nothing described", nil, []resources.GPU{h200}, ""},
		{"same", []resources.GPU{titan, titan}, []resources.GPU{titan, {Model: "NVIDIA TITAN X (Pascal)", VRAMMB: 12196}}, ""},
		{"vendor prefix and case", []resources.GPU{{Model: "h200"}}, []resources.GPU{h200}, ""},
		{"other model", []resources.GPU{titan}, []resources.GPU{h200}, "the spec describes 1×TITAN X (Pascal); the agent reports 1×NVIDIA H200"},
		{"fewer", []resources.GPU{titan, titan}, []resources.GPU{titan}, "the spec describes 2×TITAN X (Pascal); the agent reports 1×TITAN X (Pascal)"},
		{"none found", []resources.GPU{h200}, nil, "the spec describes 1×NVIDIA H200; the agent reports no GPUs"},
	} {
		if got := gpusDiffer(tc.described, tc.reported); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
