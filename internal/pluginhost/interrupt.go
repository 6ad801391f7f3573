package pluginhost

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Interruption by instrumentation (docs/plugin-abi.md §7).
//
// wazero's WithCloseOnContextDone compiles a call into Go at every loop
// header (~50 ns each, more on a loaded machine) and starts a goroutine per
// call. Go's wasm backend turns every taken branch into a jump to the
// function's entry loop, so a Go-built guest paid that exit on nearly every
// branch: 20× slower than with the checks off.
//
// instrument rewrites a module instead. It adds two mutable i32 globals,
// fuel and interrupt (the latter exported as interruptGlobal), and at every
// function entry and loop header:
//
//	fuel -= 1
//	if fuel == 0 { fuel = fuelPerExit; memory.grow 0; if interrupt { unreachable } }
//
// Code without loops or calls is finite, so this reaches every place
// wazero's check reaches, for a load, a store and a branch. The watchdog
// sets interrupt when a call overruns, and the guest traps within
// fuelPerExit checks. The memory.grow of 0 pages changes nothing but exits
// to Go: machine code cannot be preempted, and a goroutine that never
// leaves it would hold off the garbage collector's stop-the-world (and with
// it the watchdog) forever. So a guest returns to Go every fuelPerExit
// checks (tens of µs), which bounds the extra GC pause it can cause.
//
// The start section is dropped and its function exported as startExport, so
// the host runs it under the watchdog after instantiation. A module the
// rewriter does not understand (an opcode outside what wazero enables by
// default) is compiled as uploaded with wazero's own checks.

const (
	interruptGlobal = "__trainyard_interrupt"
	startExport     = "__trainyard_start"
	// fuelPerExit checks between exits to Go: each exit costs ~0.1 µs, and
	// even a one-instruction loop returns to Go every ~10 µs.
	fuelPerExit = 4096
)

var errNoInstrument = errors.New("cannot instrument")

// instrument returns the rewritten module.
func instrument(wasm []byte) ([]byte, error) {
	if len(wasm) < len(wasmMagic) {
		return nil, fmt.Errorf("%w: %w", errNoInstrument, errTruncated)
	}
	type sec struct {
		id   byte
		body []byte
	}
	var secs []sec
	r := reader{b: wasm[len(wasmMagic):]}
	for len(r.b) > 0 {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		size, err := r.u32()
		if err != nil || uint64(size) > uint64(len(r.b)) {
			return nil, fmt.Errorf("%w: section %d size", errNoInstrument, id)
		}
		secs = append(secs, sec{id, r.b[:size]})
		r.b = r.b[size:]
	}

	var importedGlobals, definedGlobals uint32
	start, hasStart := uint32(0), false
	for _, s := range secs {
		switch s.id {
		case 2:
			n, err := countImportedGlobals(s.body)
			if err != nil {
				return nil, fmt.Errorf("%w: imports: %v", errNoInstrument, err)
			}
			importedGlobals = n
		case 6:
			sr := reader{b: s.body}
			n, err := sr.u32()
			if err != nil {
				return nil, fmt.Errorf("%w: globals: %v", errNoInstrument, err)
			}
			definedGlobals = n
		case 7:
			if err := checkExportNames(s.body); err != nil {
				return nil, err
			}
		case 8:
			sr := reader{b: s.body}
			f, err := sr.u32()
			if err != nil {
				return nil, fmt.Errorf("%w: start: %v", errNoInstrument, err)
			}
			start, hasStart = f, true
		case 13: // exception tags: not enabled in our wazero config
			return nil, fmt.Errorf("%w: section %d", errNoInstrument, s.id)
		}
	}
	fuel := importedGlobals + definedGlobals
	stop := fuel + 1
	check := checkCode(fuel, stop)
	newGlobals := [][]byte{
		append(append([]byte{0x7f, 0x01, 0x41}, sleb32(fuelPerExit)...), 0x0b), // mut i32 fuel
		{0x7f, 0x01, 0x41, 0x00, 0x0b},                                         // mut i32 interrupt = 0
	}
	newExports := [][]byte{export(interruptGlobal, 0x03, stop)}
	if hasStart {
		newExports = append(newExports, export(startExport, 0x00, start))
	}

	out := append([]byte(nil), wasm[:len(wasmMagic)]...)
	put := func(id byte, body []byte) {
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(body)))
		out = append(out, body...)
	}
	addedGlobal, addedExports := false, false
	flush := func(before byte) {
		// Insert missing sections at their place in the standard order.
		if !addedGlobal && order(before) > order(6) {
			put(6, appendVec(nil, 0, newGlobals))
			addedGlobal = true
		}
		if !addedExports && order(before) > order(7) {
			put(7, appendVec(nil, 0, newExports))
			addedExports = true
		}
	}
	for _, s := range secs {
		if s.id != 0 {
			flush(s.id)
		}
		switch s.id {
		case 6:
			b, err := appendToVec(s.body, newGlobals)
			if err != nil {
				return nil, err
			}
			put(6, b)
			addedGlobal = true
		case 7:
			b, err := appendToVec(s.body, newExports)
			if err != nil {
				return nil, err
			}
			put(7, b)
			addedExports = true
		case 8: // run by the host after instantiation, under the deadline
		case 10:
			b, err := instrumentCode(s.body, check)
			if err != nil {
				return nil, err
			}
			put(10, b)
		default:
			put(s.id, s.body)
		}
	}
	flush(0xff)
	return out, nil
}

