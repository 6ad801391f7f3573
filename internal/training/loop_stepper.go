package training

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainyard/trainyard/internal/agent/procenv"
	"github.com/trainyard/trainyard/internal/atomicfile"
	"github.com/trainyard/trainyard/internal/inference"
	"github.com/trainyard/trainyard/internal/trajpool"
)

// The loop's trainer protocol, version 1 (docs/llm.md). The agent writes
// one JSON Batch per line to the trainer's stdin; the trainer learns from
// it, writes its weights into TRAINYARD_CHECKPOINT_DIR, and then prints
//
//	TRAINYARD_STEP step=N loss=X
//
// (loss optional). Only then does the agent publish the directory (every
// sync_every steps) and send the next batch, so a published checkpoint
// always holds whole steps. End of stdin: the trainer exits 0.
const (
	StepLine = "TRAINYARD_STEP"
	// EnvLoopStep is the last step in the restored checkpoint dir (0 on a
	// fresh start): the first batch a trainer gets is step EnvLoopStep+1.
	EnvLoopStep = "TRAINYARD_LOOP_STEP"
)

// Batch is one trainer step's input.
type Batch struct {
	Step int64 `json:"step"`
	// WeightVersion is the version the endpoints serve (the latest
	// published checkpoint): a trajectory's lag is this minus its own.
	WeightVersion int64                 `json:"weight_version"`
	Trajectories  []trajpool.Trajectory `json:"trajectories"`
}

// StepResult is what a trainer says after a step.
type StepResult struct {
	Step int64    `json:"step"`
	Loss *float64 `json:"loss,omitempty"`
}

// ParseStepLine reads a StepLine line: ok false for any other line.
func ParseStepLine(line string) (r StepResult, ok bool, err error) {
	fields := strings.Fields(line)
	i := -1
	for j, f := range fields {
		if f == StepLine {
			i = j
			break
		}
	}
	if i < 0 {
		return r, false, nil
	}
	seen := false
	for _, f := range fields[i+1:] {
		k, v, found := strings.Cut(f, "=")
		switch {
		case !found:
			return r, true, fmt.Errorf("%q: want step=N [loss=X]", f)
		case k == "step":
			if r.Step, err = strconv.ParseInt(v, 10, 64); err != nil || r.Step < 1 {
				return r, true, fmt.Errorf("step %q: want an integer ≥ 1", v)
			}
			seen = true
		case k == "loss":
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return r, true, fmt.Errorf("loss %q: want a number", v)
			}
			r.Loss = &x
		default:
			return r, true, fmt.Errorf("unknown field %q (want step, loss)", k)
		}
	}
	if !seen {
		return r, true, errors.New("want step=N [loss=X]")
	}
	return r, true, nil
}

// stepper is the loop's trainer: a process on the batch protocol, or a
// remote API.
type stepper interface {
	// step hands b to the trainer and returns once its weights for b are
	// in the checkpoint dir.
	step(ctx context.Context, b Batch) (StepResult, error)
	// finish ends the trainer after its last step (stdin closed; a
	// process must exit 0).
	finish(ctx context.Context) error
	// stop ends it now (cancel, drain, failure).
	stop()
}

// processStepper runs the trainer command on the batch protocol.
type processStepper struct {
	p     *procenv.Process
	stdin io.WriteCloser
	acks  chan StepResult
	out   *procenv.Tail
	argv0 string
}

// startProcessStepper starts c with its stdin on a pipe; lines, which c's
// output reaches, tells it the step lines.
func startProcessStepper(c procenv.Command, out *procenv.Tail, lines *scalarLines) (*processStepper, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s := &processStepper{stdin: w, acks: make(chan StepResult, 1), out: out, argv0: filepath.Base(c.Path)}
	lines.also = s.line
	c.Stdin = r
	p, err := procenv.Start(c)
	r.Close() // the child has its copy
	if err != nil {
		w.Close()
		return nil, err
	}
	s.p = p
	return s, nil
}

func (s *processStepper) line(l string) {
	r, ok, err := ParseStepLine(l)
	switch {
	case !ok:
	case err != nil:
		fmt.Fprintf(s.out, "trainyard: ignored a malformed %s line: %v\n", StepLine, err)
	default:
		select {
		case s.acks <- r:
		default:
			fmt.Fprintf(s.out, "trainyard: ignored %s step=%d: no batch is waiting for it\n", StepLine, r.Step)
		}
	}
}

