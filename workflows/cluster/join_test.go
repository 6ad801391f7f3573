package cluster

import (
	"strings"
	"testing"
	"time"

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
		{"another cluster's token", []Heartbeat{signed(other, "n1", 5)}, false, "not signed with this cluster's join token"},
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
