// Package npz writes and reads NumPy's .npz files: a zip archive of .npy
// arrays (format version 1.0, little-endian, C order), the format
// numpy.load opens. The self-play export (Dataset) is built on it.
package npz

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Dtypes this package writes and reads (NumPy's descr strings).
const (
	Float32 = "<f4"
	Int32   = "<i4"
	Int8    = "|i1"
)

// maxElements bounds an array a reader accepts (1<<31 float32: 8 GiB).
const maxElements = 1 << 31

var magic = []byte("\x93NUMPY")

// Array is one named array: its raw little-endian, C-order bytes.
type Array struct {
	Name  string
	Dtype string
	Shape []int
	Data  []byte
}

func itemSize(dtype string) (int, error) {
	switch dtype {
	case Float32, Int32:
		return 4, nil
	case Int8:
		return 1, nil
	}
	return 0, fmt.Errorf("dtype %q not supported (want %s, %s or %s)", dtype, Float32, Int32, Int8)
}

func elements(shape []int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d > 0 && n > maxElements/d {
			return 0, fmt.Errorf("shape %v has more than %d elements", shape, maxElements)
		}
		n *= d
	}
	return n, nil
}

// F32 is a float32 array of the given shape.
func F32(name string, shape []int, v []float32) Array {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return Array{Name: name, Dtype: Float32, Shape: shape, Data: b}
}

// I8 is an int8 array of the given shape.
func I8(name string, shape []int, v []int8) Array {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return Array{Name: name, Dtype: Int8, Shape: shape, Data: b}
}

// Float32s decodes a Float32 array's values.
func (a Array) Float32s() ([]float32, error) {
	if a.Dtype != Float32 {
		return nil, fmt.Errorf("array %s: dtype %s, not %s", a.Name, a.Dtype, Float32)
	}
	v := make([]float32, len(a.Data)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(a.Data[4*i:]))
	}
	return v, nil
}

// Int8s decodes an Int8 array's values.
func (a Array) Int8s() ([]int8, error) {
	if a.Dtype != Int8 {
		return nil, fmt.Errorf("array %s: dtype %s, not %s", a.Name, a.Dtype, Int8)
	}
	v := make([]int8, len(a.Data))
	for i, b := range a.Data {
		v[i] = int8(b)
	}
	return v, nil
}

func (a Array) check() error {
	size, err := itemSize(a.Dtype)
	if err != nil {
		return fmt.Errorf("array %s: %w", a.Name, err)
	}
	n, err := elements(a.Shape)
	if err != nil {
		return fmt.Errorf("array %s: %w", a.Name, err)
	}
	if len(a.Data) != n*size {
		return fmt.Errorf("array %s: %d bytes for shape %v of %s (want %d)", a.Name, len(a.Data), a.Shape, a.Dtype, n*size)
	}
	return nil
}

// header is the .npy v1.0 header: magic, version, length, then the dict
// padded with spaces and a newline so the data starts 64-byte aligned.
func header(a Array) []byte {
	dims := make([]string, len(a.Shape))
	for i, d := range a.Shape {
		dims[i] = strconv.Itoa(d)
	}
	shape := "(" + strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	shape += ")"
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", a.Dtype, shape)
	total := len(magic) + 2 + 2 + len(dict) + 1
	pad := (64 - total%64) % 64
	h := make([]byte, 0, total+pad)
	h = append(h, magic...)
	h = append(h, 1, 0)
	h = binary.LittleEndian.AppendUint16(h, uint16(len(dict)+pad+1))
	h = append(h, dict...)
	h = append(h, bytes.Repeat([]byte{' '}, pad)...)
	return append(h, '\n')
}

// WriteNPY writes one array as a .npy file.
func WriteNPY(w io.Writer, a Array) error {
	if err := a.check(); err != nil {
		return err
	}
	if _, err := w.Write(header(a)); err != nil {
		return fmt.Errorf("write %s.npy header: %w", a.Name, err)
	}
	if _, err := w.Write(a.Data); err != nil {
		return fmt.Errorf("write %s.npy data: %w", a.Name, err)
	}
	return nil
}

