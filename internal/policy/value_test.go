package policy

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// TestValueMatchesJSON: the hand-built AST equals OPA's reading of the
// input's JSON, so policies see the documented shape.
func TestValueMatchesJSON(t *testing.T) {
	full := Input{
		Work: Work{ID: "w", Kind: "training", Config: "hexagonal_4p", Board: "hexagonal", Priority: 3, WaitingSeconds: 7,
			Roles:     []Role{{Name: "trainer", Count: 1, CPUs: 7.5, GPUs: 0.25, MemoryMB: 1000, MinVRAMMB: 2}},
			Providers: &Providers{Prefer: []string{"runpod"}, Avoid: []string{"vast"}}},
		Cluster: Cluster{Nodes: []Node{
			{Name: "a", Provider: "vast", Ephemeral: true, CPUs: 8, MemoryMB: 64000, GPUs: []GPU{{Index: 0, VRAMMB: 24576}}, Used: Used{CPUs: 1.5, MemoryMB: 100}},
			{Name: "b", CPUs: 2, MemoryMB: 10},
		}},
		Usage:     Usage{Tier1CapacitySeconds: 86400, Tier1GPUSecondsByConfig: map[string]float64{"x": 1.5, "a": 2}, RunningTrainingByConfig: map[string]int{"x": 1}},
		Placement: []Placed{{Node: "a", Role: "trainer", Count: 2, CPUs: 1, MemoryMB: 5, GPUs: []PlacedGPU{{Index: 0, Share: 0.5}}}, {Node: "b", Role: "r"}},
	}
	tests := []struct {
		name string
		in   Input
	}{{"full", full}, {"empty", Input{}}, {"no roles", Input{Work: Work{ID: "x", Roles: []Role{}}, Cluster: Cluster{Nodes: []Node{}}}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ast.ValueFromReader(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			got := tt.in.value(clusterValue(tt.in.Cluster))
			if ast.Compare(got, want) != 0 {
				t.Errorf("AST differs from JSON:\n got  %v\n want %v", got, want)
			}
		})
	}
}
