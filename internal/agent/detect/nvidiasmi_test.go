package detect

import (
	"reflect"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/resources"
)

func gpu(i int, model string, vram, util, used int) GPUStatus {
	return GPUStatus{GPU: resources.GPU{Index: i, Model: model, VRAMMB: vram}, UtilizationPct: util, MemoryUsedMB: used}
}

// Outputs in the shape nvidia-smi prints for the lab's and fleet's boards
// (driver-dependent name prefixes, placeholders, Windows line endings).
func TestParseNvidiaSMI(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want []GPUStatus
		err  string
	}{
		{name: "empty", out: "", want: nil},
		{name: "nickel 3x TITAN X, older driver names", out: "0, TITAN X (Pascal), 12196, 0, 2\n1, TITAN X (Pascal), 12196, 97, 11469\n2, TITAN X (Pascal), 12196, 0, 2\n",
			want: []GPUStatus{gpu(0, "TITAN X (Pascal)", 12196, 0, 2), gpu(1, "TITAN X (Pascal)", 12196, 97, 11469), gpu(2, "TITAN X (Pascal)", 12196, 0, 2)}},
		{name: "zinc 1080 Ti", out: "0, NVIDIA GeForce GTX 1080 Ti, 11264, 0, 10364\n1, NVIDIA GeForce GTX 1080 Ti, 11264, 45, 1\n",
			want: []GPUStatus{gpu(0, "NVIDIA GeForce GTX 1080 Ti", 11264, 0, 10364), gpu(1, "NVIDIA GeForce GTX 1080 Ti", 11264, 45, 1)}},
		{name: "g5.2xlarge A10G", out: "0, NVIDIA A10G, 23028, 0, 1\n", want: []GPUStatus{gpu(0, "NVIDIA A10G", 23028, 0, 1)}},
		{name: "H100", out: "0, NVIDIA H100 80GB HBM3, 81559, 100, 79011\n", want: []GPUStatus{gpu(0, "NVIDIA H100 80GB HBM3", 81559, 100, 79011)}},
		{name: "placeholders", out: "0, NVIDIA RTX PRO 6000, 98304, [N/A], [Not Supported]\n", want: []GPUStatus{gpu(0, "NVIDIA RTX PRO 6000", 98304, -1, -1)}},
		{name: "unified memory", out: "0, NVIDIA GB10, [N/A], 39, [N/A]\n", want: []GPUStatus{gpu(0, "NVIDIA GB10", 0, 39, -1)}},
		{name: "CRLF and blank lines", out: "0, NVIDIA L40S, 46068, 12, 300\r\n\r\n1, NVIDIA L40S, 46068, 0, 0\r\n",
			want: []GPUStatus{gpu(0, "NVIDIA L40S", 46068, 12, 300), gpu(1, "NVIDIA L40S", 46068, 0, 0)}},
		{name: "comma in name", out: "3, Weird, Inc. Board, 1024, 5, 6\n", want: []GPUStatus{gpu(3, "Weird, Inc. Board", 1024, 5, 6)}},
		{name: "too few columns", out: "0, NVIDIA A10G, 23028\n", err: "want 5 columns"},
		{name: "units left in", out: "0, NVIDIA A10G, 23028 MiB, 0 %, 1 MiB\n", err: "memory.total"},
		{name: "error text", out: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", err: "want 5 columns"},
		{name: "duplicate index", out: "0, A, 1, 0, 0\n0, B, 1, 0, 0\n", err: "listed twice"},
		{name: "bad index", out: "x, A, 1, 0, 0\n", err: "index"},
		{name: "empty name", out: "0, , 1, 0, 0\n", err: "empty GPU name"},
		{name: "NaN", out: "0, A, NaN, 0, 0\n", err: "memory.total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNvidiaSMI([]byte(tt.out))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// FuzzParseNvidiaSMI: never panics; accepted output has unique indices,
// non-empty names and values in range.
func FuzzParseNvidiaSMI(f *testing.F) {
	for _, s := range []string{
		"0, TITAN X (Pascal), 12196, 0, 2\n1, TITAN X (Pascal), 12196, 97, 11469\n",
		"0, NVIDIA GB10, [N/A], 39, [N/A]\n",
		"3, Weird, Inc. Board, 1024, 5, 6\r\n",
		"No devices were found\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		gs, err := ParseNvidiaSMI(b)
		if err != nil {
			return
		}
		seen := map[int]bool{}
		for _, g := range gs {
			if seen[g.Index] || g.Index < 0 || g.Model == "" || g.VRAMMB < 0 || g.UtilizationPct < -1 || g.MemoryUsedMB < -1 {
				t.Fatalf("invalid %+v from %q", g, b)
			}
			seen[g.Index] = true
		}
	})
}
