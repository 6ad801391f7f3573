package pluginhost

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Bounds the precheck enforces before wazero sees a module. wazero's decoder
// preallocates by declared counts, so a 100-byte module declaring a billion
// exports, locals or table slots made it allocate tens of GiB (found by
// FuzzValidate). Every declared count must fit in the bytes that follow it.
const (
	maxModuleBytes   = 64 << 20
	maxLocalsPerFunc = 50_000
	maxTableElems    = 1 << 20
)

var errTruncated = errors.New("truncated")

// precheck scans section headers and the counts that size allocations.
func precheck(wasm []byte) error {
	if len(wasm) > maxModuleBytes {
		return fmt.Errorf("%w: %d bytes exceeds %d", ErrCompile, len(wasm), maxModuleBytes)
	}
	r := reader{b: wasm[len(wasmMagic):]}
	for len(r.b) > 0 {
		id, err := r.byte()
		if err != nil {
			return err
		}
		size, err := r.u32()
		if err != nil {
			return fmt.Errorf("%w: section %d size: %v", ErrCompile, id, err)
		}
		if uint64(size) > uint64(len(r.b)) {
			return fmt.Errorf("%w: section %d declares %d bytes, %d remain", ErrCompile, id, size, len(r.b))
		}
		sec := reader{b: r.b[:size]}
		r.b = r.b[size:]
		if err := checkSection(id, sec); err != nil {
			return fmt.Errorf("%w: section %d: %v", ErrCompile, id, err)
		}
	}
	return nil
}

func checkSection(id byte, s reader) error {
	switch id {
	case 0, 8, 12: // custom, start, data count
		return nil
	}
	count, err := s.u32()
	if err != nil {
		return err
	}
	if uint64(count) > uint64(len(s.b)) {
		return fmt.Errorf("declares %d entries in %d bytes", count, len(s.b))
	}
	switch id {
	case 4: // tables: reftype, limits
		for i := uint32(0); i < count; i++ {
			if _, err := s.byte(); err != nil {
				return err
			}
			flag, err := s.byte()
			if err != nil {
				return err
			}
			min, err := s.u32()
			if err != nil {
				return err
			}
			if min > maxTableElems {
				return fmt.Errorf("table %d has %d initial elements, limit %d", i, min, maxTableElems)
			}
			if flag&1 != 0 {
				if _, err := s.u32(); err != nil {
					return err
				}
			}
		}
	case 10: // code: per body, local declarations
		for i := uint32(0); i < count; i++ {
			size, err := s.u32()
			if err != nil {
				return err
			}
			if uint64(size) > uint64(len(s.b)) {
				return fmt.Errorf("function body %d declares %d bytes, %d remain", i, size, len(s.b))
			}
			body := reader{b: s.b[:size]}
			s.b = s.b[size:]
			decls, err := body.u32()
			if err != nil {
				return err
			}
			if uint64(decls) > uint64(len(body.b)) {
				return fmt.Errorf("function body %d declares %d local groups in %d bytes", i, decls, len(body.b))
			}
			var total uint64
			for j := uint32(0); j < decls; j++ {
				n, err := body.u32()
				if err != nil {
					return err
				}
				if _, err := body.byte(); err != nil {
					return err
				}
				if total += uint64(n); total > maxLocalsPerFunc {
					return fmt.Errorf("function body %d declares more than %d locals", i, maxLocalsPerFunc)
				}
			}
		}
	}
	return nil
}

type reader struct{ b []byte }

func (r *reader) byte() (byte, error) {
	if len(r.b) == 0 {
		return 0, errTruncated
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c, nil
}

func (r *reader) u32() (uint32, error) {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || n > 5 || v > 1<<32-1 {
		return 0, errors.New("bad LEB128 u32")
	}
	r.b = r.b[n:]
	return uint32(v), nil
}
