package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/pluginhost"
	"github.com/trainyard/trainyard/internal/pluginstore"
	"github.com/trainyard/trainyard/workflows/pluginrun"
)

// MaxPluginBytes caps an uploaded module.
const MaxPluginBytes = 32 << 20

type uploadPluginInput struct {
	RawBody huma.MultipartFormFiles[struct {
		Module huma.FormFile `form:"module" contentType:"application/wasm,application/octet-stream" required:"true" doc:"The .wasm module (at most 32 MiB)."`
	}]
}

type pluginOutput struct {
	Body pluginstore.Record
}

type listPluginsOutput struct {
	Body struct {
		Plugins []pluginstore.Record `json:"plugins"`
	}
}

type pluginRefInput struct {
	Ref string `path:"ref" maxLength:"200" doc:"sha256 id, name@version, or a name with one stored version."`
}

type moduleOutput struct {
	ContentType string `header:"Content-Type"`
	Body        []byte
}

type testRunInput struct {
	Ref  string `path:"ref" maxLength:"200"`
	Body struct {
		Envs  int    `json:"envs,omitempty" minimum:"1" maximum:"4096" default:"64" doc:"Instances stepped per batch."`
		Steps int    `json:"steps,omitempty" minimum:"1" maximum:"10000000" default:"100000" doc:"Environment steps in total."`
		Seed  uint64 `json:"seed,omitempty" doc:"Seeds the envs and the random actions."`
	}
}

type testRunOutput struct {
	Body struct {
		WorkflowRef
		Plugin string                  `json:"plugin"`
		Stats  pluginhost.RolloutStats `json:"stats"`
	}
}

