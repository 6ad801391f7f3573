package selfplay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/pluginrun"
)

// PopulatorLook asks for the loops of configs on a cluster.
type PopulatorLook struct {
	Cluster string   `json:"cluster"`
	Configs []string `json:"configs"`
}

// LoopView is a loop as the populator sees it.
type LoopView struct {
	Config  string `json:"config"`
	LoopID  string `json:"loop_id,omitempty"`
	Exists  bool   `json:"exists"`
	Running bool   `json:"running"`
	Status  string `json:"status,omitempty"`
	Queued  bool   `json:"queued,omitempty" doc:"Driven by a populator."`
	Phase   string `json:"phase,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Queue is the work not finished, the running item first.
	Queue     []string       `json:"queue"`
	Running1  string         `json:"running_kind,omitempty" doc:"The kind of work running."`
	WorkDone  map[string]int `json:"work_done,omitempty"`
	Fresh     int            `json:"fresh,omitempty"`
	Candidate bool           `json:"candidate,omitempty"`
	Best      string         `json:"best,omitempty"`
	BestElo   float64        `json:"best_elo,omitempty"`
	Velocity  float64        `json:"velocity" doc:"Elo/day of the best over the last 7 days."`
	// TooEarly: the best's history spans less than elo.MinVelocitySpan, so
	// Velocity is 0 and the velocity alert takes no sample.
	TooEarly   bool         `json:"velocity_too_early,omitempty"`
	LastWork   *time.Time   `json:"last_work,omitempty"`
	TotalGames int          `json:"total_games"`
	Recent     []WorkRecord `json:"recent,omitempty" doc:"The latest work items run."`
}

// GPUUse is one GPU's utilisation as its agent reports it.
type GPUUse struct {
	Node  string `json:"node"`
	Index int    `json:"index"`
	Util  int    `json:"util"`
}

// PopulatorView is what one look saw.
type PopulatorView struct {
	Loops []LoopView `json:"loops"`
	GPUs  []GPUUse   `json:"gpus,omitempty"`
}

// SelfplayPopulatorLook reads each config's loop (describe and state
// query) and the cluster's GPU utilisation.
func (a *Activities) SelfplayPopulatorLook(ctx context.Context, in PopulatorLook) (PopulatorView, error) {
	view := PopulatorView{Loops: []LoopView{}}
	for _, c := range in.Configs {
		lv, err := LookLoop(ctx, a.Client, in.Cluster, c)
		if err != nil {
			return view, err
		}
		view.Loops = append(view.Loops, lv)
	}
	cs, err := cluster.QueryStatusOf(ctx, a.Client, in.Cluster)
	if err != nil {
		return view, fmt.Errorf("cluster %s status: %w", in.Cluster, err)
	}
	for _, n := range cs.Nodes {
		for i, g := range n.Resources.GPUs {
			if i < len(n.GPUUtil) {
				view.GPUs = append(view.GPUs, GPUUse{Node: n.Name, Index: g.Index, Util: n.GPUUtil[i]})
			}
		}
	}
	return view, nil
}

// LookLoop digests the loop of config on a cluster (Exists false when
// there never was one).
func LookLoop(ctx context.Context, c client.Client, clusterName, config string) (LoopView, error) {
	lv := LoopView{Config: config, Queue: []string{}}
	id := WorkflowID(clusterName, config)
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return lv, nil
		}
		return lv, fmt.Errorf("describe loop %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	lv.Exists = true
	lv.Running = info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	lv.Status = strings.ToLower(info.GetStatus().String())
	var st State
	if lv.Running {
		v, err := c.QueryWorkflow(ctx, id, info.GetExecution().GetRunId(), QueryState)
		if err != nil {
			return lv, fmt.Errorf("query loop %s: %w", id, err)
		}
		if err := v.Get(&st); err != nil {
			return lv, fmt.Errorf("query loop %s: %w", id, err)
		}
	} else if err := c.GetWorkflow(ctx, id, "").Get(ctx, &st); err != nil {
		lv.Reason = err.Error()
	}
	if p, ok := info.GetMemo().GetFields()["loop_id"]; ok {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &lv.LoopID)
	}
	lv.Queued, lv.Phase, lv.WorkDone, lv.Fresh = st.Queued, st.Phase, st.WorkDone, st.Fresh
	if lv.Reason == "" {
		lv.Reason = st.Reason
	}
	lv.Candidate, lv.Best, lv.LastWork, lv.TotalGames = st.Candidate != "", st.Best, st.LastWork, st.TotalGames
	if st.Current != nil {
		lv.Queue = append(lv.Queue, st.Current.Kind)
		lv.Running1 = st.Current.Kind
	}
	for _, w := range st.Queue {
		lv.Queue = append(lv.Queue, w.Kind)
	}
	if st.Elo != nil && st.Best != "" {
		lv.BestElo = st.Elo.Get(config, st.Best).Elo
		v, ok := st.Elo.Velocity(config, time.Now(), 7*24*time.Hour)
		lv.Velocity, lv.TooEarly = v, !ok
	}
	if n := len(st.Work); n > 0 {
		lv.Recent = st.Work[max(0, n-10):]
	}
	return lv, nil
}

// SelfplayStartLoop starts a populator-driven loop as its own workflow
// (not a child: it outlives the populator's runs, and one populator run
// continuing as new must not touch it), with the memo and plugin search
// attribute the API's loops have.
func (a *Activities) SelfplayStartLoop(ctx context.Context, in Input) error {
	_, err := a.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: WorkflowID(in.Cluster, in.Config), TaskQueue: activity.GetInfo(ctx).TaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		TypedSearchAttributes:                    temporal.NewSearchAttributes(pluginrun.SearchAttribute.ValueSet([]string{in.GamePlugin})),
		Memo:                                     map[string]any{"cluster": in.Cluster, "config": in.Config, "populator": PopulatorID(in.Cluster), "loop_id": in.LoopID},
	}, Name, in)
	if temporal.IsWorkflowExecutionAlreadyStartedError(err) {
		return temporal.NewNonRetryableApplicationError("a self-play loop for "+in.Config+" already runs on "+in.Cluster, ErrFailed, err)
	}
	if err != nil {
		return fmt.Errorf("start loop %s: %w", in.LoopID, err)
	}
	return nil
}
