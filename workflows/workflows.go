// Package workflows registers every control-plane workflow and activity on
// a Temporal worker. Each workflow lives in its own sub-package.
package workflows

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/agent/drain"
	"github.com/trainyard/trainyard/internal/agent/procenv"
	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/internal/policy"
	"github.com/trainyard/trainyard/internal/policy/params"
	"github.com/trainyard/trainyard/internal/provision"
	"github.com/trainyard/trainyard/internal/temporalx"
	"github.com/trainyard/trainyard/internal/training"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/healthcheck"
	"github.com/trainyard/trainyard/workflows/job"
	"github.com/trainyard/trainyard/workflows/pluginrun"
	"github.com/trainyard/trainyard/workflows/selfplay"
	"github.com/trainyard/trainyard/workflows/sweep"
	"github.com/trainyard/trainyard/workflows/train"
)

// ControlTaskQueue is where the control-plane worker polls.
const ControlTaskQueue = temporalx.ControlTaskQueue

// Deps are the side-effecting services activities use.
type Deps struct {
	Store    *objstore.Store
	Plugins  *pluginhost.Runtime
	Client   client.Client
	Identity string
	// Provisioners start and stop node agents; Launch builds their command.
	Provisioners provision.Set
	Launch       func(cluster string, node spec.Node, secret string, heartbeat time.Duration) provision.AgentLaunch
	// Params are the placement params of the policy bundle in force; nil
	// places with the shipped defaults.
	Params func() params.Params
	// Decide is the admission policy in force: the cluster workflow decides
	// each work description on its own ledger as it places it (its Admit
	// activity). Nil admits everything.
	Decide func(context.Context, policy.Input) (policy.Decision, error)
}

// Register adds all control-plane workflows and activities to w.
func Register(w worker.Registry, d Deps) {
	w.RegisterWorkflowWithOptions(healthcheck.Workflow, workflow.RegisterOptions{Name: healthcheck.Name})
	w.RegisterActivity(&healthcheck.Activities{Store: d.Store, Identity: d.Identity})
	w.RegisterWorkflowWithOptions(pluginrun.Workflow, workflow.RegisterOptions{Name: pluginrun.Name})
	w.RegisterActivity(&pluginrun.Activities{Runtime: d.Plugins, Store: pluginstore.New(d.Store)})
	w.RegisterWorkflowWithOptions(cluster.Workflow, workflow.RegisterOptions{Name: cluster.Name})
	w.RegisterWorkflowWithOptions(cluster.LeaseGroup, workflow.RegisterOptions{Name: cluster.LeaseGroupName})
	w.RegisterActivity(&cluster.Activities{Temporal: d.Client, Provisioners: d.Provisioners, Tokens: d.Store, Launch: d.Launch, Decide: d.Decide})
	w.RegisterWorkflowWithOptions(job.Workflow, workflow.RegisterOptions{Name: job.Name})
	w.RegisterActivity(&job.Activities{Client: d.Client, Params: d.Params})
	w.RegisterWorkflowWithOptions(train.Workflow, workflow.RegisterOptions{Name: train.Name})
	w.RegisterWorkflowWithOptions(selfplay.Workflow, workflow.RegisterOptions{Name: selfplay.Name})
	w.RegisterWorkflowWithOptions(selfplay.Scheduler, workflow.RegisterOptions{Name: selfplay.SchedulerName})
	w.RegisterWorkflowWithOptions(selfplay.Idle, workflow.RegisterOptions{Name: selfplay.IdleName})
	w.RegisterWorkflowWithOptions(selfplay.Populator, workflow.RegisterOptions{Name: selfplay.PopulatorName})
	w.RegisterActivity(&selfplay.Activities{Store: d.Store, Client: d.Client})
	w.RegisterWorkflowWithOptions(sweep.Workflow, workflow.RegisterOptions{Name: sweep.Name})
}

// AgentDeps are what a node agent's activities use.
type AgentDeps struct {
	// Dir is where job processes start; JobUser, when set, the account
	// they run as.
	Dir     string
	JobUser *procenv.User
	// Runner trains runs placed on the node; nil when the agent has no S3
	// (or is hollow). Logs is the bucket job processes' output streams to
	// (logs/); nil keeps only its tail.
	Runner *training.Runner
	Logs   *objstore.Store
	// Drain is the agent's drain switch, thrown by its cluster's drain-node.
	Drain *drain.Signal
	// AgentID is the agent process's (its heartbeats'); Lease is where it
	// notes that it holds its node's lease (workflows/cluster/lease.go).
	AgentID string
	Lease   *cluster.LeaseHolder
	// Hollow: a simulated node's jobs sleep instead of forking
	// (internal/agent/hollow).
	Hollow bool
}

// RegisterAgent adds what a node agent executes to its worker (polling the
// node's own task queue, cluster.NodeQueue).
func RegisterAgent(w worker.Registry, d AgentDeps) {
	w.RegisterActivity(&job.AgentActivities{Dir: d.Dir, User: d.JobUser, Logs: d.Logs, Hollow: d.Hollow})
	w.RegisterActivity(&cluster.AgentActivities{Drain: d.Drain, AgentID: d.AgentID, Lease: d.Lease})
	if d.Runner != nil {
		w.RegisterActivity(&train.AgentActivities{Runner: d.Runner, Dir: d.Dir})
	}
}

// RegisterSelfplayAgent adds the self-play activities (batches, training,
// gauntlets) to a node agent's worker.
func RegisterSelfplayAgent(w worker.Registry, a *selfplay.AgentActivities) {
	w.RegisterActivity(a)
}
