package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"gopkg.in/yaml.v3"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/cluster/spec"
	"github.com/trainyard/trainyard/internal/joinkey"
	"github.com/trainyard/trainyard/internal/workspec"
	"github.com/trainyard/trainyard/workflows"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/job"
)

type clusterUpInput struct {
	HeartbeatTimeout string `query:"heartbeat_timeout" maxLength:"20" doc:"A node without a heartbeat this long is Dead (e.g. 15s, the default; applies when the cluster workflow starts)."`
	RegisterTimeout  string `query:"register_timeout" maxLength:"20" doc:"How long up waits for a started agent to register (e.g. 60s, the default)."`
	RawBody          []byte `contentType:"application/yaml" doc:"The cluster spec, YAML or JSON (see deploy/examples)."`
}

type clusterRefOutput struct {
	Body struct {
		Cluster    string `json:"cluster"`
		WorkflowID string `json:"workflow_id"`
		// Join is set for a spec with static nodes: their agents are
		// started by people, who need the token.
		Join *joinOutputBody `json:"join,omitempty" doc:"For a spec with static nodes: the join token in force and the command that starts each static node's agent."`
	}
}

// joinOutputBody is a cluster's join credential and how to use it.
type joinOutputBody struct {
	Token    string   `json:"token" doc:"A join token of the cluster: whoever holds it can join nodes (give it to agents in their secrets file or TRAINYARD_JOIN_SECRET, never on a command line)."`
	ID       string   `json:"id,omitempty" doc:"A fresh token's ID: DELETE /v1/clusters/{name}/join-tokens/{id} revokes it."`
	Temporal string   `json:"temporal" doc:"The Temporal frontend the agents dial, as the control plane reaches it."`
	S3       string   `json:"s3,omitempty" doc:"The S3 endpoint (URL) agents keep training state in, as the control plane reaches it; agents bring their own keys."`
	S3Bucket string   `json:"s3_bucket,omitempty" doc:"The bucket at s3."`
	Commands []string `json:"commands" doc:"One command per static node of the spec (or one with NODE for a cluster queried later)."`
}

type joinTokenOutput struct {
	Body joinOutputBody
}

type clusterNameInput struct {
	Name string `path:"name" maxLength:"63"`
}

type clusterStatusInput struct {
	Name    string  `path:"name" maxLength:"63"`
	MaxAgeS float64 `query:"max_age_s" minimum:"0" maximum:"30" doc:"When the cluster takes longer than 400 ms to answer (a busy cluster workflow), answer with its last status if it is at most this many seconds old (age_s then says how old). 0, the default, always waits for a fresh one."`
}

type joinTokenInput struct {
	Name  string `path:"name" maxLength:"63"`
	Label string `query:"label" maxLength:"64" doc:"What the token is for (a node, a pool), shown in cluster status."`
}

type revokeJoinTokenInput struct {
	Name string `path:"name" maxLength:"63"`
	ID   string `path:"id" maxLength:"64" doc:"The token's ID, as join-token answered it and cluster status lists it."`
}

type joinTokensOutput struct {
	Body struct {
		JoinKeys []cluster.JoinKey `json:"join_tokens" doc:"The tokens the cluster accepts besides its own, after the change."`
	}
}

type clusterStatusOutput struct {
	Body cluster.Status
}

type listClustersOutput struct {
	Body struct {
		Clusters []string `json:"clusters"`
	}
}

type addNodeInput struct {
	Name    string `path:"name" maxLength:"63"`
	RawBody []byte `contentType:"application/yaml" doc:"One node as in a cluster spec's nodes list, YAML or JSON."`
}

type removeNodeInput struct {
	Name string `path:"name" maxLength:"63"`
	Node string `path:"node" maxLength:"63"`
}

type drainNodeInput struct {
	Name     string `path:"name" maxLength:"63"`
	Node     string `path:"node" maxLength:"63"`
	Deadline string `query:"deadline" example:"2m" doc:"How long the node's runs have to checkpoint and move (default 2m; a cloud's preemption notice gives 30s-2m)."`
}

