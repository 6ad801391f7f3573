// Package local starts node agents as processes on this machine (the
// start_ray_cluster.sh / add_ray_worker.sh replacement of seed 004). Each
// agent is detached in its own session, so it outlives a crashed control
// plane; its directory under StateDir holds the pid file, by which a
// restarted control plane finds it instead of starting a second copy.
package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trainyard/trainyard/internal/agent/procenv"
	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/provision"
	"github.com/trainyard/trainyard/internal/provision/lifecycle"
)

// Provisioner is the local provisioner.
type Provisioner struct {
	// StateDir holds one directory per node (<StateDir>/<node>).
	StateDir string
	// Grace is how long Stop waits after SIGTERM before SIGKILL.
	Grace time.Duration
	// Inherit are the variables agents copy from this process's
	// environment; nil means procenv.DefaultAllow.
	Inherit []string
	// StartCheck is how long a new agent must stay up for Start to
	// succeed; it catches agents that exit at once (bad flags, bad
	// binary) while the caller can still say why.
	StartCheck time.Duration
}

// New returns a local provisioner keeping agent state under stateDir (use
// an absolute path: agents are identified by it).
func New(stateDir string) *Provisioner {
	return &Provisioner{StateDir: stateDir, Grace: 10 * time.Second, StartCheck: 500 * time.Millisecond}
}

var _ provision.Provisioner = (*Provisioner)(nil)

func (p *Provisioner) dir(node spec.Node) (string, error) {
	if node.Provisioner.Kind != Kind {
		return "", fmt.Errorf("node %q: provisioner is %q, not local", node.Name, node.Provisioner.Kind)
	}
	if node.Name == "" || strings.ContainsAny(node.Name, "/\x00") || node.Name == "." || node.Name == ".." {
		return "", fmt.Errorf("node %q: unusable as a directory name", node.Name)
	}
	abs, err := filepath.Abs(p.StateDir)
	if err != nil {
		return "", fmt.Errorf("node %q: state dir: %w", node.Name, err)
	}
	return filepath.Join(abs, node.Name), nil
}

// Start starts node's agent unless it already runs, with CUDA_VISIBLE_DEVICES
// set to the node's GPUs, when it is given any, so local agents never share
// one.
func (p *Provisioner) Start(ctx context.Context, node spec.Node, l provision.AgentLaunch) (provision.Handle, error) {
	dir, err := p.dir(node)
	if err != nil {
		return provision.Handle{}, err
	}
	bin, err := filepath.Abs(l.Binary)
	if err != nil {
		return provision.Handle{}, fmt.Errorf("node %q: agent binary: %w", node.Name, err)
	}
	if fi, err := os.Stat(bin); err != nil {
		return provision.Handle{}, fmt.Errorf("node %q: agent binary: %w", node.Name, err)
	} else if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return provision.Handle{}, fmt.Errorf("node %q: agent binary %s is not executable", node.Name, bin)
	}
	env := map[string]string{}
	for k, v := range l.Env {
		env[k] = v
	}
	// A node given GPUs (described, or provisioner.local.gpus) sees only
	// those; one given none sees the machine's, as nvidia-smi reports them.
	if idx := GPUs(node); len(idx) > 0 {
		ids := make([]string, len(idx))
		for i, g := range idx {
			ids[i] = strconv.Itoa(g)
		}
		env[procenv.CUDAVisibleDevices] = strings.Join(ids, ",")
	}
	env[procenv.CUDADeviceOrder] = "PCI_BUS_ID"
	inherit := p.Inherit
	if inherit == nil {
		inherit = procenv.DefaultAllow
	}
	r := lifecycle.Shell{}
	res, err := lifecycle.Launch(ctx, r, lifecycle.Agent{
		Dir: dir, Binary: bin, Args: l.Args, Inherit: inherit, Env: env, Config: l.Config,
	})
	if err != nil {
		return provision.Handle{}, fmt.Errorf("node %q: %w", node.Name, err)
	}
	h := provision.Handle{Node: node.Name, Kind: Kind, PID: res.PID, Dir: res.Dir, Started: res.Started}
	if res.Started {
		if err := lifecycle.CheckStaysUp(ctx, r, dir, p.StartCheck); err != nil {
			return provision.Handle{}, fmt.Errorf("node %q: %w", node.Name, err)
		}
	}
	return h, nil
}

// Stop stops node's agent (SIGTERM, SIGKILL after Grace).
func (p *Provisioner) Stop(ctx context.Context, node spec.Node, _ provision.Handle) error {
	dir, err := p.dir(node)
	if err != nil {
		return err
	}
	if err := lifecycle.Stop(ctx, lifecycle.Shell{}, dir, p.Grace); err != nil {
		return fmt.Errorf("node %q: %w", node.Name, err)
	}
	return nil
}

// Alive reports whether node's agent runs. The state directory, not the
// handle, is the truth, so a handle from before a restart still works.
func (p *Provisioner) Alive(ctx context.Context, node spec.Node, _ provision.Handle) (bool, error) {
	dir, err := p.dir(node)
	if err != nil {
		return false, err
	}
	st, err := lifecycle.Status(ctx, lifecycle.Shell{}, dir, "")
	if err != nil {
		return false, fmt.Errorf("node %q: %w", node.Name, err)
	}
	return st.Alive, nil
}
