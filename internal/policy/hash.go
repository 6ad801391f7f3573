package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"unicode/utf8"
)

// The input hash and the cache keys of the cluster and usage terms come
// from a length-prefixed binary encoding of every input field: a fraction
// of the cost of json.Marshal, which was a fifth of a decision for the
// seed-002 fleet. TestInputHashCoversEveryField fails when a field is
// added to the input types but not here.

// encoder holds a reusable buffer.
type encoder struct{ buf []byte }

var encoders = sync.Pool{New: func() any { return &encoder{buf: make([]byte, 0, 4096)} }}

func getEncoder() *encoder  { return encoders.Get().(*encoder) }
func putEncoder(e *encoder) { encoders.Put(e) }

// sum is SHA-256 of what fill appends to an empty buffer.
func (e *encoder) sum(fill func([]byte) []byte) [32]byte {
	e.buf = fill(e.buf[:0])
	return sha256.Sum256(e.buf)
}

func appendCluster(b []byte, c *Cluster) []byte {
	b = appendLen(b, len(c.Nodes), c.Nodes == nil)
	for i := range c.Nodes {
		n := &c.Nodes[i]
		b = appendString(b, n.Name)
		b = appendString(b, n.Provider)
		b = appendBool(b, n.Ephemeral)
		b = appendFloat(b, n.CPUs)
		b = binary.AppendVarint(b, n.MemoryMB)
		b = appendLen(b, len(n.GPUs), n.GPUs == nil)
		for _, g := range n.GPUs {
			b = binary.AppendVarint(b, int64(g.Index))
			b = binary.AppendVarint(b, int64(g.VRAMMB))
		}
		b = appendFloat(b, n.Used.CPUs)
		b = binary.AppendVarint(b, n.Used.MemoryMB)
	}
	b = appendLen(b, len(c.Endpoints), c.Endpoints == nil)
	for _, e := range c.Endpoints {
		b = appendString(b, e.Name)
		b = appendStrings(b, e.Nodes)
		b = binary.AppendVarint(b, int64(e.GPUs))
	}
	return b
}

func appendUsage(b []byte, u *Usage) []byte {
	b = appendFloat(b, u.Tier1CapacitySeconds)
	b = appendLen(b, len(u.Tier1GPUSecondsByConfig), false)
	for _, k := range sortedKeys(u.Tier1GPUSecondsByConfig) {
		b = appendString(b, k)
		b = appendFloat(b, u.Tier1GPUSecondsByConfig[k])
	}
	b = appendLen(b, len(u.RunningTrainingByConfig), false)
	for _, k := range sortedKeys(u.RunningTrainingByConfig) {
		b = appendString(b, k)
		b = binary.AppendVarint(b, int64(u.RunningTrainingByConfig[k]))
	}
	return b
}

func appendWork(b []byte, w *Work) []byte {
	b = appendString(b, w.ID)
	b = appendString(b, w.Kind)
	b = appendBool(b, w.Trains)
	b = appendString(b, w.Config)
	b = appendString(b, w.Board)
	b = binary.AppendVarint(b, int64(w.Priority))
	b = binary.AppendVarint(b, w.WaitingSeconds)
	b = appendLen(b, len(w.Roles), w.Roles == nil)
	for i := range w.Roles {
		r := &w.Roles[i]
		b = appendString(b, r.Name)
		b = binary.AppendVarint(b, int64(r.Count))
		b = appendFloat(b, r.CPUs)
		b = appendFloat(b, r.GPUs)
		b = binary.AppendVarint(b, r.MemoryMB)
		b = binary.AppendVarint(b, int64(r.MinVRAMMB))
	}
	b = appendBool(b, w.Providers != nil)
	if w.Providers != nil {
		b = appendStrings(b, w.Providers.Prefer)
		b = appendStrings(b, w.Providers.Avoid)
	}
	b = appendBool(b, w.Capabilities != nil)
	if c := w.Capabilities; c != nil {
		b = appendStrings(b, c.HTTP)
		b = appendFloat(b, c.HTTPRate)
	}
	return appendStrings(b, w.PluginCapabilities)
}

