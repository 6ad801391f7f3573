package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/scalars"
	"github.com/trainyard/trainyard/workflows/selfplay"
)

// Scalars is a run's or a loop's curves.
type Scalars struct {
	Prefix string                           `json:"prefix" doc:"S3 prefix holding the TensorBoard event files and metrics.csv (a TensorBoard logdir)."`
	Tags   map[string][]scalars.ScalarPoint `json:"tags" doc:"Tag → its values, steps ascending (runs: step = iteration; self-play: step = generation). Read from metrics.csv, full precision (the event files hold the same steps as 32-bit floats, TensorBoard's simple_value)."`
}

type scalarsOutput struct{ Body Scalars }

type curveFilesOutput struct {
	Body struct {
		Prefix string              `json:"prefix"`
		Files  []scalars.CurveFile `json:"files" doc:"Event files in step order, then metrics.csv."`
	}
}

type runCurveFileInput struct {
	ID   string `path:"id" maxLength:"255"`
	File string `path:"file" maxLength:"255" example:"events.out.tfevents.0000000001.trainyard"`
}

type selfplayCurveFileInput struct {
	Cluster string `path:"cluster"`
	Config  string `path:"config"`
	File    string `path:"file" maxLength:"255" example:"metrics.csv"`
}

// curves names one set of curves: what it belongs to (for errors) and
// where the curves are.
type curves struct {
	what string
	log  scalars.Log
}

func (s *Server) registerScalars() {
	run := func(ctx context.Context, id string) (curves, error) {
		c := curves{"run " + id, scalars.Log{Store: s.d.Store, Prefix: scalars.RunPrefix(id)}}
		if _, err := s.d.Temporal.DescribeWorkflowExecution(ctx, id, ""); err != nil {
			return c, temporalErr(c.what, err) // a run that never was is a 404
		}
		return c, nil
	}
	// A loop's curves are its current instance's (each start of a loop
	// has a loop id of its own).
	loop := func(ctx context.Context, cl, config string) (curves, error) {
		c := curves{what: "self-play loop " + cl + "/" + config}
		var in selfplay.Input
		if err := s.workflowInput(ctx, selfplay.WorkflowID(cl, config), &in); err != nil {
			return c, temporalErr(c.what, err)
		}
		c.log = scalars.Log{Store: s.d.Store, Prefix: scalars.LoopPrefix(in.LoopID)}
		return c, nil
	}
	registerCurves(s, "/v1/runs/{id}", "run", "runs", "A run's per-iteration curves",
		func(ctx context.Context, in *runIDInput) (curves, error) { return run(ctx, in.ID) },
		func(ctx context.Context, in *runCurveFileInput) (curves, string, error) {
			c, err := run(ctx, in.ID)
			return c, in.File, err
		})
	registerCurves(s, "/v1/selfplay/{cluster}/{config}", "selfplay", "selfplay", "A self-play loop's per-generation curves",
		func(ctx context.Context, in *selfplayIDInput) (curves, error) {
			return loop(ctx, in.Cluster, in.Config)
		},
		func(ctx context.Context, in *selfplayCurveFileInput) (curves, string, error) {
			c, err := loop(ctx, in.Cluster, in.Config)
			return c, in.File, err
		})
}

// registerCurves adds base/scalars (the curves as JSON), base/tensorboard
// (the event files and CSV) and base/tensorboard/{file} (one of them).
func registerCurves[I, F any](s *Server, base, id, tag, what string,
	find func(context.Context, *I) (curves, error), findFile func(context.Context, *F) (curves, string, error)) {
	huma.Register(s.API, op(http.MethodGet, base+"/scalars", "get-"+id+"-scalars",
		what+" (tag → step, wall time, value), read back from S3", auth.Viewer, tag),
		func(ctx context.Context, in *I) (*scalarsOutput, error) {
			c, err := find(ctx, in)
			if err != nil {
				return nil, err
			}
			steps, err := c.log.Read(ctx)
			if err != nil {
				return nil, huma.Error503ServiceUnavailable(c.what+": read curves", err)
			}
			return &scalarsOutput{Body: Scalars{Prefix: c.log.Prefix, Tags: scalars.Series(steps)}}, nil
		})
	huma.Register(s.API, op(http.MethodGet, base+"/tensorboard", "list-"+id+"-tensorboard-files",
		what+": its TensorBoard event files and metrics.csv", auth.Viewer, tag),
		func(ctx context.Context, in *I) (*curveFilesOutput, error) {
			c, err := find(ctx, in)
			if err != nil {
				return nil, err
			}
			files, err := c.log.Files(ctx)
			if err != nil {
				return nil, huma.Error503ServiceUnavailable(c.what+": list curves", err)
			}
			out := &curveFilesOutput{}
			out.Body.Prefix, out.Body.Files = c.log.Prefix, append([]scalars.CurveFile{}, files...)
			return out, nil
		})
	huma.Register(s.API, op(http.MethodGet, base+"/tensorboard/{file}", "download-"+id+"-tensorboard-file",
		what+": download one event file or metrics.csv", auth.Viewer, tag),
		func(ctx context.Context, in *F) (*checkpointFileOutput, error) {
			c, name, err := findFile(ctx, in)
			if err != nil {
				return nil, err
			}
			b, err := c.log.ReadFile(ctx, name)
			if errors.Is(err, scalars.ErrNotFound) {
				return nil, huma.Error404NotFound(c.what + " has no curve file " + name)
			}
			if err != nil {
				return nil, huma.Error503ServiceUnavailable(c.what+": read "+name, err)
			}
			ct := "application/octet-stream"
			if name == scalars.CSVName {
				ct = "text/csv"
			}
			return &checkpointFileOutput{ContentType: ct, Body: b}, nil
		})
}

// latestScalars is each tag's newest value in a run's curves (none when
// they cannot be read: the run's view does not depend on them).
func (s *Server) latestScalars(ctx context.Context, id string) map[string]scalars.ScalarPoint {
	steps, err := scalars.Log{Store: s.d.Store, Prefix: scalars.RunPrefix(id)}.Read(ctx)
	if err != nil || len(steps) == 0 {
		return nil
	}
	return scalars.Latest(steps)
}
