// Package provision starts, stops and checks node agents. One small
// interface, three kinds: local (processes on this machine), ssh (copied to
// and started on a host) and static (started by the operator; nothing to
// do). The cluster workflow calls these from activities; every call is
// idempotent, so a retried or resumed `up` never starts an agent twice.
package provision

import (
	"context"
	"fmt"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/provision/lifecycle"
)

// AgentLaunch is what to run on a node: the `trainyard agent` binary and
// its arguments and environment (control-plane address, node name, --gpus)
// and its secrets file. Secrets belong in Config: not in Args, which `ps`
// shows, nor in Env, which every process the agent starts can read from
// /proc/<agent>/environ.
type AgentLaunch struct {
	// Binary is the agent executable on this (control-plane) machine.
	Binary string `json:"binary"`
	// Args follow the program name.
	Args []string `json:"args,omitempty"`
	// Env is added to the agent's minimal environment.
	Env map[string]string `json:"env,omitempty"`
	// Config, when set, is written next to the agent (mode 0600) and its
	// path passed in $TRAINYARD_AGENT_CONFIG.
	Config []byte `json:"config,omitempty"`
}

// Variables every provisioned agent finds in its environment.
const (
	// EnvAgentDir is the agent's own state directory (absolute). It also
	// identifies the process: a pid whose environment lacks it is not ours.
	EnvAgentDir = lifecycle.EnvAgentDir
	// EnvAgentConfig is the path of AgentLaunch.Config when one was given.
	EnvAgentConfig = lifecycle.EnvAgentConfig
)

// Handle says where a started agent is; it is plain data, safe to return
// from an activity and to pass to Stop and Alive after a restart.
type Handle struct {
	Node string `json:"node"`
	Kind string `json:"kind"`
	PID  int    `json:"pid,omitempty"`
	Dir  string `json:"dir,omitempty"`
	// Started is false when Start found the agent already running.
	Started bool `json:"started"`
}

// Provisioner manages the agent of one kind of node. Start returns once the
// agent process runs (not once it registered: the caller waits for that).
// Stop of a stopped agent and Alive of a never-started one are not errors.
// Errors name the node and the cause.
type Provisioner interface {
	Start(ctx context.Context, node spec.Node, l AgentLaunch) (Handle, error)
	Stop(ctx context.Context, node spec.Node, h Handle) error
	Alive(ctx context.Context, node spec.Node, h Handle) (bool, error)
}

// Set routes each node to the provisioner of its kind (spec.KindLocal,
// spec.KindSSH, spec.KindStatic).
type Set map[string]Provisioner

func (s Set) pick(node spec.Node) (Provisioner, error) {
	p, ok := s[node.Provisioner.Kind]
	if !ok || p == nil {
		return nil, fmt.Errorf("node %q: no %q provisioner configured", node.Name, node.Provisioner.Kind)
	}
	return p, nil
}

// Start starts node's agent with the provisioner of its kind.
func (s Set) Start(ctx context.Context, node spec.Node, l AgentLaunch) (Handle, error) {
	p, err := s.pick(node)
	if err != nil {
		return Handle{}, err
	}
	return p.Start(ctx, node, l)
}

// Stop stops node's agent.
func (s Set) Stop(ctx context.Context, node spec.Node, h Handle) error {
	p, err := s.pick(node)
	if err != nil {
		return err
	}
	return p.Stop(ctx, node, h)
}

// Alive reports whether node's agent process runs.
func (s Set) Alive(ctx context.Context, node spec.Node, h Handle) (bool, error) {
	p, err := s.pick(node)
	if err != nil {
		return false, err
	}
	return p.Alive(ctx, node, h)
}
