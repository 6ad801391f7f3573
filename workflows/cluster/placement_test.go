package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/resources"
	"github.com/trainyard/trainyard/internal/workspec"
	"github.com/trainyard/trainyard/policies"
)

// allocateWork allocates one piece of work on st and returns its node,
// through the scheduling cycle or not.
func allocateWork(ctx workflow.Context, st State, ws workspec.Spec, cycle bool) (string, error) {
	c := newController(ctx, &st)
	if c.cycle.on = cycle; cycle {
		c.startCycle(ctx)
	}
	a, err := c.allocateUpdate(ctx, AllocateRequest{JobID: ws.Name, Work: &ws})
	return a.Node, err
}

// TestPlacementRulesDecideLive: the placement the scheduler proposes goes
// through the bundle's placement_deny before it is committed. With the
// shipped bundle the work is placed; a rule added in Rego that refuses
// that node moves it to the other one; refusing every node makes it wait,
// the rule's reason in the error the job reports. The bundle is the real
// one, evaluated by the real engine.
func TestPlacementRulesDecideLive(t *testing.T) {
	shipped, err := policy.LoadFS(policies.FS)
	if err != nil {
		t.Fatal(err)
	}
	engine := func(rule string) *policy.Engine {
		mods := map[string]string{}
		for p, src := range shipped.Modules {
			mods[p] = src
		}
		if rule != "" {
			mods["extra.rego"] = "package trainyard.admission\n\nimport rego.v1\n\n" + rule
		}
		e, err := policy.New(context.Background(), policy.Bundle{Modules: mods, Data: shipped.Data})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, cycle := range []bool{false, true} {
		t.Run(map[bool]string{false: "one update at a time", true: "scheduling cycle"}[cycle], func(t *testing.T) { placementRulesDecide(t, engine, cycle) })
	}
}

func placementRulesDecide(t *testing.T, engine func(string) *policy.Engine, cycle bool) {
	place := func(e *policy.Engine) (string, error) {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.RegisterWorkflow(allocateWork)
		env.RegisterActivity(&Activities{Decide: e.Decide})
		capacity := resources.Capacity{CPUs: 8, MemoryMB: 16000}
		node := func() *nodeState {
			return &nodeState{Health: Idle, Reported: capacity, LastBeat: env.Now(), AgentID: "a1"}
		}
		st := State{Name: "lab", Desired: "up", Settings: Settings{JoinSecret: "s"}.withDefaults(), Order: []string{"n1", "n2"},
			Nodes: map[string]*nodeState{"n1": node(), "n2": node()}}
		env.SetStartTime(time.Unix(1_800_000_000, 0))
		env.ExecuteWorkflow(allocateWork, st, jobSpec("run", 2, 0, 1000), cycle)
		var got string
		if err := env.GetWorkflowError(); err != nil {
			return "", err
		}
		return got, env.GetWorkflowResult(&got)
	}

	first, err := place(engine(""))
	if err != nil || first == "" {
		t.Fatalf("shipped bundle: placed on %q, %v", first, err)
	}
	other := map[string]string{"n1": "n2", "n2": "n1"}[first]
	second, err := place(engine(`placement_deny contains {"rule": "kept", "reason": sprintf("node %s is kept for inference", [p.node])} if {
	some p in input.placement
	p.node == "` + first + `"
}`))
	if err != nil || second != other {
		t.Fatalf("with %s refused in Rego: placed on %q, %v; want %s", first, second, err, other)
	}
	_, err = place(engine(`placement_deny contains {"rule": "closed", "reason": "the lab is closed"} if count(input.placement) > 0`))
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrNoCapacity || !strings.Contains(app.Message(), "policy: closed: the lab is closed") {
		t.Fatalf("every placement refused in Rego: got %v, want a wait naming the rule", err)
	}
}
