// Package resources is the shared vocabulary for what a node offers and what
// work asks for: agents report it, cluster specs declare it, the scheduler
// and policies consume it.
package resources

// GPU is one physical device as an agent sees it.
type GPU struct {
	Index  int    `json:"index" yaml:"index"`
	Model  string `json:"model" yaml:"model"`
	VRAMMB int    `json:"vram_mb" yaml:"vram_mb"`
}

// Capacity is what a node has (or is expected to have).
type Capacity struct {
	CPUs     float64 `json:"cpus" yaml:"cpus"`
	MemoryMB int64   `json:"memory_mb" yaml:"memory_mb"`
	GPUs     []GPU   `json:"gpus,omitempty" yaml:"gpus,omitempty"`
}

// TotalVRAMMB sums the memory of all GPUs.
func (c Capacity) TotalVRAMMB() int {
	t := 0
	for _, g := range c.GPUs {
		t += g.VRAMMB
	}
	return t
}
