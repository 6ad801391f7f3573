package npz

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/trainyard/trainyard/internal/selfplay"
)

// games are two small finished games: a 2-seat win for seat 0 and a
// 3-seat game won by seat 2, with 4-value states and 3 actions.
func games() []selfplay.Game {
	mv := func(p, a int, s0 float32) selfplay.Move {
		pi := []float32{0.2, 0.3, 0.5}
		return selfplay.Move{Player: p, Action: a, State: []float32{s0, s0 + 1, s0 + 2, s0 + 3}, Policy: pi}
	}
	return []selfplay.Game{
		{Config: "t_2p", Players: 2, Terminal: true, Outcome: []float32{1, -1}, Moves: []selfplay.Move{mv(0, 1, 0), mv(1, 2, 10), mv(0, 0, 20)}},
		{Config: "t_3p", Players: 3, Terminal: true, Outcome: []float32{-1, -1, 1}, Moves: []selfplay.Move{mv(0, 0, 30), mv(1, 1, 40), mv(2, 2, 50)}},
	}
}

func TestFromGames(t *testing.T) {
	d, err := FromGames(games(), []int{2, 2})
	if err != nil {
		t.Fatal(err)
	}
	if d.Len() != 6 || d.Actions != 3 || len(d.States) != 24 || len(d.Policy) != 18 {
		t.Fatalf("dataset sizes: %d positions, %d actions, %d state values, %d policy values", d.Len(), d.Actions, len(d.States), len(d.Policy))
	}
	if want := []float32{1, -1, 1, -1, -1, 1}; !reflect.DeepEqual(d.Value, want) {
		t.Fatalf("values %v, want %v (outcome for the mover)", d.Value, want)
	}
	if want := []int8{0, 1, 0, 0, 1, 2}; !reflect.DeepEqual(d.ToMove, want) {
		t.Fatalf("to_move %v, want %v", d.ToMove, want)
	}
	for _, tc := range []struct {
		name  string
		games []selfplay.Game
		shape []int
	}{
		{"no moves", []selfplay.Game{{Outcome: []float32{0, 0}}}, nil},
		{"ragged states", append(games(), selfplay.Game{Outcome: []float32{1, -1}, Moves: []selfplay.Move{{State: []float32{1}, Policy: []float32{1, 0, 0}}}}), nil},
		{"player without outcome", []selfplay.Game{{Outcome: []float32{1}, Moves: []selfplay.Move{{Player: 1, State: []float32{1}, Policy: []float32{1}}}}}, nil},
		{"shape does not fit", games(), []int{3, 3}},
	} {
		if _, err := FromGames(tc.games, tc.shape); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	d, err := FromGames(games(), []int{2, 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Fatalf("round trip changed the dataset:\n got %+v\nwant %+v", back, d)
	}
}

func TestHeaderAligned(t *testing.T) {
	for _, shape := range [][]int{{0}, {7}, {3, 4}, {1000000, 2, 64}, {}} {
		h := header(Array{Dtype: Float32, Shape: shape})
		if len(h)%64 != 0 || h[len(h)-1] != '\n' {
			t.Errorf("shape %v: header of %d bytes, want a multiple of 64 ending in a newline", shape, len(h))
		}
	}
}

func TestWriteRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		arrays []Array
	}{
		{"bytes do not fit the shape", []Array{{Name: "a", Dtype: Float32, Shape: []int{3}, Data: make([]byte, 8)}}},
		{"unknown dtype", []Array{{Name: "a", Dtype: "<f8", Shape: []int{1}, Data: make([]byte, 8)}}},
		{"repeated name", []Array{F32("a", []int{1}, []float32{1}), F32("a", []int{1}, []float32{2})}},
		{"empty name", []Array{F32("", []int{1}, []float32{1})}},
		{"negative dimension", []Array{{Name: "a", Dtype: Int8, Shape: []int{-1}}}},
	} {
		if err := Write(&bytes.Buffer{}, tc.arrays...); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func TestReadRejects(t *testing.T) {
	good, _ := FromGames(games(), nil)
	b, _ := good.Encode()
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"not a zip", []byte("hello")},
		{"truncated", b[:len(b)/2]},
	} {
		if _, err := Read(tc.data); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", tc.name, err)
		}
	}
	npy := func(dict string, data int) []byte {
		h := append([]byte("\x93NUMPY\x01\x00"), byte(len(dict)), 0)
		return append(append(h, dict...), make([]byte, data)...)
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"fortran order", npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8)},
		{"short data", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 4)},
		{"float64", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 8)},
		{"no shape", npy("{'descr': '<f4', 'fortran_order': False, }", 0)},
		{"huge", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999,), }", 0)},
		{"version 9", append([]byte("\x93NUMPY\x09\x00"), 0, 0)},
	} {
		if _, err := ReadNPY("x", tc.data); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", tc.name, err)
		}
	}
}

