package pluginhost

import "time"

// Limits bound what one plugin may use. They are data handed to Load, so a
// run spec or an upload policy can set them; zero fields take defaults.
type Limits struct {
	MemoryPages      uint32        // linear memory cap, 64 KiB pages (default 1024 = 64 MiB)
	CallTimeout      time.Duration // wall-clock deadline of one ABI call (default 2s)
	InitTimeout      time.Duration // deadline of instantiation and init (default 10s)
	MaxMetadataBytes int           // metadata JSON cap (default 64 KiB)
	MaxStateBytes    int           // game_save output cap (default 1 MiB)
	MaxEnvs          int           // instances per init (default 65536)
	MaxDim           int           // observation/action values per instance (default 1<<16)
	MaxStderrBytes   int           // guest stderr kept for error messages (default 4 KiB)
	PoolSize         int           // idle instances kept per module (default 8)
}

// DefaultLimits are the limits used for zero fields.
func DefaultLimits() Limits {
	return Limits{
		MemoryPages:      1024,
		CallTimeout:      2 * time.Second,
		InitTimeout:      10 * time.Second,
		MaxMetadataBytes: 64 << 10,
		MaxStateBytes:    1 << 20,
		MaxEnvs:          1 << 16,
		MaxDim:           1 << 16,
		MaxStderrBytes:   4 << 10,
		PoolSize:         8,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MemoryPages == 0 {
		l.MemoryPages = d.MemoryPages
	}
	if l.CallTimeout <= 0 {
		l.CallTimeout = d.CallTimeout
	}
	if l.InitTimeout <= 0 {
		l.InitTimeout = d.InitTimeout
	}
	if l.MaxMetadataBytes <= 0 {
		l.MaxMetadataBytes = d.MaxMetadataBytes
	}
	if l.MaxStateBytes <= 0 {
		l.MaxStateBytes = d.MaxStateBytes
	}
	if l.MaxEnvs <= 0 {
		l.MaxEnvs = d.MaxEnvs
	}
	if l.MaxDim <= 0 {
		l.MaxDim = d.MaxDim
	}
	if l.MaxStderrBytes <= 0 {
		l.MaxStderrBytes = d.MaxStderrBytes
	}
	if l.PoolSize <= 0 {
		l.PoolSize = d.PoolSize
	}
	return l
}