func (s *processStepper) step(ctx context.Context, b Batch) (StepResult, error) {
	line, err := json.Marshal(b)
	if err != nil {
		return StepResult{}, err
	}
	write := make(chan error, 1)
	go func() { // a trainer that stops reading must not hold the agent
		_, err := s.stdin.Write(append(line, '\n'))
		write <- err
	}()
	for {
		select {
		case err := <-write:
			if err != nil {
				return StepResult{}, s.exited(fmt.Errorf("write batch %d to the trainer: %w", b.Step, err))
			}
			write = nil
		case r := <-s.acks:
			if r.Step != b.Step {
				return r, fmt.Errorf("%w: the trainer acknowledged step %d while step %d was due (%s)", ErrFatal, r.Step, b.Step, StepLine)
			}
			return r, nil
		case <-s.p.Done():
			return StepResult{}, s.exited(fmt.Errorf("the trainer exited during step %d", b.Step))
		case <-ctx.Done():
			return StepResult{}, ctx.Err()
		}
	}
}

// exited explains a trainer that went away: its exit status and last line
// (fatal: it would fail the same way again).
func (s *processStepper) exited(err error) error {
	select {
	case <-s.p.Done():
	case <-time.After(5 * time.Second):
		return err
	}
	werr := s.p.Wait()
	return fmt.Errorf("%w: %s: %v (%v): %s", ErrFatal, s.argv0, err, werr, procenv.LastLine(s.out.String()))
}

func (s *processStepper) finish(ctx context.Context) error {
	s.stdin.Close()
	select {
	case <-s.p.Done():
	case <-ctx.Done():
		s.stop()
		return ctx.Err()
	}
	if err := s.p.Wait(); err != nil {
		return fmt.Errorf("%w: %s after its last step: %v: %s", ErrFatal, s.argv0, err, procenv.LastLine(s.out.String()))
	}
	return nil
}

func (s *processStepper) stop() {
	s.stdin.Close()
	_ = s.p.Stop(10 * time.Second)
}

// remoteStepper posts each batch to a remote training API, which answers
// {"loss": x, "checkpoint": "<its reference to the new weights>"}; the
// answer is written to remote.json in the checkpoint dir, so the published
// checkpoint names the remote weights.
type remoteStepper struct {
	url, token, dir string
	http            *http.Client
}

// newRemoteStepper finds r's endpoint among the definitions the run was
// started with (the cluster's, resolved by the API): only a trainer an
// admin declared has its credentials resolved here.
func newRemoteStepper(r *RemoteTrainer, eps []inference.Endpoint, dir string) (*remoteStepper, error) {
	i := slices.IndexFunc(eps, func(e inference.Endpoint) bool { return e.Name == r.Endpoint })
	if i < 0 || eps[i].Type != inference.TypeTrainer {
		return nil, fmt.Errorf("%w: remote trainer: the cluster declares no endpoint %q of type trainer", ErrFatal, r.Endpoint)
	}
	token, err := inference.HostSecrets{}.Resolve(eps[i].CredentialsRef)
	if err != nil {
		return nil, fmt.Errorf("%w: remote trainer %s: %w", ErrFatal, r.Endpoint, err)
	}
	return &remoteStepper{url: eps[i].URL, token: token, dir: dir, http: &http.Client{Timeout: 30 * time.Minute}}, nil
}

func (s *remoteStepper) step(ctx context.Context, b Batch) (StepResult, error) {
	body, err := json.Marshal(b)
	if err != nil {
		return StepResult{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return StepResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	res, err := s.http.Do(req)
	if err != nil {
		return StepResult{}, fmt.Errorf("remote trainer step %d: %w", b.Step, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode/100 != 2 {
		err := fmt.Errorf("remote trainer step %d: HTTP %d: %s", b.Step, res.StatusCode, bytes.TrimSpace(out))
		if res.StatusCode/100 == 4 && res.StatusCode != http.StatusTooManyRequests {
			err = fmt.Errorf("%w: %w", ErrFatal, err)
		}
		return StepResult{}, err
	}
	var ans struct {
		Loss       *float64        `json:"loss"`
		Checkpoint json.RawMessage `json:"checkpoint"`
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		return StepResult{}, fmt.Errorf("%w: remote trainer step %d: answer: %v", ErrFatal, b.Step, err)
	}
	state, _ := json.Marshal(map[string]any{"step": b.Step, "loss": ans.Loss, "checkpoint": ans.Checkpoint})
	if err := atomicfile.Write(filepath.Join(s.dir, "remote.json"), state, 0o644); err != nil {
		return StepResult{}, err
	}
	return StepResult{Step: b.Step, Loss: ans.Loss}, nil
}

func (s *remoteStepper) finish(context.Context) error { return nil }
func (s *remoteStepper) stop()                        {}
