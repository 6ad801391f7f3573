package detect

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/resources"
)

// fakeSMI writes an executable script standing in for nvidia-smi on this
// GPU-less machine; it checks it was asked the agreed query.
func fakeSMI(t *testing.T, stdout string, code int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nvidia-smi")
	script := "#!/bin/sh\n" +
		"[ \"$1\" = '" + NvidiaSMIArgs[0] + "' ] && [ \"$2\" = '" + NvidiaSMIArgs[1] + "' ] || { echo bad args \"$@\" >&2; exit 2; }\n" +
		"cat <<'OUT'\n" + stdout + "OUT\nexit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func fixtureRoot(t *testing.T, meminfo, cpuMax, memMax string) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel, s string) {
		if s == "" {
			return
		}
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/meminfo", meminfo)
	write("sys/fs/cgroup/cpu.max", cpuMax)
	write("sys/fs/cgroup/memory.max", memMax)
	return root
}

const meminfo64G = "MemTotal:       65842332 kB\nMemFree:        1000000 kB\nMemAvailable:   40000000 kB\nBuffers:          123 kB\n"

func TestDetect(t *testing.T) {
	ncpu := float64(runtime.NumCPU())
	tests := []struct {
		name string
		opts func(t *testing.T) Options
		want resources.Capacity
		err  string
	}{
		{
			name: "described GPUs win over nvidia-smi",
			opts: func(t *testing.T) Options {
				return Options{GPUs: "2xTITAN X:12GB", NvidiaSMI: fakeSMI(t, "0, NVIDIA A10G, 23028, 0, 1\n", 0), Root: fixtureRoot(t, meminfo64G, "", "")}
			},
			want: resources.Capacity{CPUs: ncpu, MemoryMB: 64299, GPUs: []resources.GPU{{Index: 0, Model: "TITAN X", VRAMMB: 12288}, {Index: 1, Model: "TITAN X", VRAMMB: 12288}}},
		},
		{
			name: "nvidia-smi",
			opts: func(t *testing.T) Options {
				return Options{NvidiaSMI: fakeSMI(t, "0, NVIDIA A10G, 23028, 0, 1\n", 0), Root: fixtureRoot(t, meminfo64G, "", "")}
			},
			want: resources.Capacity{CPUs: ncpu, MemoryMB: 64299, GPUs: []resources.GPU{{Index: 0, Model: "NVIDIA A10G", VRAMMB: 23028}}},
		},
		{
			name: "missing nvidia-smi is no GPUs",
			opts: func(t *testing.T) Options {
				return Options{NvidiaSMI: filepath.Join(t.TempDir(), "nvidia-smi"), Root: fixtureRoot(t, meminfo64G, "", "")}
			},
			want: resources.Capacity{CPUs: ncpu, MemoryMB: 64299},
		},
		{
			name: "expected GPUs where nvidia-smi is missing",
			opts: func(t *testing.T) Options {
				return Options{Expected: "1:TITAN X:12GB", NvidiaSMI: filepath.Join(t.TempDir(), "nvidia-smi"), Root: fixtureRoot(t, meminfo64G, "", "")}
			},
			want: resources.Capacity{CPUs: ncpu, MemoryMB: 64299, GPUs: []resources.GPU{{Index: 1, Model: "TITAN X", VRAMMB: 12288}}},
		},
		{
			name: "detected GPUs win over expected ones",
			opts: func(t *testing.T) Options {
				return Options{Expected: "1:TITAN X:12GB", NvidiaSMI: fakeSMI(t, "0, NVIDIA H200, 143771, 0, 1\n", 0), Root: fixtureRoot(t, meminfo64G, "", "")}
			},
			want: resources.Capacity{CPUs: ncpu, MemoryMB: 64299, GPUs: []resources.GPU{{Index: 0, Model: "NVIDIA H200", VRAMMB: 143771}}},
		},
		{
			name: "visible devices of four",
			opts: func(t *testing.T) Options {
				smi := fakeSMI(t, "0, NVIDIA H200, 143771, 0, 1\n1, NVIDIA H200, 143771, 0, 1\n2, NVIDIA H200, 143771, 0, 1\n3, NVIDIA H200, 143771, 0, 1\n", 0)
				return Options{Visible: []int{1, 3}, NvidiaSMI: smi, Root: fixtureRoot(t, meminfo64G, "", "")}
			},
			want: resources.Capacity{CPUs: ncpu, MemoryMB: 64299, GPUs: []resources.GPU{{Index: 1, Model: "NVIDIA H200", VRAMMB: 143771}, {Index: 3, Model: "NVIDIA H200", VRAMMB: 143771}}},
		},
		{
			name: "no visible devices",
			opts: func(t *testing.T) Options {
				return Options{Visible: []int{}, NvidiaSMI: fakeSMI(t, "0, NVIDIA H200, 143771, 0, 1\n", 0), Root: fixtureRoot(t, meminfo64G, "", "")}
			},
			want: resources.Capacity{CPUs: ncpu, MemoryMB: 64299},
		},
		{
			name: "missing nvidia-smi on PATH is no GPUs",
			opts: func(t *testing.T) Options {
				t.Setenv("PATH", t.TempDir())
				return Options{Root: fixtureRoot(t, meminfo64G, "", "")}
			},
			want: resources.Capacity{CPUs: ncpu, MemoryMB: 64299},
		},
		{
			name: "no devices found is no GPUs",
			opts: func(t *testing.T) Options {
				return Options{NvidiaSMI: fakeSMI(t, "No devices were found\n", 6), Root: fixtureRoot(t, meminfo64G, "", "")}
			},
			want: resources.Capacity{CPUs: ncpu, MemoryMB: 64299},
		},
		{
			name: "driver failure is an error",
			opts: func(t *testing.T) Options {
				return Options{NvidiaSMI: fakeSMI(t, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", 9), Root: fixtureRoot(t, meminfo64G, "", "")}
			},
			err: "couldn't communicate",
		},
		{
			name: "bad --gpus",
			opts: func(t *testing.T) Options {
				return Options{GPUs: "TITAN X", Root: fixtureRoot(t, meminfo64G, "", "")}
			},
			err: `--gpus "TITAN X"`,
		},
		{
			name: "cgroup limits (a 7.5-CPU, 30 GiB pod)",
			opts: func(t *testing.T) Options {
				return Options{GPUs: "none", Root: fixtureRoot(t, meminfo64G, "750000 100000\n", "32212254720\n")}
			},
			want: resources.Capacity{CPUs: min(7.5, ncpu), MemoryMB: 30720},
		},
		{
			name: "unlimited cgroup",
			opts: func(t *testing.T) Options {
				return Options{GPUs: "none", Root: fixtureRoot(t, meminfo64G, "max 100000\n", "max\n")}
			},
			want: resources.Capacity{CPUs: ncpu, MemoryMB: 64299},
		},
		{
			name: "no meminfo",
			opts: func(t *testing.T) Options { return Options{GPUs: "none", Root: t.TempDir()} },
			err:  "read memory size",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Detect(context.Background(), tt.opts(t))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.CPUs != tt.want.CPUs || got.MemoryMB != tt.want.MemoryMB || len(got.GPUs) != len(tt.want.GPUs) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got.GPUs {
				if got.GPUs[i] != tt.want.GPUs[i] {
					t.Fatalf("gpu %d: got %+v, want %+v", i, got.GPUs[i], tt.want.GPUs[i])
				}
			}
		})
	}
}

// The real machine: whatever it has, detection must succeed and agree with
// /proc/meminfo.
func TestDetectThisMachine(t *testing.T) {
	c, err := Detect(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.CPUs <= 0 || c.MemoryMB <= 0 {
		t.Fatalf("implausible capacity %+v", c)
	}
}

func TestParseMeminfo(t *testing.T) {
	tests := []struct {
		in   string
		want Meminfo
		err  string
	}{
		{in: meminfo64G, want: Meminfo{TotalMB: 64299, AvailableMB: 39062}},
		{in: "MemTotal: 2048 kB\n", want: Meminfo{TotalMB: 2, AvailableMB: -1}},
		{in: "MemFree: 1 kB\n", err: "no MemTotal"},
		{in: "MemTotal: lots kB\n", err: "not a size"},
		{in: "MemTotal: 12 MB\n", err: "unexpected value"},
	}
	for _, tt := range tests {
		got, err := ParseMeminfo(strings.NewReader(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseMeminfo(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseMeminfo(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseVisible(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"", []int{}, true},
		{"0", []int{0}, true},
		{"2, 0", []int{2, 0}, true},
		{"1,-1,2", []int{1}, true}, // CUDA stops at the first negative index
		{"GPU-5f0a1c7e-0000", nil, false},
		{"MIG-1", nil, false},
	} {
		got, ok := ParseVisible(tc.in)
		if ok != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("ParseVisible(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