// checkCode is the instruction sequence instrument inserts.
func checkCode(fuel, stop uint32) []byte {
	get := func(b []byte, g uint32) []byte { return binary.AppendUvarint(append(b, 0x23), uint64(g)) }
	set := func(b []byte, g uint32) []byte { return binary.AppendUvarint(append(b, 0x24), uint64(g)) }
	var c []byte
	c = get(c, fuel)
	c = append(c, 0x41, 0x01, 0x6b) // i32.const 1; i32.sub
	c = set(c, fuel)
	c = get(c, fuel)
	c = append(c, 0x45, 0x04, 0x40) // i32.eqz; if
	c = append(append(c, 0x41), sleb32(fuelPerExit)...)
	c = set(c, fuel)
	c = append(c, 0x41, 0x00, 0x40, 0x00, 0x1a) // i32.const 0; memory.grow 0; drop
	c = get(c, stop)
	c = append(c, 0x04, 0x40, 0x00, 0x0b) // if; unreachable; end
	return append(c, 0x0b)                // end
}

func sleb32(v int32) []byte {
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

// order is a section's rank in the order the binary format requires.
func order(id byte) int {
	switch id {
	case 12: // data count sits between element and code
		return 95
	case 10:
		return 100
	case 11:
		return 110
	case 0xff:
		return 1000
	}
	return int(id) * 10
}

func export(name string, kind byte, idx uint32) []byte {
	b := binary.AppendUvarint(nil, uint64(len(name)))
	b = append(b, name...)
	b = append(b, kind)
	return binary.AppendUvarint(b, uint64(idx))
}

func appendVec(dst []byte, count uint32, items [][]byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(count)+uint64(len(items)))
	for _, it := range items {
		dst = append(dst, it...)
	}
	return dst
}

// appendToVec adds items to a section that is a vector.
func appendToVec(body []byte, items [][]byte) ([]byte, error) {
	r := reader{b: body}
	n, err := r.u32()
	if err != nil {
		return nil, fmt.Errorf("%w: vector count: %v", errNoInstrument, err)
	}
	out := binary.AppendUvarint(nil, uint64(n)+uint64(len(items)))
	out = append(out, r.b...)
	for _, it := range items {
		out = append(out, it...)
	}
	return out, nil
}

func countImportedGlobals(body []byte) (uint32, error) {
	r := reader{b: body}
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	var globals uint32
	for i := uint32(0); i < n; i++ {
		for j := 0; j < 2; j++ { // module, name
			if err := r.skipName(); err != nil {
				return 0, err
			}
		}
		kind, err := r.byte()
		if err != nil {
			return 0, err
		}
		switch kind {
		case 0x00: // func: typeidx
			_, err = r.u32()
		case 0x01: // table: reftype, limits
			if _, err = r.byte(); err == nil {
				err = r.skipLimits()
			}
		case 0x02: // memory: limits
			err = r.skipLimits()
		case 0x03: // global: valtype, mut
			globals++
			_, err = r.byte()
			if err == nil {
				_, err = r.byte()
			}
		default:
			return 0, fmt.Errorf("import kind %#x", kind)
		}
		if err != nil {
			return 0, err
		}
	}
	return globals, nil
}

