package api

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/workflows/job"
	"github.com/trainyard/trainyard/workflows/train"
)

// QueueEntry is one piece of work waiting for a node.
type QueueEntry struct {
	Position     int        `json:"position" doc:"1: placed first (the cluster's queue order: priority plus the starvation boost, then age)."`
	ID           string     `json:"id" doc:"Run or job id (GET /v1/runs/{id}, GET /v1/jobs/{id})."`
	Kind         string     `json:"kind" enum:"run,job"`
	State        string     `json:"state" enum:"waiting,infeasible" doc:"waiting: it fits an empty node but the nodes are busy; infeasible: no node of the cluster could hold it now even empty (a node that fitted left), and it fails when the grace period ends."`
	Reason       string     `json:"reason" example:"no node can take the job now: job#0 fits no node: gpu: needs 1 free GPU; 0 of 1 free (gpu-box)"`
	WaitingSince *time.Time `json:"waiting_since,omitempty"`
	Running      []string   `json:"running,omitempty" doc:"What holds the cluster's nodes now, i.e. what this work waits behind."`
	// EffectivePriority is the priority the queue orders by.
	EffectivePriority int `json:"effective_priority" doc:"Priority plus the starvation boost once it has waited past the policy's threshold (docs/scheduling.md)."`
}

type queueOutput struct {
	Body struct {
		Cluster string       `json:"cluster"`
		Waiting []QueueEntry `json:"waiting" doc:"Work waiting for a node in the order it is placed, each with why."`
		Running int          `json:"running" doc:"Runs and jobs placed on a node."`
	}
}

func (s *Server) registerQueue() {
	huma.Register(s.API, op(http.MethodGet, "/v1/clusters/{name}/queue", "get-cluster-queue",
		"Work waiting for the cluster's nodes in the order it is placed (priority plus the starvation boost, then age), each with why it waits and what it waits behind", auth.Viewer, "clusters"),
		func(ctx context.Context, in *clusterNameInput) (*queueOutput, error) {
			st, err := s.clusterStatus(ctx, in.Name)
			if err != nil {
				return nil, err
			}
			resp, err := s.d.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: s.d.Namespace, PageSize: 1000,
				Query: "ExecutionStatus = 'Running' AND (WorkflowType = '" + train.Name + "' OR WorkflowType = '" + job.Name + "')",
			})
			if err != nil {
				return nil, temporalErr("list work of cluster "+in.Name, err)
			}
			var holding []string
			for _, n := range st.Nodes {
				holding = append(holding, n.Jobs...)
			}
			out := &queueOutput{}
			out.Body.Cluster, out.Body.Waiting = in.Name, []QueueEntry{}
			for _, e := range resp.GetExecutions() {
				var clusterName string
				if p, ok := e.GetMemo().GetFields()["cluster"]; ok {
					_ = converter.GetDefaultDataConverter().FromPayload(p, &clusterName)
				}
				if clusterName != in.Name {
					continue
				}
				id := e.GetExecution().GetWorkflowId()
				q := QueueEntry{ID: id}
				if e.GetType().GetName() == train.Name {
					var p train.RunProgress
					if v, err := s.d.Temporal.QueryWorkflow(ctx, id, "", train.QueryProgress); err != nil || v.Get(&p) != nil {
						continue // closed meanwhile
					}
					q.Kind, q.State, q.Reason, q.WaitingSince = "run", p.State, p.Reason, p.WaitingSince
				} else {
					var p job.Progress
					if v, err := s.d.Temporal.QueryWorkflow(ctx, id, "", job.QueryProgress); err != nil || v.Get(&p) != nil {
						continue
					}
					q.Kind, q.State, q.Reason, q.WaitingSince = "job", p.State, p.Reason, p.WaitingSince
				}
				if q.State != "waiting" && q.State != "infeasible" {
					if q.State == "running" {
						out.Body.Running++
					}
					continue
				}
				q.Running = holding
				out.Body.Waiting = append(out.Body.Waiting, q)
			}
			// The cluster's own queue order first; work it has not seen
			// ask yet follows, longest waiting first.
			order := map[string]int{}
			for i, q := range st.Queue {
				order[q.WorkID] = i + 1
				for j := range out.Body.Waiting {
					if out.Body.Waiting[j].ID == q.WorkID {
						out.Body.Waiting[j].EffectivePriority = q.EffectivePriority
					}
				}
			}
			slices.SortStableFunc(out.Body.Waiting, func(a, b QueueEntry) int {
				oa, ob := order[a.ID], order[b.ID]
				switch {
				case oa > 0 && ob > 0:
					return oa - ob
				case oa > 0 || ob > 0:
					return ob - oa // the one the cluster has seen first
				case a.WaitingSince == nil || b.WaitingSince == nil:
					return 0
				}
				return a.WaitingSince.Compare(*b.WaitingSince)
			})
			for i := range out.Body.Waiting {
				out.Body.Waiting[i].Position = i + 1
			}
			return out, nil
		})
}
