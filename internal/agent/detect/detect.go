// Package detect finds what a node offers: CPUs, RAM and GPUs. GPUs come from
// nvidia-smi, or from an explicit description (package gpudesc) on machines
// without NVIDIA tools and in tests.
package detect

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainyard/trainyard/internal/agent/detect/gpudesc"
	"github.com/trainyard/trainyard/internal/resources"
)

// Options say where to look. The zero value probes the real machine.
type Options struct {
	// GPUs, when non-empty, is a gpudesc description used instead of
	// nvidia-smi ("none" declares a GPU-less node).
	GPUs string
	// Expected is the spec's description of the GPUs (gpudesc): what a
	// machine without nvidia-smi offers (tests, laptops). Where nvidia-smi
	// is, the GPUs it reports win, and the cluster shows any difference.
	Expected string
	// Visible, when non-nil, limits detection to these nvidia-smi indices
	// (the agent's CUDA_VISIBLE_DEVICES: local agents sharing a machine
	// each get their own); an empty non-nil slice sees none.
	Visible []int
	// NvidiaSMI is the program to run; default "nvidia-smi" from PATH.
	NvidiaSMI string
	// Root prefixes /proc and /sys paths (tests point it at a fixture tree).
	Root string
	// Timeout bounds one nvidia-smi call; default 10s (a wedged driver can
	// hang it forever).
	Timeout time.Duration
}

// Detect reports the node's capacity.
func Detect(ctx context.Context, o Options) (resources.Capacity, error) {
	var c resources.Capacity
	c.CPUs = CPUs(o.Root)
	mem, err := MemoryMB(o.Root)
	if err != nil {
		return c, err
	}
	c.MemoryMB = mem
	gs, err := GPUs(ctx, o)
	if err != nil {
		return c, err
	}
	for _, g := range gs {
		c.GPUs = append(c.GPUs, g.GPU)
	}
	return c, nil
}

// GPUs lists GPUs with their current load (-1 where unknown, always for a
// described GPU). A missing nvidia-smi means no GPUs, not an error, so
// CPU-only nodes need no flag.
func GPUs(ctx context.Context, o Options) ([]GPUStatus, error) {
	if strings.TrimSpace(o.GPUs) != "" {
		gs, err := gpudesc.Parse(o.GPUs)
		if err != nil {
			return nil, fmt.Errorf("--gpus %q: %w", o.GPUs, err)
		}
		out := make([]GPUStatus, len(gs))
		for i, g := range gs {
			out[i] = GPUStatus{GPU: g, UtilizationPct: -1, MemoryUsedMB: -1}
		}
		return out, nil
	}
	smi := o.NvidiaSMI
	if smi == "" {
		smi = "nvidia-smi"
	}
	path, err := exec.LookPath(smi)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			if strings.TrimSpace(o.Expected) != "" {
				return GPUs(ctx, Options{GPUs: o.Expected})
			}
			return nil, nil
		}
		return nil, fmt.Errorf("find %s: %w", smi, err)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, NvidiaSMIArgs...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// A driver installed on a machine whose GPUs are gone (or a
		// container without devices) says so and exits non-zero.
		if bytes.Contains(stdout.Bytes(), []byte("No devices were found")) ||
			bytes.Contains(stderr.Bytes(), []byte("No devices were found")) {
			return nil, nil
		}
		msg := strings.TrimSpace(stderr.String() + " " + stdout.String())
		return nil, fmt.Errorf("run %s: %w: %s", path, err, msg)
	}
	gs, err := ParseNvidiaSMI(stdout.Bytes())
	if err != nil {
		return nil, fmt.Errorf("parse %s output: %w", path, err)
	}
	if o.Visible != nil {
		gs = slices.DeleteFunc(gs, func(g GPUStatus) bool { return !slices.Contains(o.Visible, g.Index) })
	}
	return gs, nil
}

// ParseVisible reads CUDA_VISIBLE_DEVICES as nvidia-smi indices ("0,2").
// ok is false for a list it cannot map to indices (GPU UUIDs, MIG
// instances): detection then sees every GPU nvidia-smi lists.
func ParseVisible(s string) (idx []int, ok bool) {
	idx = []int{}
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		i, err := strconv.Atoi(f)
		if err != nil {
			return nil, false
		}
		if i < 0 { // CUDA stops at the first negative index
			break
		}
		idx = append(idx, i)
	}
	return idx, true
}

// CPUs is the number of CPUs this process may use: the affinity mask,
// lowered by a cgroup v2 quota (a Kubernetes pod limited to 7.5 CPUs on an
// 8-vCPU g5.2xlarge reports 7.5).
func CPUs(root string) float64 {
	n := float64(runtime.NumCPU())
	b, err := os.ReadFile(root + "/sys/fs/cgroup/cpu.max")
	if err != nil {
		return n
	}
	if q, ok := parseCPUMax(string(b)); ok && q < n {
		return q
	}
	return n
}

// parseCPUMax reads cgroup v2 "QUOTA PERIOD" ("max 100000" = unlimited).
func parseCPUMax(s string) (float64, bool) {
	f := strings.Fields(s)
	if len(f) != 2 || f[0] == "max" {
		return 0, false
	}
	quota, err1 := strconv.ParseFloat(f[0], 64)
	period, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil || quota <= 0 || period <= 0 {
		return 0, false
	}
	return quota / period, true
}

// MemoryMB is MemTotal from /proc/meminfo, lowered by a cgroup v2
// memory.max limit.
func MemoryMB(root string) (int64, error) {
	mi, err := ReadMeminfo(root + "/proc/meminfo")
	if err != nil {
		return 0, err
	}
	total := mi.TotalMB
	if b, err := os.ReadFile(root + "/sys/fs/cgroup/memory.max"); err == nil {
		s := strings.TrimSpace(string(b))
		if v, err := strconv.ParseInt(s, 10, 64); err == nil && v > 0 && v/(1<<20) < total {
			total = v / (1 << 20)
		}
	}
	return total, nil
}

// Meminfo holds the /proc/meminfo fields the agent reports.
type Meminfo struct {
	TotalMB     int64
	AvailableMB int64 // -1 on kernels older than 3.14
}

// ReadMeminfo parses a /proc/meminfo file.
func ReadMeminfo(path string) (Meminfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return Meminfo{}, fmt.Errorf("read memory size: %w", err)
	}
	defer f.Close()
	m, err := ParseMeminfo(f)
	if err != nil {
		return m, fmt.Errorf("parse %s: %w", path, err)
	}
	return m, nil
}

// ParseMeminfo parses /proc/meminfo content ("MemTotal:  16318160 kB").
func ParseMeminfo(r io.Reader) (Meminfo, error) {
	m := Meminfo{TotalMB: -1, AvailableMB: -1}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "MemTotal" && key != "MemAvailable") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("%s: unexpected value %q", key, strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return m, fmt.Errorf("%s: %q is not a size in kB", key, f[0])
		}
		if key == "MemTotal" {
			m.TotalMB = kb / 1024
		} else {
			m.AvailableMB = kb / 1024
		}
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if m.TotalMB < 0 {
		return m, errors.New("no MemTotal line")
	}
	return m, nil
}