// TestNumPyLoads writes an export and has NumPy itself load it: array
// names, shapes, dtypes, C order and every value as documented in
// docs/selfplay.md. Skips only when python3-numpy is missing and
// TRAINYARD_REQUIRE_NUMPY is unset (make test installs it and sets it).
func TestNumPyLoads(t *testing.T) {
	python := numpyPython()
	if python == "" {
		if os.Getenv("TRAINYARD_REQUIRE_NUMPY") != "" {
			t.Fatal("no python3 with numpy (make python-numpy installs Debian's python3-numpy)")
		}
		t.Skip("python3-numpy not installed (make python-numpy)")
	}
	d, err := FromGames(games(), []int{2, 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "export.npz")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// NumPy reports what it loaded; the comparison happens here in Go.
	script := `
import json, sys, numpy as np
z = np.load(sys.argv[1], allow_pickle=False)
out = {}
for k in sorted(z.files):
    a = z[k]
    out[k] = {"dtype": a.dtype.str, "shape": list(a.shape), "c": bool(a.flags["C_CONTIGUOUS"]), "values": a.ravel().tolist()}
out["policy_sums"] = z["policy"].sum(axis=1).tolist()
print(json.dumps(out))
`
	raw, err := exec.Command(python, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy.load: %v\n%s", err, raw)
	}
	type arr struct {
		Dtype  string    `json:"dtype"`
		Shape  []int     `json:"shape"`
		C      bool      `json:"c"`
		Values []float64 `json:"values"`
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	f64 := func(v []float32) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	tm := make([]float64, len(d.ToMove))
	for i, x := range d.ToMove {
		tm[i] = float64(x)
	}
	for _, tc := range []struct {
		name string
		want arr
	}{
		{ArrayStates, arr{"<f4", []int{6, 2, 2}, true, f64(d.States)}},
		{ArrayPolicy, arr{"<f4", []int{6, 3}, true, f64(d.Policy)}},
		{ArrayValue, arr{"<f4", []int{6}, true, []float64{1, -1, 1, -1, -1, 1}}},
		{ArrayToMove, arr{"|i1", []int{6}, true, tm}},
	} {
		var a arr
		if err := json.Unmarshal(got[tc.name], &a); err != nil {
			t.Fatalf("%s: %v in %s", tc.name, err, raw)
		}
		if !reflect.DeepEqual(a, tc.want) {
			t.Errorf("numpy sees %s as %+v, want %+v", tc.name, a, tc.want)
		}
	}
	var sums []float64
	_ = json.Unmarshal(got["policy_sums"], &sums)
	for i, s := range sums {
		if s < 0.999 || s > 1.001 {
			t.Errorf("policy row %d sums to %v in numpy", i, s)
		}
	}
	// And what NumPy writes, this package reads.
	out := filepath.Join(t.TempDir(), "numpy.npz")
	py := `import sys, numpy as np
np.savez(sys.argv[1], states=np.arange(12, dtype=np.float32).reshape(3, 2, 2), policy=np.full((3, 4), 0.25, dtype=np.float32), value=np.array([1, -1, 0], dtype=np.float32), to_move=np.array([0, 1, 0], dtype=np.int8))`
	if raw, err := exec.Command(python, "-c", py, out).CombinedOutput(); err != nil {
		t.Fatalf("numpy.savez: %v\n%s", err, raw)
	}
	nb, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(nb)
	if err != nil {
		t.Fatalf("decode numpy's own npz: %v", err)
	}
	if back.Len() != 3 || back.Actions != 4 || !reflect.DeepEqual(back.ObsShape, []int{2, 2}) || back.States[11] != 11 || back.Value[1] != -1 || back.ToMove[1] != 1 {
		t.Fatalf("numpy's npz decoded as %+v", back)
	}
}

// numpyPython is a python3 that imports numpy: $TRAINYARD_PYTHON, Debian's
// /usr/bin/python3 (where python3-numpy installs), then python3 on PATH.
func numpyPython() string {
	for _, p := range []string{os.Getenv("TRAINYARD_PYTHON"), "/usr/bin/python3", "python3"} {
		if p != "" && exec.Command(p, "-c", "import numpy").Run() == nil {
			return p
		}
	}
	return ""
}

// FuzzRead: any bytes give arrays or an error, never a panic or a huge
// allocation; what reads back re-encodes to the same arrays.
func FuzzRead(f *testing.F) {
	d, _ := FromGames(games(), nil)
	b, _ := d.Encode()
	f.Add(b)
	var one bytes.Buffer
	_ = WriteNPY(&one, F32("x", []int{2}, []float32{1, 2}))
	f.Add(one.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		if a, err := ReadNPY("x", data); err == nil {
			var buf bytes.Buffer
			if err := WriteNPY(&buf, a); err != nil {
				t.Fatalf("read %+v but cannot write it: %v", a, err)
			}
		}
		arrs, err := Read(data)
		if err != nil {
			return
		}
		list := make([]Array, 0, len(arrs))
		for _, a := range arrs {
			list = append(list, a)
		}
		var buf bytes.Buffer
		if err := Write(&buf, list...); err != nil {
			t.Fatalf("read %d arrays but cannot write them: %v", len(list), err)
		}
	})
}
