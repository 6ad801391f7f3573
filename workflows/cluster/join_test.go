package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/joinkey"
)

// TestHeartbeatNeedsTheJoinToken: the workflow keeps only the token's public
// half; a heartbeat counts when signed with the token and newer than the
// last one, so one copied out of the history (a replay) or signed with
// another cluster's token is refused, with the reason in the events.
func TestHeartbeatNeedsTheJoinToken(t *testing.T) {
	tok, _ := joinkey.New()
	other, _ := joinkey.New()
	now := time.Unix(1000, 0)
	signed := func(t joinkey.Token, node string, seq int64) Heartbeat {
		return Heartbeat{Node: node, AgentID: "a1", Seq: seq, Sig: t.Sign(node, "a1", seq)}
	}
	for _, tc := range []struct {
		name   string
		beats  []Heartbeat
		accept bool
		why    string
	}{
		{"signed", []Heartbeat{signed(tok, "n1", 5)}, true, ""},
		{"another cluster's token", []Heartbeat{signed(other, "n1", 5)}, false, "not signed with a join token of this cluster"},
		{"signed for another node", []Heartbeat{func() Heartbeat { h := signed(tok, "n2", 5); h.Node = "n1"; return h }()}, false, "not signed"},
		{"replayed", []Heartbeat{signed(tok, "n1", 5), signed(tok, "n1", 6), signed(tok, "n1", 5)}, false, "replayed"},
		{"legacy secret on a keyed cluster", []Heartbeat{{Node: "n1", AgentID: "a1", Secret: "s"}}, false, "not signed"},
		{"unknown node", []Heartbeat{signed(tok, "zz", 5)}, false, "unknown node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := State{Name: "lab", Settings: Settings{JoinKey: tok.Public()}.withDefaults(), Order: []string{"n1"},
				Nodes: map[string]*nodeState{"n1": {Health: Pending}}}
			c := &controller{st: &st}
			for i, hb := range tc.beats {
				st.Nodes["n1"].LastBeat = time.Time{}
				c.heartbeat(now.Add(time.Duration(i)*time.Second), hb)
			}
			got := !st.Nodes["n1"].LastBeat.IsZero()
			if got != tc.accept {
				t.Fatalf("last heartbeat accepted = %v, want %v; events %q", got, tc.accept, st.Events)
			}
			if !tc.accept && (len(st.Events) == 0 || !strings.Contains(st.Events[len(st.Events)-1], tc.why)) {
				t.Fatalf("events %q, want the reason %q", st.Events, tc.why)
			}
		})
	}
}

// TestAddedJoinTokens: a token `cluster join-token` added is accepted
// beside the cluster's own and recorded as the node's; revoked, its agents'
// next heartbeats are refused while the others go on; the validator
// refuses duplicates, garbage, unknown IDs and the cluster's own token.
func TestAddedJoinTokens(t *testing.T) {
	own, _ := joinkey.New()
	added, _ := joinkey.New()
	second, _ := joinkey.New()
	st := State{Name: "lab", Settings: Settings{JoinKey: own.Public()}.withDefaults(), Order: []string{"n1", "n2"},
		Nodes: map[string]*nodeState{"n1": {Health: Pending}, "n2": {Health: Pending}}}
	c := &controller{st: &st}
	now := time.Unix(1000, 0)
	var seq int64
	beat := func(tok joinkey.Token, node string) bool {
		seq++
		st.Nodes[node].LastBeat = time.Time{}
		c.heartbeat(now.Add(time.Duration(seq)*time.Second), Heartbeat{Node: node, AgentID: "a-" + node, Seq: seq, Sig: tok.Sign(node, "a-"+node, seq)})
		return !st.Nodes[node].LastBeat.IsZero()
	}
	if beat(added, "n1") {
		t.Fatal("a token not added yet was accepted")
	}
	for _, req := range []JoinKeysRequest{{Add: added.Public(), Name: "nickel"}, {Add: second.Public()}} {
		if err := c.validJoinKeys(req); err != nil {
			t.Fatal(err)
		}
		c.changeJoinKeys(now, req)
	}
	if !beat(added, "n1") || !beat(second, "n2") || !beat(own, "n2") {
		t.Fatalf("added tokens and the cluster's own: want all accepted; events %q", st.Events)
	}
	if st.Nodes["n1"].KeyID != JoinKeyID(added.Public()) || st.Nodes["n2"].KeyID != "" {
		t.Errorf("key ids: n1 %q, n2 %q", st.Nodes["n1"].KeyID, st.Nodes["n2"].KeyID)
	}
	for _, bad := range []struct {
		req  JoinKeysRequest
		want string
	}{
		{JoinKeysRequest{}, "add or revoke"},
		{JoinKeysRequest{Add: "zz"}, "not an Ed25519"},
		{JoinKeysRequest{Add: added.Public()}, "already"},
		{JoinKeysRequest{Add: own.Public()}, "already"},
		{JoinKeysRequest{Revoke: "nope"}, "no token"},
		{JoinKeysRequest{Revoke: JoinKeyID(own.Public())}, "the cluster's own token"},
	} {
		if err := c.validJoinKeys(bad.req); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want %q", bad.req, err, bad.want)
		}
	}
	if err := c.validJoinKeys(JoinKeysRequest{Revoke: JoinKeyID(added.Public())}); err != nil {
		t.Fatal(err)
	}
	c.changeJoinKeys(now, JoinKeysRequest{Revoke: JoinKeyID(added.Public())})
	if beat(added, "n1") {
		t.Error("a revoked token's agent was accepted")
	}
	if !beat(second, "n2") {
		t.Error("revoking one token refused another's agent")
	}
	if ev := strings.Join(st.Events, "\n"); !strings.Contains(ev, "(nickel) revoked") || !strings.Contains(ev, "[n1]") {
		t.Errorf("events lack the revocation and its node: %q", st.Events)
	}
}

