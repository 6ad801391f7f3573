package scalars

import (
	"bytes"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"testing"
)

func TestMaskedCRC(t *testing.T) {
	for _, tc := range []struct {
		in   string
		crc  uint32 // plain CRC32C (RFC 3720 check values)
		mask uint32
	}{
		{"", 0x00000000, 0xa282ead8},
		{"123456789", 0xe3069283, 0},
		{"a", 0xc1d04330, 0},
	} {
		if got := crc32.Checksum([]byte(tc.in), castagnoli); got != tc.crc {
			t.Errorf("crc32c(%q) = %08x, want %08x", tc.in, got, tc.crc)
		}
		want := ((tc.crc >> 15) | (tc.crc << 17)) + 0xa282ead8
		if tc.mask != 0 {
			want = tc.mask
		}
		if got := maskedCRC([]byte(tc.in)); got != want {
			t.Errorf("masked(%q) = %08x, want %08x", tc.in, got, want)
		}
	}
}

// f32 is v as TensorBoard's simple_value keeps it.
func f32(v float64) float64 { return float64(float32(v)) }

func TestEventFileRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []Step
	}{
		{"empty", nil},
		{"one step", []Step{{Step: 1, WallTime: 1.7e9 + 0.25, Values: []Value{{"loss", 0.31}}}}},
		{"step zero, several tags", []Step{{Step: 0, WallTime: 5, Values: []Value{{"a", 1}, {"b", -2.5}, {"c/d", 1e-7}}}}},
		{"large step, unicode tag", []Step{{Step: 1 << 40, WallTime: 6, Values: []Value{{"é/ß", 3}}}}},
		{"float32 rounding", []Step{{Step: 2, WallTime: 7, Values: []Value{{"x", 0.1}}}, {Step: 3, WallTime: 8, Values: []Value{{"x", math.Pi}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := EncodeFile(tc.steps, 42)
			got, err := DecodeFile(b)
			if err != nil {
				t.Fatal(err)
			}
			var want []Step
			for _, s := range tc.steps {
				w := Step{Step: s.Step, WallTime: s.WallTime}
				for _, v := range s.Values {
					w.Values = append(w.Values, Value{v.Tag, f32(v.Value)})
				}
				want = append(want, w)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %+v, want %+v", got, want)
			}
		})
	}
}

func TestDecodeFileRefusesDamage(t *testing.T) {
	good := EncodeFile([]Step{{Step: 1, WallTime: 1, Values: []Value{{"loss", 1}}}}, 1)
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 1
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"cut in a header", good[:5]},
		{"cut in data", good[:len(good)-6]},
		{"length flipped", flip(0)},
		{"length checksum flipped", flip(9)},
		{"data flipped", flip(14)},
		{"data checksum flipped", flip(len(good) - 1)},
		{"scalars before file_version", appendRecord(nil, event{wallTime: 1, step: 1, values: []Value{{"loss", 1}}}.marshal())},
		{"other file_version", appendRecord(nil, event{wallTime: 1, fileVersion: "brain.Event:1"}.marshal())},
		{"trailing garbage", append(bytes.Clone(good), 1, 2, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeFile(tc.b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestCSVRoundTrip(t *testing.T) {
	steps := []Step{
		{Step: 1, WallTime: 1700000000.125, Values: []Value{{"loss", 0.1}, {"return", 20}}},
		{Step: 2, WallTime: 1700000001.5, Values: []Value{{"return", 1.0 / 3}}},
		{Step: 5, WallTime: 1700000002, Values: []Value{{"kl", 1e-9}, {"loss", -3}}},
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, steps); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String()[:len("step,wall_time,loss,return,kl\n")], "step,wall_time,loss,return,kl\n"; got != want {
		t.Fatalf("header %q, want %q", got, want)
	}
	got, err := ParseCSV(&b)
	if err != nil {
		t.Fatal(err)
	}
	// Values come back in column order.
	want := []Step{steps[0], steps[1], {Step: 5, WallTime: 1700000002, Values: []Value{{"loss", -3}, {"kl", 1e-9}}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"", "x,y\n", "step,wall_time,a\n1,2\n", "step,wall_time,a\nx,2,3\n", "step,wall_time,a\n1,2,z\n"} {
		if _, err := ParseCSV(bytes.NewReader([]byte(bad))); err == nil {
			t.Errorf("ParseCSV(%q) accepted", bad)
		}
	}
}

// FuzzDecodeFile: no input panics the reader, and what it accepts
// encodes back to a file that decodes to the same steps.
func FuzzDecodeFile(f *testing.F) {
	f.Add(EncodeFile(nil, 1))
	f.Add(EncodeFile([]Step{{Step: 3, WallTime: 2, Values: []Value{{"loss", 0.5}, {"r", 100}}}}, 1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		steps, err := DecodeFile(b)
		if err != nil {
			return
		}
		again, err := DecodeFile(EncodeFile(steps, 1))
		if err != nil {
			t.Fatalf("re-encoded file refused: %v", err)
		}
		if len(again) != len(steps) {
			t.Fatalf("%d steps, re-encoded %d", len(steps), len(again))
		}
		for i := range steps {
			a, b := steps[i], again[i]
			if a.Step != b.Step || math.Float64bits(a.WallTime) != math.Float64bits(b.WallTime) || len(a.Values) != len(b.Values) {
				t.Fatalf("step %d: %+v, re-encoded %+v", i, a, b)
			}
			for j := range a.Values {
				if a.Values[j].Tag != b.Values[j].Tag || math.Float32bits(float32(a.Values[j].Value)) != math.Float32bits(float32(b.Values[j].Value)) {
					t.Fatalf("step %d value %d: %+v, re-encoded %+v", i, j, a.Values[j], b.Values[j])
				}
			}
		}
	})
}
