package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/joinkey"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/provision"
)

// ErrBadNode marks start failures that retrying cannot fix.
const ErrBadNode = "BadNode"

// Activities start and stop agents through provisioners; they run on the
// control-plane worker.
type Activities struct {
	// Temporal looks up the workflows holding allocations (ClosedOwners).
	Temporal     client.Client
	Provisioners provision.Set
	// Tokens is the bucket where the API left each cluster's join token.
	Tokens *objstore.Store
	// Decide is the admission policy in force (the bundle's usage rules
	// decided on the cluster's own ledger); nil admits everything.
	Decide func(context.Context, policy.Input) (policy.Decision, error)
	// Launch builds the command that starts node's agent (the trainyard
	// binary, its flags, the join token in its 0600 config file).
	Launch func(cluster string, node spec.Node, token string, heartbeat time.Duration) provision.AgentLaunch
}

// StartAgentInput names the node.
type StartAgentInput struct {
	Cluster string    `json:"cluster"`
	Node    spec.Node `json:"node"`
	// JoinKey names the cluster's join token by its public half; the
	// activity loads the token itself so it never enters the history.
	JoinKey string `json:"join_key,omitempty"`
	// Secret is the legacy join secret (workflows started before join keys).
	Secret string `json:"secret,omitempty"`
	// Heartbeat is how often the agent must beat.
	Heartbeat time.Duration `json:"heartbeat"`
}

// StopAgentInput names the node and its handle.
type StopAgentInput struct {
	Node   spec.Node        `json:"node"`
	Handle provision.Handle `json:"handle"`
}

// StartAgent starts node's agent; it is idempotent, so a retried or
// replayed start never runs a second agent.
func (a *Activities) StartAgent(ctx context.Context, in StartAgentInput) (provision.Handle, error) {
	token := in.Secret
	if in.JoinKey != "" {
		t, err := joinkey.Load(ctx, a.Tokens, in.Cluster, in.JoinKey)
		if err != nil {
			return provision.Handle{}, fmt.Errorf("start agent: %w", err)
		}
		token = t.String()
	}
	h, err := a.Provisioners.Start(ctx, in.Node, a.Launch(in.Cluster, in.Node, token, in.Heartbeat))
	if err != nil {
		return h, fmt.Errorf("start agent: %w", err)
	}
	return h, nil
}

// Admit is what executions recorded before placement-through-bundle call
// (AdmitPlacement replaced it; kept for their replay). It decides a work on
// the input the cluster workflow built from its own state, from inside its
// allocate update; what it returns is
// why a usage rule (quota, one training per config) holds the work, or "".
// The other rules were decided at submission, and whether the work fits now
// is the scheduler's to say.
func (a *Activities) Admit(ctx context.Context, in policy.Input) (string, error) {
	if a.Decide == nil {
		return "", nil
	}
	d, err := a.Decide(ctx, in)
	if err != nil {
		return "", fmt.Errorf("admission of %s: %w", in.Work.ID, err)
	}
	return d.UsageViolations(), nil
}

// Verdict is the bundle's word on a work the cluster is about to place.
type Verdict struct {
	// Wait: a usage rule (quota, one training per config) holds the work.
	Wait string `json:"wait,omitempty"`
	// Deny: rules of the bundle's placement_deny refuse the placement the
	// scheduler proposed.
	Deny string `json:"deny,omitempty"`
}

// AdmitPlacement decides a work on the input the cluster workflow built
// from its own state, and the placement its scheduler proposes for it
// (in.Placement; none when it proposes none). The scheduler's filters pick
// candidates from the bundle's data; the bundle's placement rules have the
// last word on the one picked, so a rule changed in Rego changes what is
// placed. The work's other rules were decided at submission.
func (a *Activities) AdmitPlacement(ctx context.Context, in policy.Input) (Verdict, error) {
	if a.Decide == nil {
		return Verdict{}, nil
	}
	placed := in.Placement
	in.Placement = nil
	d, err := a.Decide(ctx, in)
	if err != nil {
		return Verdict{}, fmt.Errorf("admission of %s: %w", in.Work.ID, err)
	}
	v := Verdict{Wait: d.UsageViolations()}
	if v.Wait != "" || len(placed) == 0 {
		return v, nil
	}
	in.Placement = placed
	dp, err := a.Decide(ctx, in)
	if err != nil {
		return Verdict{}, fmt.Errorf("placement of %s: %w", in.Work.ID, err)
	}
	v.Deny = dp.Beyond(d)
	return v, nil
}

// Batch is one scheduling cycle's question to the bundle: the fleet and
// its usage once, and each work with the placement the cycle's scheduler
// proposes for it (none when it proposes none), in the cycle's order.
type Batch struct {
	Cluster policy.Cluster `json:"cluster"`
	Usage   policy.Usage   `json:"usage"`
	Items   []BatchItem    `json:"items"`
}

// BatchItem is one work of a Batch.
type BatchItem struct {
	Work      policy.Work     `json:"work"`
	Placement []policy.Placed `json:"placement,omitempty"`
}

// AdmitBatch decides a cycle's works one after another, as AdmitPlacement
// decides one, each on the snapshot with the placements admitted before it
// taken (policy.Input.Take): two trainings of one config, or two works that
// each fit a quota alone, cannot both pass in one batch. It is a local
// activity of the cluster workflow: the snapshot never enters a history.
func (a *Activities) AdmitBatch(ctx context.Context, b Batch) ([]Verdict, error) {
	out := make([]Verdict, len(b.Items))
	in := policy.Input{Cluster: b.Cluster, Usage: b.Usage}
	for i, it := range b.Items {
		in.Work, in.Placement = it.Work, it.Placement
		v, err := a.AdmitPlacement(ctx, in)
		if err != nil {
			return nil, err
		}
		out[i] = v
		if v.Wait == "" && v.Deny == "" {
			in.Take(it.Work, it.Placement)
		}
	}
	return out, nil
}

// StopAgent stops node's agent (a stopped one is fine).
func (a *Activities) StopAgent(ctx context.Context, in StopAgentInput) error {
	if err := a.Provisioners.Stop(ctx, in.Node, in.Handle); err != nil {
		return fmt.Errorf("stop agent: %w", err)
	}
	return nil
}

// ClosedOwners returns which of the workflows are no longer running
// (closed in any way, or unknown to Temporal): what they hold is released.
func (a *Activities) ClosedOwners(ctx context.Context, owners []string) ([]string, error) {
	var closed []string
	for _, id := range owners {
		d, err := a.Temporal.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			closed = append(closed, id)
		case err != nil:
			return nil, fmt.Errorf("describe %s: %w", id, err)
		case d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			closed = append(closed, id)
		}
	}
	return closed, nil
}