type submitJobInput struct {
	Name string `path:"name" maxLength:"63"`
	Body struct {
		Command  []string          `json:"command" minItems:"1" doc:"argv of the process."`
		Env      map[string]string `json:"env,omitempty" doc:"Extra environment (the rest is a minimal allow-list)."`
		CPUs     float64           `json:"cpus,omitempty" minimum:"0" default:"1"`
		GPUs     int               `json:"gpus,omitempty" minimum:"0" maximum:"64"`
		MemoryMB int64             `json:"memory_mb,omitempty" minimum:"0"`
		// A job no node could ever take fails after this long (it waits in
		// case a node joins); default 5m.
		InfeasibleGrace string `json:"infeasible_grace,omitempty" maxLength:"20" doc:"How long a job no node could ever take waits for the cluster to change before it fails (e.g. 5m, the default)."`
	}
}

type jobIDInput struct {
	ID string `path:"id" maxLength:"255"`
}

type jobOutput struct {
	Body struct {
		WorkflowID string       `json:"workflow_id"`
		Status     string       `json:"status"`
		Progress   job.Progress `json:"progress"`
		Result     *job.Result  `json:"result,omitempty"`
		Error      string       `json:"error,omitempty"`
	}
}

func (s *Server) registerClusters() {
	up := op(http.MethodPost, "/v1/clusters", "cluster-up",
		"Bring a cluster up from its spec (idempotent: nodes already up are left alone)", auth.Admin, "clusters")
	up.DefaultStatus = http.StatusAccepted
	up.Errors = append(up.Errors, http.StatusUnprocessableEntity)
	huma.Register(s.API, up, func(ctx context.Context, in *clusterUpInput) (*clusterRefOutput, error) {
		hb, err := optDuration("query.heartbeat_timeout", in.HeartbeatTimeout)
		if err != nil {
			return nil, err
		}
		reg, err := optDuration("query.register_timeout", in.RegisterTimeout)
		if err != nil {
			return nil, err
		}
		c, err := spec.Parse(in.RawBody)
		if err != nil {
			return nil, specError(err)
		}
		// The token goes to the bucket, where the worker starting agents
		// finds it; the workflow keeps only its public half.
		token, err := joinkey.New()
		if err != nil {
			return nil, huma.Error500InternalServerError("cluster up", err)
		}
		if err := joinkey.Save(ctx, s.d.Store, c.Name, token); err != nil {
			return nil, huma.Error503ServiceUnavailable("cluster up: keep the join token", err)
		}
		_, err = s.d.Temporal.SignalWithStartWorkflow(ctx, cluster.WorkflowID(c.Name), cluster.SignalCommand,
			cluster.Command{Op: cluster.OpUp, Spec: c},
			client.StartWorkflowOptions{ID: cluster.WorkflowID(c.Name), TaskQueue: workflows.ControlTaskQueue,
				WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE},
			cluster.Name, cluster.State{Name: c.Name, Settings: cluster.Settings{
				HeartbeatTimeout: hb, RegisterTimeout: reg, JoinKey: token.Public()}})
		if err != nil {
			return nil, temporalErr("cluster up", err)
		}
		out := &clusterRefOutput{}
		out.Body.Cluster, out.Body.WorkflowID = c.Name, cluster.WorkflowID(c.Name)
		var static []string
		for _, n := range c.Nodes {
			if k, _ := spec.LookupKind(n.Provisioner.Kind); k.StartedByOperator {
				static = append(static, n.Name)
			}
		}
		if len(static) > 0 {
			// The token in force: a cluster already up keeps its own.
			j, err := s.joinCredential(ctx, c.Name, static)
			if err != nil {
				return nil, err
			}
			out.Body.Join = &j
		}
		return out, nil
	})

	jt := op(http.MethodPost, "/v1/clusters/{name}/join-token", "cluster-join-token",
		"A fresh join token of the cluster and the command that starts a static node's agent with it (kubeadm token create --print-join-command); each can be revoked on its own", auth.Admin, "clusters")
	huma.Register(s.API, jt, func(ctx context.Context, in *joinTokenInput) (*joinTokenOutput, error) {
		t, err := joinkey.New()
		if err != nil {
			return nil, huma.Error500InternalServerError("join token", err)
		}
		if _, err := s.changeJoinKeys(ctx, in.Name, cluster.JoinKeysRequest{Add: t.Public(), Name: in.Label}); err != nil {
			return nil, err
		}
		j := s.joinCommands(in.Name, t, nil)
		j.ID = cluster.JoinKeyID(t.Public())
		return &joinTokenOutput{Body: j}, nil
	})

	huma.Register(s.API, op(http.MethodDelete, "/v1/clusters/{name}/join-tokens/{id}", "cluster-revoke-join-token",
		"Revoke a join token join-token made: the agents that sign with it are refused from their next heartbeat on", auth.Admin, "clusters"),
		func(ctx context.Context, in *revokeJoinTokenInput) (*joinTokensOutput, error) {
			keys, err := s.changeJoinKeys(ctx, in.Name, cluster.JoinKeysRequest{Revoke: in.ID})
			if err != nil {
				return nil, err
			}
			out := &joinTokensOutput{}
			out.Body.JoinKeys = append([]cluster.JoinKey{}, keys...)
			return out, nil
		})

	huma.Register(s.API, op(http.MethodGet, "/v1/clusters", "list-clusters", "Clusters whose workflow runs", auth.Viewer, "clusters"),
		func(ctx context.Context, _ *struct{}) (*listClustersOutput, error) {
			resp, err := s.d.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: s.d.Namespace, Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", cluster.Name)})
			if err != nil {
				return nil, temporalErr("list clusters", err)
			}
			out := &listClustersOutput{}
			out.Body.Clusters = []string{}
			for _, e := range resp.GetExecutions() {
				out.Body.Clusters = append(out.Body.Clusters, e.GetExecution().GetWorkflowId()[len("cluster/"):])
			}
			return out, nil
		})

	huma.Register(s.API, op(http.MethodGet, "/v1/clusters/{name}", "cluster-status",
		"Per-node health (Healthy/Idle/Dead/...), resources total and used, running jobs, recent events", auth.Viewer, "clusters"),
		func(ctx context.Context, in *clusterStatusInput) (*clusterStatusOutput, error) {
			st, err := s.clusterStatusWithin(ctx, in.Name, time.Duration(in.MaxAgeS*float64(time.Second)))
			if err != nil {
				return nil, err
			}
			return &clusterStatusOutput{Body: st}, nil
		})

	for _, c := range []struct {
		path, id, summary string
		op                cluster.Op
	}{
		{"/v1/clusters/{name}/down", "cluster-down", "Drain running work and stop every agent", cluster.OpDown},
		{"/v1/clusters/{name}/restart", "cluster-restart", "Stop every agent, then start them again", cluster.OpRestart},
	} {
		o := op(http.MethodPost, c.path, c.id, c.summary, auth.Admin, "clusters")
		o.DefaultStatus = http.StatusAccepted
		cmdOp := c.op
		huma.Register(s.API, o, func(ctx context.Context, in *clusterNameInput) (*clusterRefOutput, error) {
			return s.command(ctx, in.Name, cluster.Command{Op: cmdOp})
		})
	}

	add := op(http.MethodPost, "/v1/clusters/{name}/nodes", "cluster-add-node", "Add a node to a running cluster and start its agent", auth.Admin, "clusters")
	add.DefaultStatus = http.StatusAccepted
	huma.Register(s.API, add, func(ctx context.Context, in *addNodeInput) (*clusterRefOutput, error) {
		var node any
		if err := yaml.Unmarshal(in.RawBody, &node); err != nil {
			return nil, huma.Error422UnprocessableEntity("node spec", &huma.ErrorDetail{Location: "body", Message: err.Error()})
		}
		doc, _ := yaml.Marshal(map[string]any{"name": in.Name, "nodes": []any{node}})
		c, err := spec.Parse(doc)
		if err != nil {
			return nil, specError(err)
		}
		return s.command(ctx, in.Name, cluster.Command{Op: cluster.OpAdd, Node: &c.Nodes[0]})
	})

	rm := op(http.MethodDelete, "/v1/clusters/{name}/nodes/{node}", "cluster-remove-node", "Drain a node, stop its agent and remove it", auth.Admin, "clusters")
	rm.DefaultStatus = http.StatusAccepted
	huma.Register(s.API, rm, func(ctx context.Context, in *removeNodeInput) (*clusterRefOutput, error) {
		return s.command(ctx, in.Name, cluster.Command{Op: cluster.OpRemove, Name: in.Node})
	})

	for _, c := range []struct {
		verb, summary string
		op            cluster.Op
	}{
		{"drain", "Drain a node: no new work; its runs checkpoint now and move to other nodes", cluster.OpDrain},
		{"undrain", "Let a drained node take work again", cluster.OpUndrain},
	} {
		o := op(http.MethodPost, "/v1/clusters/{name}/nodes/{node}/"+c.verb, "cluster-"+c.verb+"-node", c.summary, auth.Admin, "clusters")
		o.DefaultStatus = http.StatusAccepted
		cmdOp := c.op
		huma.Register(s.API, o, func(ctx context.Context, in *drainNodeInput) (*clusterRefOutput, error) {
			deadline, err := optDuration("query.deadline", in.Deadline)
			if err != nil {
				return nil, err
			}
			if deadline == 0 {
				deadline = 2 * time.Minute
			}
			st, err := s.clusterStatus(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			if !slices.ContainsFunc(st.Nodes, func(n cluster.NodeStatus) bool { return n.Name == in.Node }) {
				return nil, huma.Error404NotFound("cluster " + in.Name + " has no node " + in.Node)
			}
			return s.command(ctx, in.Name, cluster.Command{Op: cmdOp, Name: in.Node, Deadline: deadline})
		})
	}

	submit := op(http.MethodPost, "/v1/clusters/{name}/jobs", "submit-job",
		"Run a command on a node of the cluster with the CPUs, GPUs and memory it asks for", auth.Operator, "jobs")
	submit.DefaultStatus = http.StatusCreated
	huma.Register(s.API, submit, s.submitClusterJob)

	huma.Register(s.API, op(http.MethodGet, "/v1/jobs/{id}", "get-job", "A job's state, node, GPUs, why it waits, and its result", auth.Viewer, "jobs"),
		func(ctx context.Context, in *jobIDInput) (*jobOutput, error) {
			desc, err := s.d.Temporal.DescribeWorkflowExecution(ctx, in.ID, "")
			if err != nil {
				return nil, temporalErr("job "+in.ID, err)
			}
			out := &jobOutput{}
			out.Body.WorkflowID = in.ID
			out.Body.Status = statusName(desc.GetWorkflowExecutionInfo().GetStatus())
			if v, err := s.d.Temporal.QueryWorkflow(ctx, in.ID, "", job.QueryProgress); err == nil {
				_ = v.Get(&out.Body.Progress)
			}
			if out.Body.Status != "running" {
				var res job.Result
				if err := s.d.Temporal.GetWorkflow(ctx, in.ID, "").Get(ctx, &res); err != nil {
					out.Body.Error = err.Error()
				} else {
					out.Body.Result = &res
				}
			}
			return out, nil
		})
}

// submitClusterJob submits a one-command job (POST
// /v1/clusters/{name}/jobs).
func (s *Server) submitClusterJob(ctx context.Context, in *submitJobInput) (*workflowRefOutput, error) {
	if err := envKeyErrors(in.Body.Env); err != nil {
		return nil, err
	}
	grace, err := optDuration("body.infeasible_grace", in.Body.InfeasibleGrace)
	if err != nil {
		return nil, err
	}
	id := "job-" + uuid.NewString()
	ws := workspec.Spec{Name: id[:12], Kind: workspec.KindJob, Roles: []workspec.Role{{Name: "job", Count: 1, CPUs: in.Body.CPUs, GPUs: float64(in.Body.GPUs), MemoryMB: in.Body.MemoryMB}}}
	return s.submitJob(ctx, id, job.Input{Cluster: in.Name, Command: in.Body.Command, Env: in.Body.Env, CPUs: in.Body.CPUs, GPUs: in.Body.GPUs, MemoryMB: in.Body.MemoryMB, InfeasibleGrace: grace, Work: &ws})
}

// command signals a running cluster's workflow; 404 when there is none.
// queryClusterStatus queries a cluster workflow's status (clusterStatus
// shares concurrent calls).
func (s *Server) queryClusterStatus(ctx context.Context, name string) (cluster.Status, error) {
	st, err := cluster.QueryStatusOf(ctx, s.d.Temporal, name)
	// A run that just continued as new answers queries before its first
	// workflow task registered the handler ("unknown queryType"): that
	// lasts one task, so ask again for a few seconds instead of a 503.
	for i := 0; err != nil && notReady(err) && i < 30; i++ {
		select {
		case <-ctx.Done():
			return st, temporalErr("cluster "+name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		st, err = cluster.QueryStatusOf(ctx, s.d.Temporal, name)
	}
	if err != nil {
		return st, temporalErr("cluster "+name, err)
	}
	return st, nil
}

// notReady: the query reached a workflow run whose code has not run yet.
func notReady(err error) bool {
	return strings.Contains(err.Error(), "unknown queryType")
}

func (s *Server) command(ctx context.Context, name string, cmd cluster.Command) (*clusterRefOutput, error) {
	if err := s.d.Temporal.SignalWorkflow(ctx, cluster.WorkflowID(name), "", cluster.SignalCommand, cmd); err != nil {
		return nil, temporalErr("cluster "+name, err)
	}
	out := &clusterRefOutput{}
	out.Body.Cluster, out.Body.WorkflowID = name, cluster.WorkflowID(name)
	return out, nil
}

func optDuration(loc, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, huma.Error422UnprocessableEntity("invalid duration", &huma.ErrorDetail{Location: loc, Message: "want a positive duration like 15s or 2m", Value: v})
	}
	return d, nil
}

// specError turns spec validation errors into field-level problem details.
func specError(err error) error {
	var details []error
	for _, e := range unwrapAll(err) {
		var fe *spec.FieldError
		if errors.As(e, &fe) {
			loc := "body"
			if fe.Node != "" {
				loc += ".nodes[" + fe.Node + "]"
			}
			if fe.Field != "" {
				loc += "." + fe.Field
			}
			details = append(details, &huma.ErrorDetail{Location: loc, Message: fe.Error()})
		}
	}
	if len(details) == 0 {
		details = append(details, &huma.ErrorDetail{Location: "body", Message: err.Error()})
	}
	return huma.Error422UnprocessableEntity("invalid cluster spec", details...)
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unwrapAll(e)...)
		}
		return out
	}
	return []error{err}
}

