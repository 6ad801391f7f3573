package params

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"
)

func TestDefaultMatchesPolicies(t *testing.T) {
	raw, err := os.ReadFile("../../../policies/data.json")
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(defaultJSON), &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("default.go is out of date with policies/data.json")
	}
}

func TestLookups(t *testing.T) {
	p := Default()
	tiers := []struct {
		vram, tier int
	}{{81559, 1}, {8 * 24564, 1}, {65214, 2}, {46068, 2}, {32607, 2}, {24576, 3}, {8192, 3}, {4096, 0}, {0, 0}}
	for _, tt := range tiers {
		if got := p.TierOf(tt.vram); got != tt.tier {
			t.Errorf("TierOf(%d) = %d, want %d", tt.vram, got, tt.tier)
		}
	}
	quotas := []struct {
		config string
		q      float64
		ok     bool
	}{{"hexagonal_4p", 0.25, true}, {"square8_3p", 0.10, true}, {"hex8_2p", 0.10, true}, {"hexagonal_9p", 0, false}}
	for _, tt := range quotas {
		if q, ok := p.Quota(tt.config); q != tt.q || ok != tt.ok {
			t.Errorf("Quota(%s) = %v, %v", tt.config, q, ok)
		}
	}
	if v, ok := p.MinVRAMMB(BoardOf("square19_2p")); !ok || v != 16000 {
		t.Errorf("square19 min VRAM = %d, %v", v, ok)
	}
	if got := p.EffectivePriority(3, 4*time.Hour); got != 103 {
		t.Errorf("boost at 4 h: %d", got)
	}
	if got := p.EffectivePriority(3, 4*time.Hour-time.Second); got != 3 {
		t.Errorf("boost before 4 h: %d", got)
	}
	if p.ReservedGPU("n", 0, []int{0, 1}) {
		t.Error("reserved with preservation off")
	}
	p.GPUPreservation.Enabled = true
	p.GPUPreservation.ReservedPerNode = 1
	if !p.ReservedGPU("n", 3, []int{5, 3, 4}) || p.ReservedGPU("n", 4, []int{5, 3, 4}) {
		t.Error("reserved_per_node should take the lowest index")
	}
	if _, err := Parse([]byte(`{"capacity_share": 1.5}`)); err == nil {
		t.Error("capacity_share 1.5 accepted")
	}
}
