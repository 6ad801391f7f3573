package scalars

import (
	"encoding/binary"
	"fmt"
	"math"
)

// FileVersion is what TensorBoard expects in the first event of a file.
const FileVersion = "brain.Event:2"

// Protobuf wire types and the field numbers of tensorflow's Event,
// Summary and Summary.Value (tensorboard/compat/proto/event.proto,
// summary.proto) this package writes and reads.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5

	eventWallTime    = 1 // double
	eventStep        = 2 // int64
	eventFileVersion = 3 // string
	eventSummary     = 5 // Summary
	summaryValue     = 1 // repeated Summary.Value
	valueTag         = 1 // string
	valueSimple      = 2 // float
)

// Value is one tagged scalar.
type Value struct {
	Tag   string  `json:"tag"`
	Value float64 `json:"value"`
}

// Step is one step's scalars: one Event in an event file, one row of the
// CSV.
type Step struct {
	Step     int64   `json:"step"`
	WallTime float64 `json:"wall_time" doc:"Seconds since the Unix epoch."`
	Values   []Value `json:"values"`
}

// event is the subset of tensorflow.Event this package uses.
type event struct {
	wallTime    float64
	step        int64
	fileVersion string
	values      []Value
}

func appendKey(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire))
}

func appendBytes(b []byte, field int, v []byte) []byte {
	b = appendKey(b, field, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// marshal encodes e as a tensorflow.Event protobuf. Values are written as
// simple_value, a 32-bit float (what TensorBoard's scalar dashboard reads).
func (e event) marshal() []byte {
	var b []byte
	b = appendKey(b, eventWallTime, wireFixed64)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.wallTime))
	if e.step != 0 {
		b = appendKey(b, eventStep, wireVarint)
		b = binary.AppendUvarint(b, uint64(e.step))
	}
	if e.fileVersion != "" {
		return appendBytes(b, eventFileVersion, []byte(e.fileVersion))
	}
	var sum []byte
	for _, v := range e.values {
		var val []byte
		val = appendBytes(val, valueTag, []byte(v.Tag))
		val = appendKey(val, valueSimple, wireFixed32)
		val = binary.LittleEndian.AppendUint32(val, math.Float32bits(float32(v.Value)))
		sum = appendBytes(sum, summaryValue, val)
	}
	return appendBytes(b, eventSummary, sum)
}

// field is one decoded protobuf field: its number, wire type and either
// its integer (varint, fixed) or its bytes.
type field struct {
	num, wire int
	u         uint64
	b         []byte
}

// fields splits a protobuf message into its fields; unknown ones are
// returned too and left to the caller to skip.
func fields(b []byte) ([]field, error) {
	var out []field
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("%w: bad field key", ErrCorrupt)
		}
		b = b[n:]
		f := field{num: int(key >> 3), wire: int(key & 7)}
		switch f.wire {
		case wireVarint:
			if f.u, n = binary.Uvarint(b); n <= 0 {
				return nil, fmt.Errorf("%w: field %d: bad varint", ErrCorrupt, f.num)
			}
			b = b[n:]
		case wireFixed64:
			if len(b) < 8 {
				return nil, fmt.Errorf("%w: field %d: short fixed64", ErrCorrupt, f.num)
			}
			f.u, b = binary.LittleEndian.Uint64(b), b[8:]
		case wireFixed32:
			if len(b) < 4 {
				return nil, fmt.Errorf("%w: field %d: short fixed32", ErrCorrupt, f.num)
			}
			f.u, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		case wireBytes:
			size, n := binary.Uvarint(b)
			if n <= 0 || size > uint64(len(b)-n) {
				return nil, fmt.Errorf("%w: field %d: bad length", ErrCorrupt, f.num)
			}
			f.b, b = b[n:n+int(size)], b[n+int(size):]
		default:
			return nil, fmt.Errorf("%w: field %d: wire type %d", ErrCorrupt, f.num, f.wire)
		}
		out = append(out, f)
	}
	return out, nil
}

// unmarshalEvent decodes the fields of a tensorflow.Event this package
// uses; scalar values other than simple_value (tensors, images) are
// skipped.
func unmarshalEvent(b []byte) (event, error) {
	var e event
	fs, err := fields(b)
	if err != nil {
		return e, err
	}
	for _, f := range fs {
		switch {
		case f.num == eventWallTime && f.wire == wireFixed64:
			e.wallTime = math.Float64frombits(f.u)
		case f.num == eventStep && f.wire == wireVarint:
			e.step = int64(f.u)
		case f.num == eventFileVersion && f.wire == wireBytes:
			e.fileVersion = string(f.b)
		case f.num == eventSummary && f.wire == wireBytes:
			vs, err := summaryValues(f.b)
			if err != nil {
				return e, err
			}
			e.values = append(e.values, vs...)
		}
	}
	return e, nil
}

func summaryValues(b []byte) ([]Value, error) {
	fs, err := fields(b)
	if err != nil {
		return nil, err
	}
	var out []Value
	for _, f := range fs {
		if f.num != summaryValue || f.wire != wireBytes {
			continue
		}
		vf, err := fields(f.b)
		if err != nil {
			return nil, err
		}
		var v Value
		simple := false
		for _, x := range vf {
			switch {
			case x.num == valueTag && x.wire == wireBytes:
				v.Tag = string(x.b)
			case x.num == valueSimple && x.wire == wireFixed32:
				v.Value, simple = float64(math.Float32frombits(uint32(x.u))), true
			}
		}
		if simple {
			out = append(out, v)
		}
	}
	return out, nil
}

// EncodeFile is one TensorBoard event file: the file_version event, then
// one event per step (all its values in one summary).
func EncodeFile(steps []Step, created float64) []byte {
	b := appendRecord(nil, event{wallTime: created, fileVersion: FileVersion}.marshal())
	for _, s := range steps {
		b = appendRecord(b, event{wallTime: s.WallTime, step: s.Step, values: s.Values}.marshal())
	}
	return b
}

// DecodeFile reads an event file's steps (checksums verified); events
// without scalars (the file_version one) are left out. A file whose first
// event is not file_version brain.Event:2 is refused.
func DecodeFile(b []byte) ([]Step, error) {
	recs, err := splitRecords(b)
	if err != nil {
		return nil, err
	}
	var out []Step
	for i, r := range recs {
		e, err := unmarshalEvent(r)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		if i == 0 {
			if e.fileVersion != FileVersion {
				return nil, fmt.Errorf("%w: first event has file_version %q, want %q", ErrCorrupt, e.fileVersion, FileVersion)
			}
			continue
		}
		if len(e.values) > 0 {
			out = append(out, Step{Step: e.step, WallTime: e.wallTime, Values: e.values})
		}
	}
	return out, nil
}
