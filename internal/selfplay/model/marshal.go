package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Model file format, version 1 (little-endian):
//
//	magic   "TYSPMODL"
//	version uint32
//	hdrLen  uint32, then hdrLen bytes of JSON (header)
//	params  NumParams float64 values
//	sha256 of everything above
const (
	magic   = "TYSPMODL"
	version = 1
)

// ErrFormat marks bytes that are not a model of a known version, or are
// corrupt.
var ErrFormat = errors.New("bad model file")

type header struct {
	Name      string `json:"name"`
	Shape     Shape  `json:"shape"`
	NumParams int    `json:"num_params"`
	Steps     int64  `json:"steps"`
}

// Marshal encodes the model (name, shape, weights, steps trained).
func (m *Model) Marshal() ([]byte, error) {
	h, err := json.Marshal(header{Name: m.Name, Shape: m.shape, NumParams: len(m.params), Steps: m.steps})
	if err != nil {
		return nil, fmt.Errorf("model %s: marshal: %w", m.Name, err)
	}
	b := make([]byte, 0, len(magic)+8+len(h)+8*len(m.params)+sha256.Size)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h)))
	b = append(b, h...)
	for _, w := range m.params {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(w))
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...), nil
}

// Unmarshal decodes a model written by Marshal, checking the checksum,
// the version and that the weights fit the shape.
func Unmarshal(b []byte) (*Model, error) {
	if len(b) < len(magic)+8+sha256.Size || string(b[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: no model header", ErrFormat)
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if s := sha256.Sum256(body); !bytes.Equal(s[:], sum) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrFormat)
	}
	if v := binary.LittleEndian.Uint32(body[len(magic):]); v != version {
		return nil, fmt.Errorf("%w: version %d, this build reads %d", ErrFormat, v, version)
	}
	hl := int(binary.LittleEndian.Uint32(body[len(magic)+4:]))
	rest := body[len(magic)+8:]
	if hl > len(rest) {
		return nil, fmt.Errorf("%w: header of %d bytes in %d", ErrFormat, hl, len(rest))
	}
	var h header
	if err := json.Unmarshal(rest[:hl], &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	m, err := New(h.Shape, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	w := rest[hl:]
	if h.NumParams != len(m.params) || len(w) != 8*len(m.params) {
		return nil, fmt.Errorf("%w: %d weight bytes and num_params %d for a net of %d", ErrFormat, len(w), h.NumParams, len(m.params))
	}
	for i := range m.params {
		m.params[i] = math.Float64frombits(binary.LittleEndian.Uint64(w[8*i:]))
	}
	m.Name, m.steps = h.Name, h.Steps
	return m, nil
}

// Clone is an independent copy (e.g. the next generation's starting point).
func (m *Model) Clone() *Model {
	c := &Model{Name: m.Name, shape: m.shape, mlp: m.mlp, params: append([]float64(nil), m.params...), steps: m.steps}
	c.shape.Hidden = append([]int(nil), m.shape.Hidden...)
	return c
}
