package detect

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/trainyard/trainyard/internal/resources"
)

// NvidiaSMIArgs is the query the agent runs. The columns are fixed; the
// parser depends on their order.
var NvidiaSMIArgs = []string{
	"--query-gpu=index,name,memory.total,utilization.gpu,memory.used",
	"--format=csv,noheader,nounits",
}

// GPUStatus is one GPU with its current load. Unknown values (nvidia-smi
// prints "[N/A]" or "[Not Supported]" for vGPUs, MIG parents and some older
// GeForce boards) are -1.
type GPUStatus struct {
	resources.GPU
	UtilizationPct int `json:"utilization_pct"`
	MemoryUsedMB   int `json:"memory_used_mb"`
}

// ParseNvidiaSMI parses the output of nvidia-smi with NvidiaSMIArgs. The
// model name is everything between the first and the last three columns, so
// a name containing a comma still parses.
func ParseNvidiaSMI(out []byte) ([]GPUStatus, error) {
	var gpus []GPUStatus
	seen := map[int]bool{}
	for n, line := range bytes.Split(out, []byte("\n")) {
		s := strings.TrimSpace(string(line))
		if s == "" {
			continue
		}
		cols := strings.Split(s, ",")
		if len(cols) < 5 {
			return nil, fmt.Errorf("nvidia-smi line %d %q: want 5 columns (index, name, memory.total, utilization.gpu, memory.used), got %d", n+1, s, len(cols))
		}
		last := len(cols) - 3
		name := strings.TrimSpace(strings.Join(cols[1:last], ","))
		for i := range cols {
			cols[i] = strings.TrimSpace(cols[i])
		}
		index, err := strconv.Atoi(cols[0])
		if err != nil || index < 0 {
			return nil, fmt.Errorf("nvidia-smi line %d %q: index %q is not a non-negative integer", n+1, s, cols[0])
		}
		if seen[index] {
			return nil, fmt.Errorf("nvidia-smi line %d %q: index %d listed twice", n+1, s, index)
		}
		seen[index] = true
		if name == "" {
			return nil, fmt.Errorf("nvidia-smi line %d %q: empty GPU name", n+1, s)
		}
		total, err := optionalInt(cols[last])
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d %q: memory.total: %w", n+1, s, err)
		}
		util, err := optionalInt(cols[last+1])
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d %q: utilization.gpu: %w", n+1, s, err)
		}
		used, err := optionalInt(cols[last+2])
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d %q: memory.used: %w", n+1, s, err)
		}
		// Unified-memory boards (GB10) report no memory.total; count them
		// as a GPU with unknown VRAM rather than dropping them.
		if total < 0 {
			total = 0
		}
		gpus = append(gpus, GPUStatus{
			GPU:            resources.GPU{Index: index, Model: name, VRAMMB: total},
			UtilizationPct: util,
			MemoryUsedMB:   used,
		})
	}
	return gpus, nil
}

var numberRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// optionalInt reads a nounits value; bracketed placeholders mean unknown.
func optionalInt(s string) (int, error) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		return -1, nil
	}
	// Some drivers print memory with a fraction; nvidia-smi values are MiB
	// and percentages, so round.
	if !numberRe.MatchString(s) {
		return 0, fmt.Errorf("%q is not a non-negative number", s)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v > 1<<31-1 {
		return 0, fmt.Errorf("%q is not a non-negative number", s)
	}
	return int(v + 0.5), nil
}
