package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/workflows/selfplay"
)

// daemon is one kind of a cluster's self-play daemons (the scheduler, the
// idle-resource daemon, the queue populator): one per cluster, started with
// POST path, read with GET path/{cluster}, stopped with POST
// path/{cluster}/stop. V is its view.
type daemon[V any] struct {
	path, opID, what string // "/v1/selfplay-idle", "selfplay-idle", "idle-resource daemon"
	start, get, stop string // the operations' summaries
	id               func(cluster string) string
	view             func(ctx context.Context, cluster string) (V, error)
}

type daemonOutput[V any] struct{ Body V }

// registerDaemon registers a daemon's three routes. start validates the
// body and starts the daemon's workflow, returning its cluster; a daemon
// already running there is a 409.
func registerDaemon[B, V any](s *Server, d daemon[V], start func(ctx context.Context, body B) (string, error)) {
	o := op(http.MethodPost, d.path, "start-"+d.opID, d.start, auth.Operator, "selfplay")
	o.DefaultStatus = http.StatusCreated
	huma.Register(s.API, o, func(ctx context.Context, in *struct{ Body B }) (*daemonOutput[V], error) {
		cluster, err := start(ctx, in.Body)
		var se huma.StatusError
		switch {
		case temporal.IsWorkflowExecutionAlreadyStartedError(err):
			return nil, huma.Error409Conflict("the " + d.what + " of cluster " + cluster + " is already running; stop it first")
		case errors.As(err, &se):
			return nil, err
		case err != nil:
			return nil, temporalErr("start "+d.what, err)
		}
		return d.output(ctx, cluster)
	})
	huma.Register(s.API, op(http.MethodGet, d.path+"/{cluster}", "get-"+d.opID, d.get, auth.Viewer, "selfplay"),
		func(ctx context.Context, in *scheduleClusterInput) (*daemonOutput[V], error) {
			return d.output(ctx, in.Cluster)
		})
	o = op(http.MethodPost, d.path+"/{cluster}/stop", "stop-"+d.opID, d.stop, auth.Operator, "selfplay")
	o.DefaultStatus = http.StatusAccepted
	huma.Register(s.API, o, func(ctx context.Context, in *scheduleClusterInput) (*daemonOutput[V], error) {
		if err := s.d.Temporal.SignalWorkflow(ctx, d.id(in.Cluster), "", selfplay.SignalStop, nil); err != nil {
			return nil, temporalErr(d.what+" of "+in.Cluster, err)
		}
		return d.output(ctx, in.Cluster)
	})
}

func (d daemon[V]) output(ctx context.Context, cluster string) (*daemonOutput[V], error) {
	v, err := d.view(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return &daemonOutput[V]{Body: v}, nil
}
