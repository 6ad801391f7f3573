package selfplay

import (
	"context"
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/selfplay/schedule"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/job"
)

// IdleName is the idle-resource daemon's workflow type: the seed's
// IdleResourceDaemon. It watches a cluster's GPUs and, when one has been
// idle (no job holds it, utilisation under 10% where measured) for
// Threshold, starts a self-play loop for the config its VRAM suits (the
// seed's board-to-GPU tiers: hex8/square8 8 GB, square19 16 GB, hexagonal
// 32 GB; the biggest board that fits) asking for one GPU.
const IdleName = "SelfplayIdle"

// IdleID is a cluster's idle daemon workflow id.
func IdleID(cluster string) string { return "selfplay-idle/" + cluster }

// IdleInput starts the daemon.
type IdleInput struct {
	Cluster string            `json:"cluster"`
	Configs []ScheduledConfig `json:"configs" doc:"Configs it may start (weight, quota and target are unused)."`
	// Settings are the started loops' settings (GPUs is set to 1).
	Settings  Settings      `json:"settings"`
	Threshold time.Duration `json:"threshold,omitempty" doc:"How long a GPU must be idle, in ns (default 10m)."`
	Poll      time.Duration `json:"poll,omitempty" doc:"How often the cluster is looked at, in ns (default 1m)."`
}

// IdleEvent is one decision of the daemon.
type IdleEvent struct {
	At     time.Time `json:"at"`
	GPU    string    `json:"gpu"`
	Config string    `json:"config,omitempty"`
	What   string    `json:"what"`
}

// IdleState is the daemon's state (the state query).
type IdleState struct {
	Phase   string               `json:"phase" enum:"watching,stopped"`
	GPUs    []schedule.GPUSlot   `json:"gpus" doc:"The cluster's GPUs at the last look."`
	Since   schedule.IdleSince   `json:"idle_since" doc:"Since when each idle GPU has been idle."`
	Running map[string]time.Time `json:"running" doc:"Loops it started that still run, by config."`
	Events  []IdleEvent          `json:"events" doc:"Recent decisions, oldest first."`
	Polls   int                  `json:"polls"`
}

// idlePollsPerRun bounds a daemon run's history before continue-as-new.
const idlePollsPerRun = 500

// Idle watches until stopped.
func Idle(ctx workflow.Context, in IdleInput) (IdleState, error) {
	if in.Threshold <= 0 {
		in.Threshold = 10 * time.Minute
	}
	if in.Poll <= 0 {
		in.Poll = time.Minute
	}
	st := &IdleState{Phase: "watching", Since: schedule.IdleSince{}, Running: map[string]time.Time{}, Events: []IdleEvent{}}
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (IdleState, error) { return *st, nil }); err != nil {
		return *st, err
	}
	stop := false
	stops := workflow.GetSignalChannel(ctx, SignalStop)
	event := func(e IdleEvent) {
		e.At = workflow.Now(ctx)
		st.Events = append(st.Events, e)
		if len(st.Events) > maxGenerations {
			st.Events = append([]IdleEvent(nil), st.Events[len(st.Events)-maxGenerations:]...)
		}
	}
	games := map[string]string{}
	var configs []string
	for _, c := range in.Configs {
		games[c.Config] = c.GamePlugin
		configs = append(configs, c.Config)
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	children := workflow.NewSelector(ctx)
	pending := 0
	for runPolls := 0; ; runPolls++ {
		for stops.ReceiveAsync(nil) {
			stop = true
		}
		if stop {
			st.Phase = "stopped"
			return *st, nil
		}
		if runPolls >= idlePollsPerRun && pending == 0 {
			return *st, workflow.NewContinueAsNewError(ctx, IdleName, in)
		}
		var slots []schedule.GPUSlot
		if err := workflow.ExecuteActivity(actx, (*Activities).SelfplayGPUs, in.Cluster).Get(ctx, &slots); err != nil {
			event(IdleEvent{What: "cluster status: " + job.Reason(err)})
		} else {
			now := workflow.Now(ctx)
			st.GPUs, st.Polls = slots, st.Polls+1
			st.Since.Update(slots, now)
			for _, g := range st.Since.Idle(slots, now, in.Threshold) {
				var free []string
				for _, c := range configs {
					if _, ok := st.Running[c]; !ok {
						free = append(free, c)
					}
				}
				cfg := schedule.MatchConfig(g.VRAMMB, free)
				if cfg == "" {
					continue // nothing left that fits: it stays idle, and says so once
				}
				set := in.Settings
				set.GPUs = 1
				cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
					WorkflowID:        WorkflowID(in.Cluster, cfg),
					TaskQueue:         workflow.GetInfo(ctx).TaskQueueName,
					ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON, // a stopped daemon leaves its loops running
				})
				loopID := WorkflowID(in.Cluster, cfg) + "/" + workflow.GetInfo(ctx).OriginalRunID[:8]
				fut := workflow.ExecuteChildWorkflow(cctx, Name, Input{LoopID: loopID, Cluster: in.Cluster, Config: cfg, GamePlugin: games[cfg], Settings: set})
				st.Running[cfg] = now
				delete(st.Since, g.Key()) // its clock restarts if the loop never takes it
				event(IdleEvent{GPU: g.Key(), Config: cfg, What: fmt.Sprintf("%s (%d MB) idle ≥ %v: started self-play %s", g.Model, g.VRAMMB, in.Threshold, cfg)})
				pending++
				c := cfg
				children.AddFuture(fut, func(f workflow.Future) {
					pending--
					delete(st.Running, c)
					var res State
					if err := f.Get(ctx, &res); err != nil {
						event(IdleEvent{Config: c, What: "loop ended: " + job.Reason(err)})
					} else {
						event(IdleEvent{Config: c, What: fmt.Sprintf("loop finished after %d generations, best %s", res.Generation, res.Best)})
					}
				})
			}
		}
		// Wait for the next poll, a loop ending, or stop.
		timer := workflow.NewTimer(ctx, in.Poll)
		sel := workflow.NewSelector(ctx)
		sel.AddFuture(timer, func(workflow.Future) {})
		sel.AddReceive(stops, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			stop = true
		})
		sel.Select(ctx)
		for children.HasPending() {
			children.Select(ctx)
		}
	}
}

// SelfplayGPUs lists a cluster's GPUs with whether each is busy: held by
// a job, or utilised ≥ 10% by something the cluster did not place.
func (a *Activities) SelfplayGPUs(ctx context.Context, clusterName string) ([]schedule.GPUSlot, error) {
	st, err := cluster.QueryStatusOf(ctx, a.Client, clusterName)
	if err != nil {
		return nil, fmt.Errorf("cluster %s status: %w", clusterName, err)
	}
	out := []schedule.GPUSlot{}
	for _, n := range st.Nodes {
		if (n.Health != cluster.Healthy && n.Health != cluster.Idle) || n.Draining {
			continue
		}
		for i, g := range n.Resources.GPUs {
			busy := slices.Contains(n.Used.GPUs, g.Index)
			if i < len(n.GPUUtil) && n.GPUUtil[i] >= cluster.GPUBusyPct {
				busy = true
			}
			out = append(out, schedule.GPUSlot{Node: n.Name, Index: g.Index, Model: g.Model, VRAMMB: g.VRAMMB, Busy: busy})
		}
	}
	return out, nil
}
