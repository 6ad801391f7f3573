package cluster

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/joinkey"
)

func (c *controller) heartbeat(now time.Time, hb Heartbeat) {
	if c.cycle != nil {
		c.cycle.wake = true // a beat is a change: a node joined, came back or changed
	}
	n, ok := c.st.Nodes[hb.Node]
	keyID, why := c.refuse(n, hb)
	if !ok || why != "" {
		if !ok {
			why = "unknown node"
		}
		c.refused(now, hb, why)
		return
	}
	c.st.Refused = slices.DeleteFunc(c.st.Refused, func(r Refusal) bool { return r.AgentID == hb.AgentID })
	n.LastSeq, n.KeyID = hb.Seq, keyID
	if n.Health == Stopped && c.st.Desired == "down" {
		return // a late beat from an agent being stopped
	}
	if n.Health == Dead {
		c.event(now, "node %s is back", hb.Node)
	}
	if !n.RegisterBy.IsZero() {
		n.RegisterBy = time.Time{}
		c.event(now, "node %s registered (agent pid %d)", hb.Node, hb.PID)
	}
	switch {
	case hb.Draining != "" && !n.Draining && hb.Draining == n.Undrained && hb.AgentID == n.AgentID:
		// Sent before the agent heard the operator's undrain.
	case hb.Draining != "" && !n.Draining:
		c.event(now, "node %s drains: %s", hb.Node, hb.Draining)
		n.Draining, n.DrainReason = true, hb.Draining
	case hb.Draining == "" && n.DrainReason != "" && hb.AgentID != n.AgentID:
		// A new agent process (the node came back after its drain).
		c.event(now, "node %s takes work again: a new agent", hb.Node)
		n.Draining, n.DrainReason = false, ""
	}
	if hb.Draining == "" || hb.AgentID != n.AgentID {
		n.Undrained = ""
	}
	if hb.AgentID != n.AgentID {
		n.NoLease = false // a new agent process: it may hold one
	}
	n.LastBeat, n.AgentID, n.AgentPID, n.Reported, n.GPUUtil = now, hb.AgentID, hb.PID, hb.Resources, hb.GPUUtil
	// The advertised address goes into peers' environments (MASTER_ADDR)
	// and URLs (the LLM loop's pool): only an IP address is taken, never a
	// string that could carry a port, path or shell word.
	n.Address = ""
	if a, err := netip.ParseAddr(hb.Address); err == nil && a.Zone() == "" {
		n.Address = a.String()
	}
	if n.Health != Stopped {
		n.Health, n.Error = idleOrHealthy(n), ""
	}
	c.touchLease(hb.Node)
}

// refused records a refused heartbeat: one event for an agent's first (its
// later ones every few seconds would push everything else out), and the
// agent's Refusal, which status shows and the agent queries.
func (c *controller) refused(now time.Time, hb Heartbeat, why string) {
	i := slices.IndexFunc(c.st.Refused, func(r Refusal) bool { return r.AgentID == hb.AgentID && r.Node == hb.Node })
	if i < 0 {
		c.event(now, "refused heartbeats from node %q (agent %s, pid %d): %s", hb.Node, hb.AgentID, hb.PID, why)
		if len(c.st.Refused) >= maxRefused {
			c.st.Refused = slices.Delete(c.st.Refused, 0, 1)
		}
		c.st.Refused = append(c.st.Refused, Refusal{Node: hb.Node, AgentID: hb.AgentID, PID: hb.PID, First: now})
		i = len(c.st.Refused) - 1
	}
	r := &c.st.Refused[i]
	r.Reason, r.Last = why, now
	r.Count++
}

// refusal answers QueryRefusal.
func (c *controller) refusal(agentID string) (*Refusal, error) {
	for _, r := range c.st.Refused {
		if r.AgentID == agentID {
			return &r, nil
		}
	}
	return nil, nil
}