// TestBeatsBeforeTheUndrainAreStale: after an operator's undrain, beats the
// same agent sent before it heard (they still carry the drain's reason) do
// not mark the node draining again; once it beats without a drain, a new
// drain (SIGTERM, a preemption notice) counts. Before, one such beat left
// the node draining for good and its work "infeasible: no nodes".
func TestBeatsBeforeTheUndrainAreStale(t *testing.T) {
	tok, _ := joinkey.New()
	const requested = "drain requested (deadline 1m0s)"
	for _, tc := range []struct {
		name      string
		undrained string
		beats     []string // each beat's Draining, from agent a1
		draining  bool
	}{
		{"stale beat after an undrain", requested, []string{requested}, false},
		{"undrain heard, then SIGTERM", requested, []string{requested, "", "SIGTERM"}, true},
		{"no undrain pending", "", []string{requested}, true},
		{"another reason", requested, []string{"preemption notice"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := State{Name: "lab", Settings: Settings{JoinKey: tok.Public()}.withDefaults(), Order: []string{"n1"},
				Nodes: map[string]*nodeState{"n1": {Health: Idle, AgentID: "a1", Undrained: tc.undrained}}}
			c := &controller{st: &st}
			for i, d := range tc.beats {
				seq := int64(10 + i)
				c.heartbeat(time.Unix(1000+seq, 0), Heartbeat{Node: "n1", AgentID: "a1", Seq: seq, Sig: tok.Sign("n1", "a1", seq), Draining: d})
			}
			if n := st.Nodes["n1"]; n.Draining != tc.draining {
				t.Fatalf("draining = %v (%q), want %v; events %q", n.Draining, n.DrainReason, tc.draining, st.Events)
			}
		})
	}
}

// TestAdvertisedAddressIsAnIP: a node's agent may advertise an IP address,
// which peers are then given; anything else (a URL, a host with a port or
// a shell word, which would land in MASTER_ADDR and the LLM loop's URL) is
// not taken, and the spec's address stands.
func TestAdvertisedAddressIsAnIP(t *testing.T) {
	tok, _ := joinkey.New()
	for _, tc := range []struct{ adv, want string }{
		{"198.18.0.7", "198.18.0.7"},
		{"fd00::2", "fd00::2"},
		{"", "10.0.0.9"},
		{"evil.example:80/x", "10.0.0.9"},
		{"1.2.3.4;rm -rf /", "10.0.0.9"},
		{"fe80::1%eth0", "10.0.0.9"},
	} {
		st := State{Name: "lab", Settings: Settings{JoinKey: tok.Public()}.withDefaults(), Order: []string{"n1"},
			Nodes: map[string]*nodeState{"n1": {Health: Pending, Spec: spec.Node{Name: "n1", Address: "10.0.0.9"}}}}
		c := &controller{st: &st}
		c.heartbeat(time.Unix(1000, 0), Heartbeat{Node: "n1", AgentID: "a1", Seq: 1, Sig: tok.Sign("n1", "a1", 1), Address: tc.adv})
		if got := st.Nodes["n1"].address(); got != tc.want {
			t.Errorf("advertised %q: peers get %q, want %q", tc.adv, got, tc.want)
		}
	}
}
