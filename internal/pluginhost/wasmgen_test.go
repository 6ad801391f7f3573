package pluginhost

// A tiny WebAssembly binary assembler for hand-made test modules: hostile
// plugins whose exact shape (missing exports, bad imports, raw traps and
// loops) no compiler would produce on purpose.

import "encoding/binary"

const (
	i32 byte = 0x7f
	i64 byte = 0x7e
)

type wfunc struct {
	name            string // export name; "" = not exported
	params, results []byte
	locals          []byte // one local per entry, of that type
	body            []byte // instructions without the final end
}

type wimport struct {
	module, name    string
	params, results []byte
}

type wmod struct {
	imports  []wimport
	funcs    []wfunc
	memPages uint32
	noMemory bool
	data     map[uint32][]byte // offset → bytes
	start    string            // name of the function the start section runs
}

func uleb(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func wstr(s string) []byte { return append(uleb(uint64(len(s))), s...) }

func vec(items ...[]byte) []byte {
	b := uleb(uint64(len(items)))
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

func section(id byte, content []byte) []byte {
	return append(append([]byte{id}, uleb(uint64(len(content)))...), content...)
}

func functype(params, results []byte) []byte {
	return append(append(append([]byte{0x60}, uleb(uint64(len(params)))...), params...), append(uleb(uint64(len(results))), results...)...)
}

func (m wmod) encode() []byte {
	out := append([]byte(nil), wasmMagic...)
	var types, imps, fidx, exps, codes [][]byte
	for i, im := range m.imports {
		types = append(types, functype(im.params, im.results))
		imps = append(imps, append(append(wstr(im.module), wstr(im.name)...), append([]byte{0x00}, uleb(uint64(i))...)...))
	}
	for i, f := range m.funcs {
		t := len(m.imports) + i
		types = append(types, functype(f.params, f.results))
		fidx = append(fidx, uleb(uint64(t)))
		if f.name != "" {
			exps = append(exps, append(wstr(f.name), append([]byte{0x00}, uleb(uint64(t))...)...))
		}
		var locals [][]byte
		for _, l := range f.locals {
			locals = append(locals, []byte{1, l})
		}
		body := append(append(vec(locals...), f.body...), 0x0b)
		codes = append(codes, append(uleb(uint64(len(body))), body...))
	}
	out = append(out, section(1, vec(types...))...)
	if len(imps) > 0 {
		out = append(out, section(2, vec(imps...))...)
	}
	out = append(out, section(3, vec(fidx...))...)
	if !m.noMemory {
		pages := m.memPages
		if pages == 0 {
			pages = 1
		}
		out = append(out, section(5, vec(append([]byte{0x00}, uleb(uint64(pages))...)))...)
		exps = append(exps, append(wstr("memory"), 0x02, 0x00))
	}
	out = append(out, section(7, vec(exps...))...)
	for i, f := range m.funcs {
		if m.start != "" && f.name == m.start {
			out = append(out, section(8, uleb(uint64(len(m.imports)+i)))...)
		}
	}
	out = append(out, section(10, vec(codes...))...)
	var segs [][]byte
	for off, b := range m.data {
		seg := append([]byte{0x00, 0x41}, sleb(int64(off))...)
		seg = append(seg, 0x0b)
		seg = append(seg, wstr(string(b))...)
		segs = append(segs, seg)
	}
	if len(segs) > 0 {
		out = append(out, section(11, vec(segs...))...)
	}
	return out
}

// Instruction helpers.
func i32c(v int32) []byte { return append([]byte{0x41}, sleb(int64(v))...) }
func i64c(v int64) []byte { return append([]byte{0x42}, sleb(v)...) }
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

var (
	opLoopForever = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b, 0x00} // loop br 0 end; unreachable
	opUnreachable = []byte{0x00}                               // unreachable
	opGrowForever = []byte{0x03, 0x40, 0x41, 0x01, 0x40, 0x00, // loop (memory.grow 1)
		0x41, 0x7f, 0x47, 0x0d, 0x00, 0x0b, 0x00} // != -1 → br 0; end; unreachable
)

// handmadeMeta is the metadata of the hand-made env.
const handmadeMeta = `{"abi_version":1,"name":"handmade","version":"1","kind":"env",` +
	`"observation_space":{"kind":"box","shape":[4]},"action_space":{"kind":"discrete","n":2}}`

// handmadeEnv returns a well-formed env module; tweak lets a test replace
// functions (by export name) to make it hostile.
func handmadeEnv(tweak func(name string, f *wfunc)) wmod {
	const metaAt = 256
	meta := []byte(handmadeMeta)
	// alloc: bump allocator with the next free address at memory[0].
	alloc := cat(i32c(0), []byte{0x28, 0x02, 0x00, 0x21, 0x01}, // local1 = load(0)
		[]byte{0x20, 0x01, 0x45, 0x04, 0x40}, i32c(1024), []byte{0x21, 0x01, 0x0b}, // if local1==0 {local1=1024}
		i32c(0), []byte{0x20, 0x01, 0x20, 0x00, 0x6a}, i32c(7), []byte{0x6a}, i32c(-8), []byte{0x71}, // (local1+size+7)&-8
		[]byte{0x36, 0x02, 0x00}, // store(0, ...)
		[]byte{0x20, 0x01})       // return local1
	funcs := []wfunc{
		{name: "abi_version", results: []byte{i32}, body: i32c(1)},
		{name: "metadata", results: []byte{i64}, body: i64c(metaAt<<32 | int64(len(meta)))},
		{name: "alloc", params: []byte{i32}, results: []byte{i32}, locals: []byte{i32}, body: alloc},
		{name: "last_error", results: []byte{i64}, body: i64c(0)},
		{name: "init", params: []byte{i32, i64}, results: []byte{i32}, body: i32c(0)},
		{name: "reset", params: []byte{i64, i32}, results: []byte{i32}, body: i32c(0)},
		{name: "step_batch", params: []byte{i32, i32, i32, i32, i32, i32, i32}, results: []byte{i32}, body: i32c(0)},
	}
	kept := funcs[:0]
	for _, f := range funcs {
		if tweak != nil {
			tweak(f.name, &f)
		}
		if f.name != "-" {
			kept = append(kept, f)
		}
	}
	return wmod{funcs: kept, memPages: 2, data: map[uint32][]byte{metaAt: meta}}
}
