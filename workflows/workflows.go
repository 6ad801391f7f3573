// Package workflows registers every control-plane workflow and activity on
// a Temporal worker. Each workflow lives in its own sub-package.
package workflows

import (
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/objstore"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/plugins"
	"github.com/trainyard/trainyard/workflows/healthcheck"
	"github.com/trainyard/trainyard/workflows/pluginrun"
)

// ControlTaskQueue is where the control-plane worker polls.
const ControlTaskQueue = "trainyard-control"

// Deps are the side-effecting services activities use.
type Deps struct {
	Store    *objstore.Store
	Plugins  *plugins.Runtime
	Identity string
}

// Register adds all control-plane workflows and activities to w.
func Register(w worker.Registry, d Deps) {
	w.RegisterWorkflowWithOptions(healthcheck.Workflow, workflow.RegisterOptions{Name: healthcheck.Name})
	w.RegisterActivity(&healthcheck.Activities{Store: d.Store, Identity: d.Identity})
	w.RegisterWorkflowWithOptions(pluginrun.Workflow, workflow.RegisterOptions{Name: pluginrun.Name})
	w.RegisterActivity(&pluginrun.Activities{Runtime: d.Plugins, Store: pluginstore.New(d.Store)})
}
