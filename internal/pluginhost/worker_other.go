//go:build !linux

package pluginhost

import (
	"context"
	"errors"

	"github.com/trainyard/trainyard/sdk/go/envs"
)

// ServeWorkerIfChild is a no-op: worker mode needs Linux.
func ServeWorkerIfChild() {}

// WorkerVecEnv is unavailable on this platform.
type WorkerVecEnv struct{ envs.VecEnv }

// NewWorkerVecEnv reports that worker mode needs Linux.
func (m *Module) NewWorkerVecEnv(ctx context.Context, n int, seed uint64, command []string) (*WorkerVecEnv, error) {
	return nil, errors.New("plugins: worker mode needs Linux")
}
