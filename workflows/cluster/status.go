package cluster

import (
	"errors"
	"slices"
	"sort"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/scheduler"
)

func usage(n *nodeState) Usage {
	var u Usage
	keys := make([]string, 0, len(n.Allocated))
	for k := range n.Allocated {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic order in workflow code
	held := map[int]float64{}
	shared := false
	for _, k := range keys {
		a := n.Allocated[k]
		u.CPUs += a.CPUs
		u.MemoryMB += a.MemoryMB
		for _, g := range a.shares() {
			if _, ok := held[g.Index]; !ok {
				u.GPUs = append(u.GPUs, g.Index)
			}
			held[g.Index] += g.Share
			shared = shared || g.Share < 1
		}
	}
	if shared { // a shared device is listed once; its parts say how full it is
		for _, g := range u.GPUs {
			u.GPUParts = append(u.GPUParts, scheduler.GPUShare{Index: g, Share: held[g]})
		}
	}
	return u
}

func (c *controller) status(now time.Time) Status {
	s := Status{Cluster: c.st.Name, Now: now, Ledger: slices.Clone(c.st.Ledger.Records), LedgerFolded: slices.Clone(c.st.Ledger.Folded), Queue: c.queue(now), Desired: c.st.Desired, Busy: len(c.st.Pending) > 0, Events: slices.Clone(c.st.Events), Endpoints: slices.Clone(c.st.Endpoints), Refused: slices.Clone(c.st.Refused)}
	s.Totals.ByHealth = map[Health]int{}
	if c.cycle != nil && c.cycle.on {
		cs := c.cycle.stats
		cs.Waiting, cs.Parked = len(c.cycle.asks), len(c.cycle.parked)
		s.Cycle = &cs
	}
	for _, k := range c.st.JoinKeys {
		ks := JoinKeyStatus{JoinKey: k}
		for _, name := range c.st.Order {
			if c.st.Nodes[name].KeyID == k.ID {
				ks.Nodes = append(ks.Nodes, name)
			}
		}
		s.JoinKeys = append(s.JoinKeys, ks)
	}
	for _, name := range c.st.Order {
		n := c.st.Nodes[name]
		u := usage(n)
		res := n.Reported
		if n.LastBeat.IsZero() {
			res = n.Spec.Resources
		}
		ns := NodeStatus{
			Name: name, Provider: n.Spec.Provider, Provisioner: n.Spec.Provisioner.Kind, Ephemeral: n.Spec.Ephemeral, Labels: n.Spec.Labels,
			Health: n.Health, Error: n.Error, Draining: n.Draining, DrainReason: n.DrainReason, Resources: res, Used: u, GPUUtil: n.GPUUtil, AgentPID: n.AgentPID,
			Address: n.address(),
		}
		if n.Health == Pending {
			s.Busy = true
		}
		if !n.LastBeat.IsZero() {
			t := n.LastBeat
			ns.LastHeartbeat = &t
			ns.GPUsDiffer = gpusDiffer(n.Spec.Resources.GPUs, n.Reported.GPUs)
		}
		for j := range n.Allocated {
			ns.Jobs = append(ns.Jobs, j)
		}
		sort.Strings(ns.Jobs)
		for _, j := range ns.Jobs {
			ns.Allocations = append(ns.Allocations, n.Allocated[j].allocation(j))
		}
		s.Nodes = append(s.Nodes, ns)
		s.Totals.Nodes++
		s.Totals.ByHealth[n.Health]++
		if n.Health == Healthy || n.Health == Idle {
			s.Totals.CPUs += res.CPUs
			s.Totals.MemoryMB += res.MemoryMB
			s.Totals.GPUs += len(res.GPUs)
			s.Totals.CPUsUsed += u.CPUs
			s.Totals.MemoryMBUsed += u.MemoryMB
			s.Totals.GPUsUsed += len(u.GPUs)
		}
	}
	return s
}

func rootCause(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

// address is where the node's peers reach it: what its agent advertises
// (it knows its own route; a spec's address may be a name only the control
// plane resolves), else the spec's.
func (n *nodeState) address() string {
	if n.Address != "" {
		return n.Address
	}
	return n.Spec.Address
}
