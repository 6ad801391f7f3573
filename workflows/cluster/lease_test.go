package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// TestLeaseEnds: only a lease whose heartbeats stopped (or that no agent
// took) makes its node Dead. An agent that ends its lease itself is alive:
// when the control plane's Temporal restarted, agents' heartbeats failed,
// the SDK cancelled their leases, they reported "context canceled", and
// every node was declared Dead and came back a beat later (a flap per
// node, seen live before this distinction). A lease of an earlier agent
// process changes nothing either.
func TestLeaseEnds(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		err     error
		agent   string
		times   int
		want    Health
		noLease bool
		looks   int // times the main loop is asked to look at the node's lease (renew it, or let it go)
	}{
		{"term ended", nil, "a1", 1, Idle, false, 1},
		{"heartbeats stopped", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil), "a1", 1, Dead, false, 1},
		{"no agent took it", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil), "a1", 1, Dead, false, 1},
		{"agent ended it (Temporal restarted)", temporal.NewApplicationError("context canceled", ""), "a1", 1, Idle, false, 1},
		{"agent ended it again and again", temporal.NewApplicationError("context canceled", ""), "a1", maxLeaseFailures, Idle, true, maxLeaseFailures - 1},
		{"an older agent", temporal.NewApplicationError("unable to find activityType=HoldLease. Supported types: [RunProcess]", ""), "a1", 1, Idle, true, 0},
		{"another agent process has it", temporal.NewNonRetryableApplicationError("lease for a0", ErrLeaseNotMine, nil), "a1", 1, Idle, false, 0},
		{"an earlier agent's lease lost", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil), "a0", 1, Idle, false, 0},
		{"let go", temporal.NewCanceledError(), "a1", 1, Idle, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &controller{st: &State{Settings: Settings{}.withDefaults(), Order: []string{"n1"},
				Nodes: map[string]*nodeState{"n1": {Health: Idle, AgentID: "a1", LastBeat: now.Add(-time.Hour)}}}}
			c.leases = &leases{on: true, running: map[string]lease{}, failed: map[string]int{}}
			looks := 0
			for range tc.times {
				outcome, why := classifyLease(tc.err)
				c.leaseEnded(now, LeaseEnd{Node: "n1", AgentID: tc.agent, Outcome: outcome, Why: why, Timeout: 15 * time.Second})
				looks += len(c.leases.want)
				c.leases.want = nil
				clear(c.leases.wanted)
			}
			n := c.st.Nodes["n1"]
			if n.Health != tc.want || n.NoLease != tc.noLease || looks != tc.looks {
				t.Fatalf("health %s, no lease %v, looks %d; want %s, %v, %d (events %q)", n.Health, n.NoLease, looks, tc.want, tc.noLease, tc.looks, c.st.Events)
			}
			if tc.noLease {
				// Judged by beats from now: not Dead at the next tick for a
				// last beat an hour old.
				c.checkHealth(now.Add(time.Second))
				if n.Health == Dead {
					t.Fatalf("Dead at once when its beats took over: %s", n.Error)
				}
			}
			if tc.want == Dead && !strings.Contains(n.Error, "lease lost") {
				t.Fatalf("error %q does not say the lease was lost", n.Error)
			}
		})
	}
	if _, err := classifyLease(errors.New("x")); err == "" {
		t.Fatal("an unknown error has no reason")
	}
}

// TestRevokedTokenEndsTheLease: a node whose agent joined with a token
// that is then revoked loses its lease, and its beats (refused) decide its
// health: Dead once the last accepted one is heartbeat_timeout old. With
// the lease kept, a revoked agent stayed Healthy for as long as it ran.
func TestRevokedTokenEndsTheLease(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := &controller{st: &State{Settings: Settings{}.withDefaults(), Order: []string{"n1", "n2"},
		JoinKeys: []JoinKey{{ID: "k1", Public: "p1"}},
		Nodes: map[string]*nodeState{
			"n1": {Health: Idle, AgentID: "a1", KeyID: "k1", LastBeat: now},
			"n2": {Health: Idle, AgentID: "a2", LastBeat: now},
		}}}
	c.leases = &leases{on: true, running: map[string]lease{}, failed: map[string]int{}}
	c.changeJoinKeys(now, JoinKeysRequest{Revoke: "k1"})
	if !c.st.Nodes["n1"].NoLease || c.st.Nodes["n2"].NoLease || len(c.leases.want) != 1 || c.leases.want[0] != "n1" {
		t.Fatalf("after the revocation: n1 no lease %v, n2 no lease %v, leases to look at %v; want n1's to go", c.st.Nodes["n1"].NoLease, c.st.Nodes["n2"].NoLease, c.leases.want)
	}
	c.checkHealth(now.Add(c.st.Settings.HeartbeatTimeout + time.Second))
	if h1, h2 := c.st.Nodes["n1"].Health, c.st.Nodes["n2"].Health; h1 != Dead || h2 != Idle {
		t.Fatalf("health after the timeout: n1 %s, n2 %s; want Dead, Idle (n2 holds its lease)", h1, h2)
	}
}
