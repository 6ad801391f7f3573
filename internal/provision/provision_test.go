package provision_test

import (
	"context"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/provision"
	"github.com/trainyard/trainyard/internal/provision/static"
)

func TestSetRoutesByKind(t *testing.T) {
	set := provision.Set{static.Kind: static.New()}
	ctx := context.Background()
	tests := []struct {
		name string
		node spec.Node
		err  string
	}{
		{name: "static node: nothing to start, waits for registration", node: spec.Node{Name: "g5-0", Provisioner: spec.Provisioner{Kind: static.Kind}}},
		{name: "kind without provisioner", node: spec.Node{Name: "nickel", Provisioner: spec.Provisioner{Kind: "ssh"}}, err: `node "nickel": no "ssh" provisioner configured`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := set.Start(ctx, tt.node, provision.AgentLaunch{Binary: "/unused"})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Start error = %v, want %q", err, tt.err)
				}
				if _, err := set.Alive(ctx, tt.node, h); err == nil {
					t.Fatal("Alive routed a node without provisioner")
				}
				if err := set.Stop(ctx, tt.node, h); err == nil {
					t.Fatal("Stop routed a node without provisioner")
				}
				return
			}
			if err != nil || h.Node != tt.node.Name || h.Kind != static.Kind || h.Started || h.PID != 0 {
				t.Fatalf("Start = %+v, %v", h, err)
			}
			if alive, err := set.Alive(ctx, tt.node, h); err != nil || !alive {
				t.Fatalf("Alive = %v, %v", alive, err)
			}
			if err := set.Stop(ctx, tt.node, h); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A provisioner refuses nodes of another kind rather than acting on them.
func TestStaticRefusesOtherKinds(t *testing.T) {
	n := spec.Node{Name: "zinc", Provisioner: spec.Provisioner{Kind: "local"}}
	if _, err := static.New().Start(context.Background(), n, provision.AgentLaunch{}); err == nil || !strings.Contains(err.Error(), `node "zinc": provisioner is "local", not static`) {
		t.Fatalf("err = %v", err)
	}
}
