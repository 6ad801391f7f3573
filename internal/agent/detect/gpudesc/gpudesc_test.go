package gpudesc

import (
	"reflect"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/resources"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []resources.GPU
		err  string
	}{
		{name: "empty", in: "", want: nil},
		{name: "none", in: " None ", want: nil},
		{name: "explicit indices", in: "0:TITAN X:12288,1:GTX 1080 Ti:11264", want: []resources.GPU{
			{Index: 0, Model: "TITAN X", VRAMMB: 12288}, {Index: 1, Model: "GTX 1080 Ti", VRAMMB: 11264}}},
		{name: "count with GB", in: "3xTITAN X (Pascal):12GB", want: []resources.GPU{
			{Index: 0, Model: "TITAN X (Pascal)", VRAMMB: 12288},
			{Index: 1, Model: "TITAN X (Pascal)", VRAMMB: 12288},
			{Index: 2, Model: "TITAN X (Pascal)", VRAMMB: 12288}}},
		{name: "count with spaces", in: "2 x RTX 5090 : 32 GiB", want: []resources.GPU{
			{Index: 0, Model: "RTX 5090", VRAMMB: 32768}, {Index: 1, Model: "RTX 5090", VRAMMB: 32768}}},
		{name: "auto index skips taken", in: "1:A10G:24GB,L4:24GB", want: []resources.GPU{
			{Index: 0, Model: "L4", VRAMMB: 24576}, {Index: 1, Model: "A10G", VRAMMB: 24576}}},
		{name: "sorted by index", in: "3:B:1,1:A:2", want: []resources.GPU{
			{Index: 1, Model: "A", VRAMMB: 2}, {Index: 3, Model: "B", VRAMMB: 1}}},
		{name: "index keeps count-like model", in: "0:2xFoo:5", want: []resources.GPU{{Index: 0, Model: "2xFoo", VRAMMB: 5}}},
		{name: "fractional GiB", in: "vGPU:7.5GiB", want: []resources.GPU{{Index: 0, Model: "vGPU", VRAMMB: 7680}}},
		{name: "duplicate index", in: "0:A:1GB,0:B:1GB", err: "index 0 given twice"},
		{name: "auto collides later", in: "A:1GB,0:B:1GB", err: "index 0 given twice"},
		{name: "missing vram", in: "TITAN X", err: "want MODEL:VRAM"},
		{name: "too many colons", in: "0:1:A:1GB", err: "want MODEL:VRAM"},
		{name: "bad index", in: "x:A:1GB", err: "index \"x\""},
		{name: "negative index", in: "-1:A:1GB", err: "index"},
		{name: "bad size", in: "A:twelve", err: "is not a size"},
		{name: "unknown unit", in: "A:12PB", err: "unknown unit"},
		{name: "zero vram", in: "A:0", err: "vram must be positive"},
		{name: "empty model", in: ":12GB", err: "empty model"},
		{name: "empty entry", in: "A:1GB,,B:1GB", err: "entry 2: empty"},
		{name: "zero count", in: "0xA:1GB", err: "count must be"},
		{name: "huge count", in: "8000xA100:80GB", err: "count must be"},
		{name: "too many in total", in: strings.Repeat("64xA:1,", 2) + "A:1", err: "more than 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse(%q) error = %v, want containing %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestFormatRoundTrip(t *testing.T) {
	for _, in := range []string{"", "3xTITAN X:12GB", "0:GTX 1660:6GB,2:A:1,5:B:7.5GiB"} {
		g1, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		g2, err := Parse(Format(g1))
		if err != nil {
			t.Fatalf("re-parse %q: %v", Format(g1), err)
		}
		if !reflect.DeepEqual(g1, g2) {
			t.Fatalf("round trip of %q: %+v != %+v", in, g1, g2)
		}
	}
}

func TestParseMemoryMB(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "11264", want: 11264},
		{in: "11264MiB", want: 11264},
		{in: "12GB", want: 12288},
		{in: "30 GiB", want: 30720},
		{in: "1TiB", want: 1 << 20},
		{in: "7.5G", want: 7680},
		{in: "", bad: true},
		{in: "-1GB", bad: true},
		{in: "1e3", bad: true},
		{in: "12 KB", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseMemoryMB(tt.in)
		if tt.bad != (err != nil) || got != tt.want {
			t.Errorf("ParseMemoryMB(%q) = %d, %v; want %d, bad=%v", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

// FuzzParse: Parse never panics, its output is valid (unique indices, positive
// VRAM, bounded length) and survives a Format/Parse round trip.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0:TITAN X:12288,1:GTX 1080 Ti:11264", "3xTITAN X:12GB", "none", "A:1,0:B:2", "2 x L4:24 GiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		gpus, err := Parse(s)
		if err != nil {
			return
		}
		if len(gpus) > MaxGPUs {
			t.Fatalf("%d GPUs", len(gpus))
		}
		seen := map[int]bool{}
		for _, g := range gpus {
			if seen[g.Index] || g.VRAMMB <= 0 || g.Model == "" {
				t.Fatalf("invalid result %+v for %q", gpus, s)
			}
			seen[g.Index] = true
		}
		again, err := Parse(Format(gpus))
		if err != nil {
			t.Fatalf("Format output %q does not parse: %v", Format(gpus), err)
		}
		if !reflect.DeepEqual(again, gpus) && !(len(again) == 0 && len(gpus) == 0) {
			t.Fatalf("round trip %q: %+v != %+v", s, again, gpus)
		}
	})
}
