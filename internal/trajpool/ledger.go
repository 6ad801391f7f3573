package trajpool

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// Ledger is a set of episode numbers kept as sorted, disjoint, non-adjacent
// ranges: episodes finish roughly in order, so a long loop's ledger stays
// a few ranges. It is how a pool deduplicates trajectories (an episode
// replayed after a crash is counted once) and what a loop's checkpoint
// records as trained on. The zero value is empty; not safe for concurrent
// use (the pool guards its own).
type Ledger struct {
	r [][2]int64 // inclusive [first, last]
}

// find is the index of the first range whose last ≥ e.
func (l *Ledger) find(e int64) int {
	return sort.Search(len(l.r), func(i int) bool { return l.r[i][1] >= e })
}

// Has reports whether e is in the ledger.
func (l *Ledger) Has(e int64) bool {
	i := l.find(e)
	return i < len(l.r) && l.r[i][0] <= e
}

// Add adds e; false when it was already there.
func (l *Ledger) Add(e int64) bool {
	i := l.find(e)
	if i < len(l.r) && l.r[i][0] <= e {
		return false
	}
	joinLeft := i > 0 && l.r[i-1][1] == e-1
	joinRight := i < len(l.r) && l.r[i][0] == e+1
	switch {
	case joinLeft && joinRight:
		l.r[i-1][1] = l.r[i][1]
		l.r = slices.Delete(l.r, i, i+1)
	case joinLeft:
		l.r[i-1][1] = e
	case joinRight:
		l.r[i][0] = e
	default:
		l.r = slices.Insert(l.r, i, [2]int64{e, e})
	}
	return true
}

// Remove removes e; false when it was not there.
func (l *Ledger) Remove(e int64) bool {
	i := l.find(e)
	if i == len(l.r) || l.r[i][0] > e {
		return false
	}
	a, b := l.r[i][0], l.r[i][1]
	switch {
	case a == b:
		l.r = slices.Delete(l.r, i, i+1)
	case e == a:
		l.r[i][0]++
	case e == b:
		l.r[i][1]--
	default:
		l.r[i][1] = e - 1
		l.r = slices.Insert(l.r, i+1, [2]int64{e + 1, b})
	}
	return true
}

// Len is the number of episodes.
func (l *Ledger) Len() int64 {
	var n int64
	for _, r := range l.r {
		n += r[1] - r[0] + 1
	}
	return n
}

// Clone is an independent copy.
func (l *Ledger) Clone() Ledger { return Ledger{r: slices.Clone(l.r)} }

// MarshalJSON writes [[first, last], ...].
func (l Ledger) MarshalJSON() ([]byte, error) {
	if l.r == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(l.r)
}

// UnmarshalJSON reads [[first, last], ...], checking the ranges are
// sorted, disjoint and well-formed (a ledger comes back from a checkpoint
// or over the network).
func (l *Ledger) UnmarshalJSON(b []byte) error {
	var r [][2]int64
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("episode ledger: %w", err)
	}
	for i, x := range r {
		if x[0] < 0 || x[1] < x[0] || (i > 0 && x[0] <= r[i-1][1]+1) {
			return fmt.Errorf("episode ledger: range %d %v: want sorted, disjoint, non-adjacent [first, last] ranges of episodes ≥ 0", i, x)
		}
	}
	l.r = r
	return nil
}