func checkExportNames(body []byte) error {
	r := reader{b: body}
	n, err := r.u32()
	if err != nil {
		return fmt.Errorf("%w: exports: %v", errNoInstrument, err)
	}
	for i := uint32(0); i < n; i++ {
		l, err := r.u32()
		if err != nil || uint64(l) > uint64(len(r.b)) {
			return fmt.Errorf("%w: export name", errNoInstrument)
		}
		if name := string(r.b[:l]); name == interruptGlobal || name == startExport {
			return fmt.Errorf("%w: the module exports %s itself", errNoInstrument, name)
		}
		r.b = r.b[l:]
		if _, err := r.byte(); err != nil {
			return err
		}
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
}

// instrumentCode inserts check at the start of every function body and
// after every loop's block type.
func instrumentCode(body []byte, check []byte) ([]byte, error) {
	r := reader{b: body}
	n, err := r.u32()
	if err != nil {
		return nil, fmt.Errorf("%w: code count: %v", errNoInstrument, err)
	}
	out := binary.AppendUvarint(make([]byte, 0, len(body)+len(body)/8), uint64(n))
	var fb []byte
	for i := uint32(0); i < n; i++ {
		size, err := r.u32()
		if err != nil || uint64(size) > uint64(len(r.b)) {
			return nil, fmt.Errorf("%w: function %d size", errNoInstrument, i)
		}
		f := reader{b: r.b[:size]}
		r.b = r.b[size:]
		fb, err = instrumentFunc(fb[:0], f, check)
		if err != nil {
			return nil, fmt.Errorf("%w: function %d: %v", errNoInstrument, i, err)
		}
		out = binary.AppendUvarint(out, uint64(len(fb)))
		out = append(out, fb...)
	}
	return out, nil
}

func instrumentFunc(out []byte, f reader, check []byte) ([]byte, error) {
	all := f.b
	decls, err := f.u32()
	if err != nil {
		return nil, err
	}
	for j := uint32(0); j < decls; j++ {
		if _, err := f.u32(); err != nil {
			return nil, err
		}
		if _, err := f.byte(); err != nil {
			return nil, err
		}
	}
	out = append(out, all[:len(all)-len(f.b)]...)
	out = append(out, check...)
	for len(f.b) > 0 {
		at := f.b
		op, _ := f.byte()
		loop, err := f.skipImmediates(op)
		if err != nil {
			return nil, fmt.Errorf("opcode %#x at %d: %v", op, len(all)-len(at), err)
		}
		out = append(out, at[:len(at)-len(f.b)]...)
		if loop {
			out = append(out, check...)
		}
	}
	return out, nil
}

// skipImmediates consumes the immediates of op (already read) and reports
// whether it is a loop. Opcodes are those of WebAssembly 2.0 (wazero's
// default features: sign extension, saturating conversions, bulk memory,
// reference types, multi-value, SIMD); anything else is an error.
func (r *reader) skipImmediates(op byte) (loop bool, err error) {
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		return op == 0x03, r.skipBlockType()
	case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b || op == 0xd1:
		return false, nil // unreachable, nop, else, end, return, drop, select, ref.is_null
	case op == 0x0c || op == 0x0d || op == 0x10 || (op >= 0x20 && op <= 0x26) || op == 0xd2:
		_, err = r.u32() // br, br_if, call, local/global/table get/set, ref.func
		return false, err
	case op == 0x0e: // br_table
		n, err := r.u32()
		if err != nil {
			return false, err
		}
		return false, r.skipU32s(int(n) + 1)
	case op == 0x11: // call_indirect: type, table
		return false, r.skipU32s(2)
	case op == 0x1c: // select t*
		n, err := r.u32()
		if err != nil {
			return false, err
		}
		return false, r.skipBytes(int(n))
	case op >= 0x28 && op <= 0x3e: // loads and stores: memarg
		return false, r.skipU32s(2)
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		_, err = r.u32()
		return false, err
	case op == 0x41 || op == 0x42: // i32.const, i64.const
		return false, r.skipLEB(10)
	case op == 0x43:
		return false, r.skipBytes(4)
	case op == 0x44:
		return false, r.skipBytes(8)
	case op >= 0x45 && op <= 0xc4: // numeric and sign extension
		return false, nil
	case op == 0xd0: // ref.null t
		return false, r.skipBytes(1)
	case op == 0xfc:
		sub, err := r.u32()
		if err != nil {
			return false, err
		}
		switch {
		case sub <= 7: // saturating truncations
			return false, nil
		case sub == 8 || sub == 10 || sub == 12 || sub == 14: // memory.init, memory.copy, table.init, table.copy
			return false, r.skipU32s(2)
		case sub <= 17: // data.drop, memory.fill, elem.drop, table.grow/size/fill
			return false, r.skipU32s(1)
		}
		return false, fmt.Errorf("unknown 0xfc opcode %d", sub)
	case op == 0xfd:
		sub, err := r.u32()
		if err != nil {
			return false, err
		}
		switch {
		case sub <= 11 || sub == 92 || sub == 93: // v128 loads/stores: memarg
			return false, r.skipU32s(2)
		case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
			return false, r.skipBytes(16)
		case sub >= 21 && sub <= 34: // extract/replace lane
			return false, r.skipBytes(1)
		case sub >= 84 && sub <= 91: // load/store lane: memarg, lane
			if err := r.skipU32s(2); err != nil {
				return false, err
			}
			return false, r.skipBytes(1)
		case sub <= 255:
			return false, nil
		}
		return false, fmt.Errorf("unknown SIMD opcode %d", sub)
	}
	return false, errors.New("unknown opcode")
}

func (r *reader) skipBlockType() error {
	if len(r.b) == 0 {
		return errTruncated
	}
	switch r.b[0] {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.b = r.b[1:]
		return nil
	}
	return r.skipLEB(5) // s33 type index
}

func (r *reader) skipLEB(max int) error {
	for i := 0; i < max && i < len(r.b); i++ {
		if r.b[i]&0x80 == 0 {
			r.b = r.b[i+1:]
			return nil
		}
	}
	return errors.New("bad LEB128")
}

func (r *reader) skipU32s(n int) error {
	for i := 0; i < n; i++ {
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
}

func (r *reader) skipBytes(n int) error {
	if n < 0 || n > len(r.b) {
		return errTruncated
	}
	r.b = r.b[n:]
	return nil
}

func (r *reader) skipName() error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	return r.skipBytes(int(n))
}

func (r *reader) skipLimits() error {
	flag, err := r.byte()
	if err != nil {
		return err
	}
	if _, err := r.u32(); err != nil {
		return err
	}
	if flag&1 != 0 {
		_, err = r.u32()
	}
	return err
}
