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
	Tags   map[string][]scalars.ScalarPoint `json:"tags" doc:"Tag → its values, steps ascending (runs: step = iteration; self-play: step = generation). Values are read from the event files, so they are 32-bit floats (TensorBoard's simple_value); metrics.csv keeps full precision."`
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

// curves names one set of curves: what it belongs to (for errors), that
// owner's workflow (unknown: 404) and where the curves are.
type curves struct {
	what, workflowID string
	log              scalars.Log
}

func (s *Server) registerScalars() {
	run := func(id string) curves {
		return curves{"run " + id, id, scalars.Log{Store: s.d.Store, Prefix: scalars.RunPrefix(id)}}
	}
	loop := func(cl, config string) curves {
		id := selfplay.WorkflowID(cl, config)
		return curves{"self-play loop " + cl + "/" + config, id, scalars.Log{Store: s.d.Store, Prefix: scalars.LoopPrefix(id)}}
	}
	registerCurves(s, "/v1/runs/{id}", "run", "runs", "A run's per-iteration curves",
		func(in *runIDInput) curves { return run(in.ID) },
		func(in *runCurveFileInput) (curves, string) { return run(in.ID), in.File })
	registerCurves(s, "/v1/selfplay/{cluster}/{config}", "selfplay", "selfplay", "A self-play loop's per-generation curves",
		func(in *selfplayIDInput) curves { return loop(in.Cluster, in.Config) },
		func(in *selfplayCurveFileInput) (curves, string) { return loop(in.Cluster, in.Config), in.File })
}

// registerCurves adds base/scalars (the curves as JSON), base/tensorboard
// (the event files and CSV) and base/tensorboard/{file} (one of them).
func registerCurves[I, F any](s *Server, base, id, tag, what string, find func(*I) curves, findFile func(*F) (curves, string)) {
	huma.Register(s.API, op(http.MethodGet, base+"/scalars", "get-"+id+"-scalars",
		what+" (tag → step, wall time, value), read back from its TensorBoard event files in S3", auth.Viewer, tag),
		func(ctx context.Context, in *I) (*scalarsOutput, error) {
			c := find(in)
			if err := s.exists(ctx, c); err != nil {
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
			c := find(in)
			if err := s.exists(ctx, c); err != nil {
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
			c, name := findFile(in)
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

// exists is a 404 for a run or loop that never was.
func (s *Server) exists(ctx context.Context, c curves) error {
	if _, err := s.d.Temporal.DescribeWorkflowExecution(ctx, c.workflowID, ""); err != nil {
		return temporalErr(c.what, err)
	}
	return nil
}
