// Package static is the provisioner for agents the operator starts
// (systemd units on bare metal, a Kubernetes DaemonSet): there is nothing to
// start or stop, and the cluster workflow waits for the agent to register.
package static

import (
	"context"
	"fmt"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/provision"
)

// Kind is the provisioner kind's name in a spec.
const Kind = "static"

// Static nodes take no settings; their agents are started by the operator,
// so `cluster up` prints their join commands.
func init() {
	spec.Register(spec.Kind{Name: Kind, Check: func(n spec.Node, fail func(field, format string, a ...any)) {
		if len(n.Provisioner.Settings) > 0 {
			fail("provisioner.static", "the static provisioner takes no settings")
		}
	}, StartedByOperator: true})
}

// Provisioner is the static provisioner.
type Provisioner struct{}

// New returns the static provisioner.
func New() Provisioner { return Provisioner{} }

var _ provision.Provisioner = Provisioner{}

func check(node spec.Node) error {
	if node.Provisioner.Kind != Kind {
		return fmt.Errorf("node %q: provisioner is %q, not static", node.Name, node.Provisioner.Kind)
	}
	return nil
}

// Start returns at once: the operator runs the agent.
func (Provisioner) Start(_ context.Context, node spec.Node, _ provision.AgentLaunch) (provision.Handle, error) {
	if err := check(node); err != nil {
		return provision.Handle{}, err
	}
	return provision.Handle{Node: node.Name, Kind: Kind}, nil
}

// Stop does nothing: stopping an operator-run agent is the operator's call
// (`down` drains it; the agent keeps running, unregistered work-free).
func (Provisioner) Stop(_ context.Context, node spec.Node, _ provision.Handle) error {
	return check(node)
}

// Alive cannot see an operator-run process; liveness of static nodes comes
// from heartbeats. It reports true so callers do not restart what they
// cannot start.
func (Provisioner) Alive(_ context.Context, node spec.Node, _ provision.Handle) (bool, error) {
	return true, check(node)
}
