package job

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

// runHollowProcess runs RunProcess on a hollow agent in a test activity
// environment, keeping the Result that Temporal drops on error.
func runHollowProcess(t *testing.T, command ...string) (Result, error) {
	t.Helper()
	return runProcess(t, &AgentActivities{Hollow: true}, command)
}

func runProcess(t *testing.T, acts *AgentActivities, command []string) (Result, error) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	var (
		res Result
		err error
	)
	env.RegisterActivityWithOptions(func(ctx context.Context, in ProcessInput) error {
		res, err = acts.RunProcess(ctx, in)
		return nil
	}, activity.RegisterOptions{Name: "RunProcess"})
	if _, e := env.ExecuteActivity("RunProcess", ProcessInput{Command: command}); e != nil {
		t.Fatal(e)
	}
	return res, err
}

// processFailed is err's non-retryable ProcessFailed message, or fails t.
func processFailed(t *testing.T, err error) string {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrProcessFailed || !app.NonRetryable() {
		t.Fatalf("error %v (%T), want a non-retryable %s", err, err, ErrProcessFailed)
	}
	return app.Message()
}

func TestHollowRunProcess(t *testing.T) {
	t.Run("exit code", func(t *testing.T) {
		res, err := runHollowProcess(t, "sh", "-c", "sleep 0.1; exit 3")
		if res.ExitCode != 3 {
			t.Errorf("ExitCode %d, want 3", res.ExitCode)
		}
		if msg := processFailed(t, err); msg != "sh exited with code 3: " {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("output", func(t *testing.T) {
		res, err := runHollowProcess(t, "bash", "-c", "echo loading && echo out of memory && exit 137")
		if res.ExitCode != 137 || res.Output != "loading\nout of memory\n" {
			t.Errorf("result %+v", res)
		}
		if msg := processFailed(t, err); msg != "bash exited with code 137: out of memory" {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("reported as a real process", func(t *testing.T) {
		command := []string{"sh", "-c", "echo loading && echo out of memory && exit 3"}
		real, realErr := runProcess(t, &AgentActivities{Dir: t.TempDir()}, command)
		res, err := runHollowProcess(t, command...)
		if res.ExitCode != real.ExitCode || res.Output != real.Output {
			t.Errorf("hollow %+v, real %+v", res, real)
		}
		if msg, want := processFailed(t, err), processFailed(t, realErr); msg != want {
			t.Errorf("hollow message %q, real %q", msg, want)
		}
	})
	t.Run("success", func(t *testing.T) {
		res, err := runHollowProcess(t, "sleep", "0.05")
		if err != nil || res.ExitCode != 0 || res.Output != "" {
			t.Errorf("RunProcess = %+v, %v; want success", res, err)
		}
	})
	t.Run("unsupported", func(t *testing.T) {
		_, err := runHollowProcess(t, "python", "train.py")
		if msg := processFailed(t, err); !strings.Contains(msg, `"python train.py"`) || !strings.Contains(msg, "hollow node runs only") {
			t.Errorf("message %q, want it to name the command and what a hollow node runs", msg)
		}
	})
}
