// Package healthcheck is the smallest end-to-end workflow: it proves the
// API, Temporal, a worker and S3 work together by writing, reading back and
// deleting an object from an activity.
package healthcheck

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/trainyard/trainyard/internal/temporalx"
)

// Name is the workflow type as it shows in the Temporal UI.
const Name = "Healthcheck"

// Input names the probe; the note travels through the object written to S3.
type Input struct {
	Note string `json:"note"`
}

// Result reports what the worker saw.
type Result struct {
	Note        string `json:"note"`
	Worker      string `json:"worker"`
	ObjectKey   string `json:"object_key"`
	ObjectBytes int    `json:"object_bytes"`
	S3Millis    int64  `json:"s3_millis"`
}

// Workflow runs one storage round trip on a control-plane worker.
func Workflow(ctx workflow.Context, in Input) (Result, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var res Result
	err := workflow.ExecuteActivity(ctx, (*Activities).StorageRoundTrip, StorageInput{
		Key:  "system/healthchecks/" + workflow.GetInfo(ctx).WorkflowExecution.ID,
		Note: in.Note,
	}).Get(ctx, &res)
	return res, err
}

// Start starts a health check under id on the control queue; it may run
// five minutes at most.
func Start(ctx context.Context, c client.Client, id string, in Input) (client.WorkflowRun, error) {
	return c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: temporalx.ControlTaskQueue, WorkflowExecutionTimeout: 5 * time.Minute}, Name, in)
}
