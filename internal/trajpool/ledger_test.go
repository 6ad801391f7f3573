package trajpool

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestLedger: adds and removes agree with a map, ranges stay merged, and
// JSON round-trips.
func TestLedger(t *testing.T) {
	var l Ledger
	want := map[int64]bool{}
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		e := r.Int64N(300)
		if r.IntN(3) == 0 {
			if got := l.Remove(e); got != want[e] {
				t.Fatalf("Remove(%d) = %v, want %v", e, got, want[e])
			}
			delete(want, e)
		} else {
			if got := l.Add(e); got == want[e] {
				t.Fatalf("Add(%d) = %v with %v present", e, got, want[e])
			}
			want[e] = true
		}
	}
	for e := int64(-1); e < 301; e++ {
		if l.Has(e) != want[e] {
			t.Fatalf("Has(%d) = %v", e, l.Has(e))
		}
	}
	if l.Len() != int64(len(want)) {
		t.Fatalf("Len %d, want %d", l.Len(), len(want))
	}
	for i := 1; i < len(l.r); i++ {
		if l.r[i][0] <= l.r[i-1][1]+1 {
			t.Fatalf("ranges not merged: %v", l.r)
		}
	}
	b, _ := json.Marshal(l)
	var back Ledger
	if err := json.Unmarshal(b, &back); err != nil || back.Len() != l.Len() {
		t.Fatalf("round trip: %v %s", err, b)
	}
	var contiguous Ledger
	for e := range int64(1000) {
		contiguous.Add(999 - e)
	}
	if b, _ := json.Marshal(contiguous); string(b) != "[[0,999]]" {
		t.Fatalf("1000 episodes: %s, want one range", b)
	}
	for _, bad := range []string{`[[3,1]]`, `[[0,4],[5,6]]`, `[[5,6],[0,1]]`, `[[-1,2]]`, `{"a":1}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func FuzzLedgerJSON(f *testing.F) {
	f.Add([]byte(`[[0,3],[5,9]]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l Ledger
		if json.Unmarshal(b, &l) != nil {
			return
		}
		out, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		var back Ledger
		if err := json.Unmarshal(out, &back); err != nil || back.Len() != l.Len() {
			t.Fatalf("%s → %s: %v", b, out, err)
		}
	})
}