func (s *Server) registerPlugins() {
	up := op(http.MethodPost, "/v1/plugins", "upload-plugin",
		"Upload a WASM plugin: compiled, checked (exports, ABI version) and smoke-run under the sandbox limits before it is stored", auth.Operator, "plugins")
	up.DefaultStatus = http.StatusCreated
	up.Errors = append(up.Errors, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge)
	huma.Register(s.API, up, func(ctx context.Context, in *uploadPluginInput) (*pluginOutput, error) {
		f := in.RawBody.Data().Module
		if f.Size > MaxPluginBytes {
			return nil, huma.NewError(http.StatusRequestEntityTooLarge, fmt.Sprintf("module is %d bytes; the limit is %d", f.Size, MaxPluginBytes))
		}
		wasm, err := io.ReadAll(io.LimitReader(f, MaxPluginBytes+1))
		if err != nil {
			return nil, huma.Error400BadRequest("read module", err)
		}
		md, err := s.d.Plugins.Validate(ctx, wasm, pluginhost.Limits{})
		if err != nil {
			if errors.Is(err, pluginhost.ErrInvalidPlugin) {
				return nil, huma.Error422UnprocessableEntity("plugin rejected",
					&huma.ErrorDetail{Location: "body.module", Message: err.Error()})
			}
			return nil, huma.Error500InternalServerError("validate plugin", err)
		}
		tok, _ := TokenFrom(ctx)
		rec, err := s.d.PluginStore.Put(ctx, wasm, md, tok.Name)
		if err != nil {
			return nil, huma.Error503ServiceUnavailable("store plugin", err)
		}
		return &pluginOutput{Body: rec}, nil
	})

	huma.Register(s.API, op(http.MethodGet, "/v1/plugins", "list-plugins", "List uploaded plugins, newest first", auth.Viewer, "plugins"),
		func(ctx context.Context, _ *struct{}) (*listPluginsOutput, error) {
			recs, err := s.d.PluginStore.List(ctx)
			if err != nil {
				return nil, huma.Error503ServiceUnavailable("list plugins", err)
			}
			out := &listPluginsOutput{}
			out.Body.Plugins = append([]pluginstore.Record{}, recs...)
			return out, nil
		})

	huma.Register(s.API, op(http.MethodGet, "/v1/plugins/{ref}", "get-plugin", "A plugin's metadata: spaces, kind, limits it was checked under", auth.Viewer, "plugins"),
		func(ctx context.Context, in *pluginRefInput) (*pluginOutput, error) {
			rec, err := s.resolvePlugin(ctx, in.Ref)
			if err != nil {
				return nil, err
			}
			return &pluginOutput{Body: rec}, nil
		})

	huma.Register(s.API, op(http.MethodGet, "/v1/plugins/{ref}/module", "download-plugin", "Download a plugin's .wasm module", auth.Viewer, "plugins"),
		func(ctx context.Context, in *pluginRefInput) (*moduleOutput, error) {
			rec, err := s.resolvePlugin(ctx, in.Ref)
			if err != nil {
				return nil, err
			}
			b, err := s.d.PluginStore.Module(ctx, rec.ID)
			if err != nil {
				return nil, huma.Error503ServiceUnavailable("read plugin module", err)
			}
			return &moduleOutput{ContentType: "application/wasm", Body: b}, nil
		})

	del := op(http.MethodDelete, "/v1/plugins/{ref}", "delete-plugin", "Delete a plugin; refused while running work uses it", auth.Operator, "plugins")
	del.DefaultStatus = http.StatusNoContent
	del.Errors = append(del.Errors, http.StatusNotFound, http.StatusConflict)
	huma.Register(s.API, del, func(ctx context.Context, in *pluginRefInput) (*struct{}, error) {
		rec, err := s.resolvePlugin(ctx, in.Ref)
		if err != nil {
			return nil, err
		}
		users, err := s.runningUsers(ctx, rec.ID)
		if err != nil {
			return nil, huma.Error503ServiceUnavailable("check plugin users", err)
		}
		if len(users) > 0 {
			return nil, huma.Error409Conflict(fmt.Sprintf("plugin %s@%s is used by %d running workflow(s): %v; cancel them first",
				rec.Name, rec.Version, len(users), users))
		}
		if err := s.d.PluginStore.Delete(ctx, rec.ID); err != nil {
			return nil, huma.Error503ServiceUnavailable("delete plugin", err)
		}
		return nil, nil
	})

	run := op(http.MethodPost, "/v1/plugins/{ref}/test-runs", "test-run-plugin",
		"Run an env plugin with random actions on a worker and report steps/s and episode statistics", auth.Operator, "plugins")
	huma.Register(s.API, run, func(ctx context.Context, in *testRunInput) (*testRunOutput, error) {
		rec, err := s.resolvePlugin(ctx, in.Ref)
		if err != nil {
			return nil, err
		}
		if rec.Kind != string(pluginhost.KindEnv) {
			return nil, huma.Error422UnprocessableEntity("only env plugins can be test-run",
				&huma.ErrorDetail{Location: "path.ref", Message: "plugin kind is " + rec.Kind, Value: in.Ref})
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		wr, err := pluginrun.Start(ctx, s.d.Temporal, "plugin-test-run-"+uuid.NewString(), pluginrun.Input{PluginID: rec.ID, Envs: in.Body.Envs, Steps: in.Body.Steps, Seed: in.Body.Seed})
		if err != nil {
			return nil, temporalErr("start plugin test run", err)
		}
		out := &testRunOutput{}
		out.Body.WorkflowRef = WorkflowRef{WorkflowID: wr.GetID(), RunID: wr.GetRunID()}
		out.Body.Plugin = rec.Name + "@" + rec.Version
		if err := wr.Get(ctx, &out.Body.Stats); err != nil {
			return nil, huma.Error422UnprocessableEntity("plugin test run failed: "+err.Error(),
				&huma.ErrorDetail{Location: "path.ref", Message: err.Error(), Value: in.Ref})
		}
		return out, nil
	})
}

func (s *Server) resolvePlugin(ctx context.Context, ref string) (pluginstore.Record, error) {
	rec, err := s.d.PluginStore.Resolve(ctx, ref)
	switch {
	case errors.Is(err, pluginstore.ErrNotFound):
		return rec, huma.Error404NotFound(err.Error())
	case errors.Is(err, pluginstore.ErrAmbiguous):
		return rec, huma.Error422UnprocessableEntity(err.Error(), &huma.ErrorDetail{Location: "path.ref", Message: "name several versions: use name@version or the id", Value: ref})
	case err != nil:
		return rec, huma.Error503ServiceUnavailable("look up plugin", err)
	}
	return rec, nil
}

// runningUsers lists running workflows tagged with the plugin.
func (s *Server) runningUsers(ctx context.Context, id string) ([]string, error) {
	resp, err := s.d.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: s.d.Namespace,
		Query:     fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Running'", pluginrun.SearchAttribute.GetName(), id),
		PageSize:  20,
	})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range resp.GetExecutions() {
		ids = append(ids, e.GetExecution().GetWorkflowId())
	}
	return ids, nil
}