// Write writes arrays as an .npz archive (member NAME.npy each, deflated:
// what numpy.savez_compressed writes).
func Write(w io.Writer, arrays ...Array) error {
	zw := zip.NewWriter(w)
	seen := map[string]bool{}
	for _, a := range arrays {
		if seen[a.Name] || a.Name == "" {
			return fmt.Errorf("npz: array name %q empty or repeated", a.Name)
		}
		seen[a.Name] = true
		f, err := zw.CreateHeader(&zip.FileHeader{Name: a.Name + ".npy", Method: zip.Deflate})
		if err != nil {
			return fmt.Errorf("npz: add %s: %w", a.Name, err)
		}
		if err := WriteNPY(f, a); err != nil {
			return fmt.Errorf("npz: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("npz: finish archive: %w", err)
	}
	return nil
}

var (
	descrRE = regexp.MustCompile(`'descr':\s*'([^']*)'`)
	orderRE = regexp.MustCompile(`'fortran_order':\s*(True|False)`)
	shapeRE = regexp.MustCompile(`'shape':\s*\(([0-9,\s]*)\)`)
)

// ErrFormat is wrapped by every error about malformed input.
var ErrFormat = errors.New("not a supported .npy/.npz file")

// ReadNPY parses one .npy file (versions 1.0 and 2.0; the dtypes above).
func ReadNPY(name string, b []byte) (Array, error) {
	a := Array{Name: name}
	if len(b) < 10 || !bytes.Equal(b[:6], magic) {
		return a, fmt.Errorf("%s: %w: no .npy magic", name, ErrFormat)
	}
	var hlen, off int
	switch b[6] {
	case 1:
		hlen, off = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return a, fmt.Errorf("%s: %w: short header", name, ErrFormat)
		}
		hlen, off = int(binary.LittleEndian.Uint32(b[8:12])), 12
	default:
		return a, fmt.Errorf("%s: %w: version %d.%d", name, ErrFormat, b[6], b[7])
	}
	if hlen > len(b)-off {
		return a, fmt.Errorf("%s: %w: header length %d past the end", name, ErrFormat, hlen)
	}
	dict := string(b[off : off+hlen])
	data := b[off+hlen:]
	m := descrRE.FindStringSubmatch(dict)
	if m == nil {
		return a, fmt.Errorf("%s: %w: no descr in header %q", name, ErrFormat, dict)
	}
	a.Dtype = m[1]
	if o := orderRE.FindStringSubmatch(dict); o == nil || o[1] != "False" {
		return a, fmt.Errorf("%s: %w: only C order (fortran_order False) is read", name, ErrFormat)
	}
	s := shapeRE.FindStringSubmatch(dict)
	if s == nil {
		return a, fmt.Errorf("%s: %w: no shape in header %q", name, ErrFormat, dict)
	}
	for _, f := range strings.Split(s[1], ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := strconv.Atoi(f)
		if err != nil || d > maxElements {
			return a, fmt.Errorf("%s: %w: dimension %q", name, ErrFormat, f)
		}
		a.Shape = append(a.Shape, d)
	}
	a.Data = data
	if err := a.check(); err != nil {
		return a, fmt.Errorf("%s: %w: %v", name, ErrFormat, err)
	}
	return a, nil
}

// Read parses an .npz archive into its arrays, by name (member name
// without ".npy").
func Read(b []byte) (map[string]Array, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("npz: %w: %v", ErrFormat, err)
	}
	out := map[string]Array{}
	for _, f := range zr.File {
		name, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok {
			return nil, fmt.Errorf("npz: %w: member %q is not .npy", ErrFormat, f.Name)
		}
		if f.UncompressedSize64 > 8*maxElements+1<<16 {
			return nil, fmt.Errorf("npz: %w: member %s of %d bytes", ErrFormat, f.Name, f.UncompressedSize64)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("npz: open %s: %w", f.Name, err)
		}
		raw, err := io.ReadAll(io.LimitReader(rc, int64(f.UncompressedSize64)+1))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("npz: read %s: %w", f.Name, err)
		}
		a, err := ReadNPY(name, raw)
		if err != nil {
			return nil, fmt.Errorf("npz: %w", err)
		}
		out[name] = a
	}
	return out, nil
}