// joinCredential is the join token in force for cluster (the one whose
// public half its workflow holds) and a join command per node (NODE for
// nodes nil). Admin only: the token joins nodes.
func (s *Server) joinCredential(ctx context.Context, name string, nodes []string) (joinOutputBody, error) {
	var j joinOutputBody
	v, err := s.d.Temporal.QueryWorkflow(ctx, cluster.WorkflowID(name), "", cluster.QueryJoinKey)
	if err != nil {
		return j, temporalErr("cluster "+name, err)
	}
	var pub string
	if err := v.Get(&pub); err != nil {
		return j, huma.Error500InternalServerError("cluster "+name+": join key", err)
	}
	if pub == "" {
		return j, huma.Error409Conflict("cluster " + name + " was brought up before join tokens: its agents use the legacy join secret")
	}
	t, err := joinkey.Load(ctx, s.d.Store, name, pub)
	if err != nil {
		return j, huma.Error503ServiceUnavailable("cluster "+name+": join token", err)
	}
	return s.joinCommands(name, t, nodes), nil
}

// joinCommands are t and the command that starts each node's agent with it
// (NODE for nodes nil).
func (s *Server) joinCommands(name string, t joinkey.Token, nodes []string) joinOutputBody {
	j := joinOutputBody{Token: t.String(), Temporal: s.d.AgentTemporal, S3: s.d.AgentS3, S3Bucket: s.d.AgentS3Bucket}
	if len(nodes) == 0 {
		nodes = []string{"NODE"}
	}
	for _, n := range nodes {
		j.Commands = append(j.Commands, fmt.Sprintf("TRAINYARD_JOIN_SECRET=%s trainyard agent --cluster %s --node %s --temporal-address %s", j.Token, name, n, j.Temporal))
	}
	return j
}

// changeJoinKeys adds or revokes a join token in the cluster's workflow,
// which validates the change and commits it before answering.
func (s *Server) changeJoinKeys(ctx context.Context, name string, req cluster.JoinKeysRequest) ([]cluster.JoinKey, error) {
	h, err := s.d.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: cluster.WorkflowID(name), UpdateName: cluster.UpdateJoinKeys, Args: []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return nil, temporalErr("cluster "+name, err)
	}
	var keys []cluster.JoinKey
	if err := h.Get(ctx, &keys); err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) {
			if strings.Contains(app.Message(), "has no token") {
				return nil, huma.Error404NotFound("cluster " + name + ": " + app.Message())
			}
			return nil, huma.Error422UnprocessableEntity("cluster " + name + ": " + app.Message())
		}
		return nil, temporalErr("cluster "+name, err)
	}
	return keys, nil
}
