// Package gpudesc parses and prints the short GPU description used by
// `trainyard agent --gpus` and by cluster specs, for machines without NVIDIA
// tools, for expected resources, and for tests.
//
// Syntax: a comma-separated list of entries; each entry is one of
//
//	MODEL:VRAM            one GPU, next free index
//	INDEX:MODEL:VRAM      one GPU at an explicit index
//	COUNTxMODEL:VRAM      COUNT identical GPUs at the next free indices
//
// Free indices are assigned in order of appearance, skipping ones already
// taken, so "1:A:1GB,B:1GB" puts B at 0.
//
// VRAM is a number with an optional unit: MiB/MB/M (the default, as
// nvidia-smi reports) or GiB/GB/G (×1024). Model names may contain spaces and
// parentheses but not ',' or ':'. An empty string or "none" means no GPUs.
//
//	0:TITAN X:12288,1:GTX 1080 Ti:11264
//	3xTITAN X (Pascal):12GB
//	GTX 1660:6GB
package gpudesc

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/trainyard/trainyard/internal/resources"
)

// MaxGPUs bounds one description; no real node has more, and it keeps a
// typo like "8000xA100:80GB" from allocating a huge slice.
const MaxGPUs = 64

var countRe = regexp.MustCompile(`^(\d+)\s*[xX×]\s*(.+)$`)

// Parse turns a description into GPUs sorted by index.
func Parse(desc string) ([]resources.GPU, error) {
	desc = strings.TrimSpace(desc)
	if desc == "" || strings.EqualFold(desc, "none") {
		return nil, nil
	}
	var gpus []resources.GPU
	used := map[int]bool{}
	next := 0
	for i, raw := range strings.Split(desc, ",") {
		entry := strings.TrimSpace(raw)
		if entry == "" {
			return nil, fmt.Errorf("gpu entry %d: empty", i+1)
		}
		parts := strings.Split(entry, ":")
		index := -1
		switch len(parts) {
		case 2:
		case 3:
			n, err := strconv.Atoi(strings.TrimSpace(parts[0]))
			if err != nil || n < 0 || n >= 1<<16 {
				return nil, fmt.Errorf("gpu entry %q: index %q is not a small non-negative integer", entry, parts[0])
			}
			index = n
			parts = parts[1:]
		default:
			return nil, fmt.Errorf("gpu entry %q: want MODEL:VRAM, INDEX:MODEL:VRAM or COUNTxMODEL:VRAM", entry)
		}
		model := strings.TrimSpace(parts[0])
		count := 1
		// A count only makes sense without an explicit index; with one, the
		// whole field is the model name (so Format's output always re-parses).
		if m := countRe.FindStringSubmatch(model); m != nil && index < 0 {
			n, err := strconv.Atoi(m[1])
			if err != nil || n < 1 || n > MaxGPUs {
				return nil, fmt.Errorf("gpu entry %q: count must be 1..%d", entry, MaxGPUs)
			}
			count, model = n, strings.TrimSpace(m[2])
		}
		if model == "" {
			return nil, fmt.Errorf("gpu entry %q: empty model name", entry)
		}
		vram, err := ParseMemoryMB(parts[1])
		if err != nil {
			return nil, fmt.Errorf("gpu entry %q: vram: %w", entry, err)
		}
		if vram <= 0 {
			return nil, fmt.Errorf("gpu entry %q: vram must be positive", entry)
		}
		if vram > 1<<31-1 {
			return nil, fmt.Errorf("gpu entry %q: vram %d MiB is too large", entry, vram)
		}
		for c := 0; c < count; c++ {
			idx := index
			if idx < 0 {
				for used[next] {
					next++
				}
				idx = next
			}
			if used[idx] {
				return nil, fmt.Errorf("gpu entry %q: index %d given twice", entry, idx)
			}
			used[idx] = true
			if len(gpus) == MaxGPUs {
				return nil, fmt.Errorf("more than %d GPUs described", MaxGPUs)
			}
			gpus = append(gpus, resources.GPU{Index: idx, Model: model, VRAMMB: int(vram)})
		}
	}
	sort.Slice(gpus, func(a, b int) bool { return gpus[a].Index < gpus[b].Index })
	return gpus, nil
}

// Format prints GPUs in the explicit-index form, which Parse reads back to
// the same list. Identical runs of GPUs are not collapsed: indices matter.
func Format(gpus []resources.GPU) string {
	if len(gpus) == 0 {
		return "none"
	}
	parts := make([]string, len(gpus))
	for i, g := range gpus {
		parts[i] = fmt.Sprintf("%d:%s:%d", g.Index, g.Model, g.VRAMMB)
	}
	return strings.Join(parts, ",")
}

var memRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)$`)

// ParseMemoryMB reads "12GB", "11264", "11264MiB", "7.5GiB" as MiB. GB and
// GiB are both ×1024: GPU and node memory are sold and reported in binary
// units even where the label says GB.
func ParseMemoryMB(s string) (int64, error) {
	m := memRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%q is not a size like 12GB or 11264MiB", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	var mult float64
	switch strings.ToLower(m[2]) {
	case "", "m", "mb", "mib":
		mult = 1
	case "g", "gb", "gib":
		mult = 1024
	case "t", "tb", "tib":
		mult = 1024 * 1024
	default:
		return 0, fmt.Errorf("%q: unknown unit %q (use MiB, GiB or TiB)", s, m[2])
	}
	mb := v * mult
	if mb > 1<<50 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(mb + 0.5), nil
}
