package cluster

import (
	"fmt"
	"sort"
	"time"
)

func idleOrHealthy(n *nodeState) Health {
	if len(n.Allocated) > 0 {
		return Healthy
	}
	return Idle
}

// checkHealth marks nodes Dead whose heartbeats stopped and takes their
// allocations back: the jobs holding them re-allocate elsewhere.
func (c *controller) checkHealth(now time.Time) {
	for _, name := range c.st.Order {
		n := c.st.Nodes[name]
		if n.Health != Healthy && n.Health != Idle || c.judgedByLease(n) {
			continue
		}
		if now.Sub(n.LastBeat) > c.st.Settings.HeartbeatTimeout {
			c.declareDead(now, name, fmt.Sprintf("no heartbeat for %v", now.Sub(n.LastBeat).Round(time.Second)))
		}
	}
}

// declareDead marks a node Dead and takes its allocations back: the jobs
// holding them re-allocate elsewhere.
func (c *controller) declareDead(now time.Time, name, why string) {
	n := c.st.Nodes[name]
	n.Health, n.Error = Dead, why
	var jobs []string
	for j := range n.Allocated {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	n.Allocated = nil
	c.st.Ledger.Close("", name, now)
	c.touchLease(name)
	c.event(now, "node %s is Dead (%s); handed back %d job(s): %v", name, n.Error, len(jobs), jobs)
}