func appendPlacement(b []byte, ps []Placed) []byte {
	b = appendLen(b, len(ps), ps == nil)
	for i := range ps {
		p := &ps[i]
		b = appendString(b, p.Node)
		b = appendString(b, p.Role)
		b = binary.AppendVarint(b, int64(p.Count))
		b = appendFloat(b, p.CPUs)
		b = binary.AppendVarint(b, p.MemoryMB)
		b = appendLen(b, len(p.GPUs), p.GPUs == nil)
		for _, g := range p.GPUs {
			b = binary.AppendVarint(b, int64(g.Index))
			b = appendFloat(b, g.Share)
		}
	}
	return b
}

// appendLen writes a length; nil slices differ from empty ones because
// they reach the policies differently (null vs []).
func appendLen(b []byte, n int, isNil bool) []byte {
	if isNil {
		return append(b, 0)
	}
	return binary.AppendUvarint(b, uint64(n)+1)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendStrings(b []byte, xs []string) []byte {
	b = appendLen(b, len(xs), xs == nil)
	for _, x := range xs {
		b = appendString(b, x)
	}
	return b
}

func appendFloat(b []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// checkInput refuses what JSON cannot carry, so that both evaluators (the
// Wasm module reads the input as JSON, the interpreter as terms) see the
// same input: NaN and infinite numbers, which OPA's arithmetic cannot
// handle either, and strings that are not UTF-8 (JSON would replace the
// bad bytes). Inputs decoded from the API's JSON never have them.
func checkInput(in *Input) error {
	if err := checkFinite(in); err != nil {
		return err
	}
	if s := firstInvalidUTF8(in); s != "" {
		return fmt.Errorf("string %q is not valid UTF-8", s)
	}
	return nil
}

// firstInvalidUTF8 returns the first string of the input that is not
// valid UTF-8, or "" (which is valid) when there is none.
func firstInvalidUTF8(in *Input) string {
	var bad string
	check := func(ss ...string) {
		for _, s := range ss {
			if bad == "" && !utf8.ValidString(s) {
				bad = s
			}
		}
	}
	w := &in.Work
	check(w.ID, w.Kind, w.Config, w.Board)
	check(w.PluginCapabilities...)
	for _, r := range w.Roles {
		check(r.Name)
	}
	if w.Providers != nil {
		check(w.Providers.Prefer...)
		check(w.Providers.Avoid...)
	}
	if w.Capabilities != nil {
		check(w.Capabilities.HTTP...)
	}
	for _, n := range in.Cluster.Nodes {
		check(n.Name, n.Provider)
	}
	for _, e := range in.Cluster.Endpoints {
		check(e.Name)
		check(e.Nodes...)
	}
	for k := range in.Usage.Tier1GPUSecondsByConfig {
		check(k)
	}
	for k := range in.Usage.RunningTrainingByConfig {
		check(k)
	}
	for _, p := range in.Placement {
		check(p.Node, p.Role)
	}
	return bad
}

// checkFinite refuses NaN and infinite numbers, which JSON cannot carry
// and OPA's arithmetic cannot handle.
func checkFinite(in *Input) error {
	bad := func(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }
	for _, n := range in.Cluster.Nodes {
		if bad(n.CPUs) || bad(n.Used.CPUs) {
			return fmt.Errorf("node %s: CPUs are not finite", n.Name)
		}
	}
	for _, r := range in.Work.Roles {
		if bad(r.CPUs) || bad(r.GPUs) {
			return fmt.Errorf("role %s: CPUs or GPUs are not finite", r.Name)
		}
	}
	if c := in.Work.Capabilities; c != nil && bad(c.HTTPRate) {
		return errors.New("capabilities: http_rate is not finite")
	}
	if bad(in.Usage.Tier1CapacitySeconds) {
		return errors.New("usage: Tier-1 capacity is not finite")
	}
	for cfg, v := range in.Usage.Tier1GPUSecondsByConfig {
		if bad(v) {
			return fmt.Errorf("usage of %s is not finite", cfg)
		}
	}
	for _, p := range in.Placement {
		if bad(p.CPUs) {
			return fmt.Errorf("placement of %s on %s: CPUs are not finite", p.Role, p.Node)
		}
		for _, g := range p.GPUs {
			if bad(g.Share) {
				return fmt.Errorf("placement of %s on %s: GPU share is not finite", p.Role, p.Node)
			}
		}
	}
	return nil
}
