package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/pluginhost"
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

// settingsErr is a 422 naming the bad field of self-play settings, or nil
// when they are valid.
func settingsErr(set selfplay.Settings) error {
	err := set.Validate()
	var fe *selfplay.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return huma.Error422UnprocessableEntity("invalid self-play settings", &huma.ErrorDetail{Location: "body.settings." + fe.Field, Message: fe.Reason})
	}
	return huma.Error422UnprocessableEntity("invalid self-play settings", err)
}

// gameConfigs checks a daemon's configs (distinct, non-empty, no '/' or
// spaces) and resolves each one's game plugin (default kinrow-<config>);
// ids are the plugins' sha256s. title heads a 422.
func (s *Server) gameConfigs(ctx context.Context, configs []ScheduleConfig, title string) ([]selfplay.ScheduledConfig, []string, error) {
	var out []selfplay.ScheduledConfig
	var ids []string
	seen := map[string]bool{}
	for i, c := range configs {
		loc := fmt.Sprintf("body.configs[%d]", i)
		if seen[c.Config] || c.Config == "" || strings.ContainsAny(c.Config, "/ ") {
			return nil, nil, huma.Error422UnprocessableEntity(title, &huma.ErrorDetail{Location: loc + ".config", Message: "configs must be distinct, non-empty and contain no '/' or spaces", Value: c.Config})
		}
		seen[c.Config] = true
		ref := c.Game
		if ref == "" {
			ref = "kinrow-" + c.Config
		}
		rec, err := s.runPlugin(ctx, loc+".game", ref, pluginhost.KindGame)
		if err != nil {
			return nil, nil, err
		}
		ids = append(ids, rec.ID)
		out = append(out, selfplay.ScheduledConfig{Config: c.Config, GamePlugin: rec.ID, Weight: c.Weight, Quota: c.Quota, TargetElo: c.TargetElo})
	}
	return out, ids, nil
}
