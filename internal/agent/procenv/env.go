// Package procenv starts job processes the way the agent must: a small
// allow-listed environment (HPC login environments carry thousands of
// variables that break or slow jobs, see the seed-003 notes), exactly the
// assigned GPUs, and a process group that stops as a whole.
package procenv

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/trainyard/trainyard/internal/names"
)

// DefaultAllow are the variables copied from the agent's own environment
// into every job: enough for a shell, Python and CUDA to work, nothing more.
var DefaultAllow = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL",
	"LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM",
	"LD_LIBRARY_PATH", "CUDA_HOME",
}

// Set by Build; callers may not pass them through Extra or Allow.
const (
	CUDAVisibleDevices = "CUDA_VISIBLE_DEVICES"
	// CUDA numbers devices fastest-first by default; nvidia-smi (and so the
	// agent's detection and assignment) numbers them by PCI bus. On a mixed
	// machine the two orders differ, so pin CUDA to the PCI order.
	CUDADeviceOrder = "CUDA_DEVICE_ORDER"
)

// Spec describes one job process's environment.
type Spec struct {
	// Allow names variables copied from the base environment when set
	// there. Nil means DefaultAllow; an empty non-nil slice copies nothing.
	Allow []string
	// Extra are passed explicitly and win over copied values.
	Extra map[string]string
	// GPUs are the physical indices assigned to the job; none yields
	// CUDA_VISIBLE_DEVICES="" (CUDA then sees no device, which is what a
	// CPU-only job must get, rather than inheriting every GPU).
	GPUs []int
}

// Build returns the environment for a job as sorted "K=V" entries. base is
// normally os.Environ().
func Build(base []string, s Spec) ([]string, error) {
	allow := s.Allow
	if allow == nil {
		allow = DefaultAllow
	}
	out := map[string]string{}
	baseMap := map[string]string{}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" {
			baseMap[k] = v
		}
	}
	for _, k := range allow {
		if reserved(k) {
			return nil, fmt.Errorf("allow-list names %s, which is set from the GPU assignment", k)
		}
		if v, ok := baseMap[k]; ok {
			out[k] = v
		}
	}
	for k, v := range s.Extra {
		if err := checkName(k); err != nil {
			return nil, err
		}
		if reserved(k) {
			return nil, fmt.Errorf("variable %s is set from the GPU assignment, not passed", k)
		}
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("variable %s: value contains a NUL byte", k)
		}
		out[k] = v
	}
	seen := map[int]bool{}
	ids := make([]string, 0, len(s.GPUs))
	for _, g := range s.GPUs {
		if g < 0 {
			return nil, fmt.Errorf("GPU index %d is negative", g)
		}
		if seen[g] {
			return nil, fmt.Errorf("GPU index %d assigned twice", g)
		}
		seen[g] = true
		ids = append(ids, strconv.Itoa(g))
	}
	out[CUDAVisibleDevices] = strings.Join(ids, ",")
	out[CUDADeviceOrder] = "PCI_BUS_ID"

	env := make([]string, 0, len(out))
	for k, v := range out {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env, nil
}

func reserved(k string) bool { return k == CUDAVisibleDevices || k == CUDADeviceOrder }

// checkName is the API's check again (names.EnvKey): a spec built some
// other way is refused here too.
func checkName(k string) error { return names.EnvKey.Check(k) }
