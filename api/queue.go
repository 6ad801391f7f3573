package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/workflows/cluster"
	"github.com/trainyard/trainyard/workflows/job"
	"github.com/trainyard/trainyard/workflows/train"
)

type queueOutput struct {
	Body struct {
		Cluster string               `json:"cluster"`
		Waiting []cluster.QueueEntry `json:"waiting" doc:"Work waiting for a node in the order it is placed, each with why."`
		Running int                  `json:"running" doc:"Runs and jobs placed on a node."`
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
			out := &queueOutput{}
			out.Body.Cluster = in.Name
			var waiting []cluster.QueueEntry
			for _, e := range resp.GetExecutions() {
				var clusterName string
				if p, ok := e.GetMemo().GetFields()["cluster"]; ok {
					_ = converter.GetDefaultDataConverter().FromPayload(p, &clusterName)
				}
				if clusterName != in.Name {
					continue
				}
				id := e.GetExecution().GetWorkflowId()
				q := cluster.QueueEntry{ID: id}
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
				waiting = append(waiting, q)
			}
			out.Body.Waiting = st.Order(waiting)
			return out, nil
		})
}