// refuse says why hb is not from an agent holding a join token of the
// cluster ("" when it is, with the ID of the added token it signed with,
// "" for the cluster's own): a bad signature, or a sequence number already
// seen (a replay of a heartbeat read from the history).
func (c *controller) refuse(n *nodeState, hb Heartbeat) (keyID, why string) {
	s := c.st.Settings
	if s.JoinKey == "" {
		if hb.Secret != s.JoinSecret {
			return "", "wrong join secret"
		}
		return "", ""
	}
	signed := joinkey.Verify(s.JoinKey, hb.Node, hb.AgentID, hb.Seq, hb.Sig)
	for _, k := range c.st.JoinKeys {
		if signed {
			break
		}
		if signed = joinkey.Verify(k.Public, hb.Node, hb.AgentID, hb.Seq, hb.Sig); signed {
			keyID = k.ID
		}
	}
	switch {
	case !signed:
		return "", "not signed with a join token of this cluster (a revoked one, another cluster's, or none)"
	case n != nil && hb.Seq <= n.LastSeq:
		return "", "replayed or out-of-order heartbeat (sequence not above the last one)"
	}
	return keyID, ""
}

// joinKeys answers UpdateJoinKeys: it adds or revokes one token and
// returns the tokens the cluster accepts besides its own. A revoked
// token's agents are refused from their next heartbeat on.
func (c *controller) joinKeys(ctx workflow.Context, req JoinKeysRequest) ([]JoinKey, error) {
	return c.changeJoinKeys(workflow.Now(ctx), req), nil
}

func (c *controller) changeJoinKeys(now time.Time, req JoinKeysRequest) []JoinKey {
	if req.Add != "" {
		k := JoinKey{ID: JoinKeyID(req.Add), Public: req.Add, Name: req.Name, Added: now}
		c.st.JoinKeys = append(c.st.JoinKeys, k)
		c.event(now, "join token %s added%s", k.ID, nameSuffix(k.Name))
	}
	if req.Revoke != "" {
		i := slices.IndexFunc(c.st.JoinKeys, func(k JoinKey) bool { return k.ID == req.Revoke })
		k := c.st.JoinKeys[i]
		c.st.JoinKeys = slices.Delete(c.st.JoinKeys, i, i+1)
		var nodes []string
		for _, name := range c.st.Order {
			if n := c.st.Nodes[name]; n.KeyID == k.ID {
				nodes = append(nodes, name)
				// Its lease goes: its beats, refused from now on,
				// decide its health (Dead once its last accepted beat
				// is heartbeat_timeout old).
				n.NoLease = true
				c.touchLease(name)
			}
		}
		c.event(now, "join token %s%s revoked; its agents are refused from now on (nodes %v)", k.ID, nameSuffix(k.Name), nodes)
	}
	return slices.Clone(c.st.JoinKeys)
}

// validJoinKeys is UpdateJoinKeys' validator: one change, a well-formed
// public key not there yet, or a revocation of a token there.
func (c *controller) validJoinKeys(req JoinKeysRequest) error {
	switch {
	case (req.Add == "") == (req.Revoke == ""):
		return errors.New("join keys: add or revoke one token")
	case req.Add != "":
		if !joinkey.ValidPublic(req.Add) {
			return errors.New("join keys: add: not an Ed25519 public key in hex")
		}
		if req.Add == c.st.Settings.JoinKey || slices.ContainsFunc(c.st.JoinKeys, func(k JoinKey) bool { return k.ID == JoinKeyID(req.Add) }) {
			return errors.New("join keys: add: the cluster has that token already")
		}
		if len(c.st.JoinKeys) >= MaxJoinKeys {
			return fmt.Errorf("join keys: the cluster accepts %d tokens besides its own already: revoke one first", MaxJoinKeys)
		}
		if len(req.Name) > 64 {
			return errors.New("join keys: name longer than 64 characters")
		}
	case req.Revoke == JoinKeyID(c.st.Settings.JoinKey):
		return errors.New("join keys: revoke: that is the cluster's own token, which its local and SSH agents use: bring the cluster down and up for a new one")
	case !slices.ContainsFunc(c.st.JoinKeys, func(k JoinKey) bool { return k.ID == req.Revoke }):
		return fmt.Errorf("join keys: revoke: the cluster has no token %q", req.Revoke)
	}
	return nil
}

func nameSuffix(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}
