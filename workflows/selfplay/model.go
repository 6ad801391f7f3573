package selfplay

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/trainyard/trainyard/internal/selfplay/engine"
	"github.com/trainyard/trainyard/internal/selfplay/model"
	"github.com/trainyard/trainyard/internal/selfplay/npz"
)

// evaluator loads a model from S3 for MCTS (model.Model's Evaluate is safe
// for concurrent use, so every worker shares it).
func (a *AgentActivities) evaluator(ctx context.Context, key string) (engine.Evaluator, string, error) {
	raw, err := get(ctx, a.Store, key)
	if err != nil {
		return nil, "", err
	}
	m, err := model.Unmarshal(raw)
	if err != nil {
		return nil, "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("model %s: %v", key, err), ErrFailed, err)
	}
	return m, m.Name, nil
}

// SelfplayTrain trains a candidate on the training window's exports,
// starting from the best model's weights (a fresh network for the first),
// and saves it to S3. It heartbeats while the learner runs.
func (a *AgentActivities) SelfplayTrain(ctx context.Context, in TrainInput) (TrainResult, error) {
	activity.RecordHeartbeat(ctx)
	if in.ModelCommands != nil {
		return a.trainUserModel(ctx, in)
	}
	var ex model.Examples
	for _, key := range in.Datasets {
		raw, err := get(ctx, a.Store, key)
		if err != nil {
			return TrainResult{}, err
		}
		d, err := npz.Decode(raw)
		if err != nil {
			return TrainResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("export %s: %v", key, err), ErrFailed, err)
		}
		appendExamples(&ex, d)
	}
	if ex.Len() == 0 {
		return TrainResult{}, temporal.NewNonRetryableApplicationError("no training positions in "+fmt.Sprint(in.Datasets), ErrFailed, nil)
	}
	var m *model.Model
	if in.FromKey != "" {
		raw, err := get(ctx, a.Store, in.FromKey)
		if err != nil {
			return TrainResult{}, err
		}
		if m, err = model.Unmarshal(raw); err != nil {
			return TrainResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("model %s: %v", in.FromKey, err), ErrFailed, err)
		}
	} else {
		rec, err := a.PluginStore.Get(ctx, in.GamePlugin)
		if err != nil {
			return TrainResult{}, fmt.Errorf("game plugin %.12s: %w", in.GamePlugin, err)
		}
		md := rec.Metadata
		if m, err = model.New(model.Shape{ObsDim: md.Observation.Dim(), Actions: md.Action.N, Players: md.NumPlayers, Hidden: []int{64}}, in.Seed); err != nil {
			return TrainResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrFailed, err)
		}
	}
	m.Name = in.Model

	type result struct {
		st  model.Stats
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The recipe internal/selfplay/model's learning test settles on.
		st, err := model.Train(m, ex, model.HParams{Epochs: in.Epochs, LR: 3e-3, Seed: in.Seed})
		done <- result{st, err}
	}()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var res result
wait:
	for {
		select {
		case res = <-done:
			break wait
		case <-tick.C:
			activity.RecordHeartbeat(ctx)
		case <-ctx.Done():
			return TrainResult{}, ctx.Err() // the learner goroutine finishes on its own
		}
	}
	if res.err != nil {
		return TrainResult{}, temporal.NewNonRetryableApplicationError(res.err.Error(), ErrFailed, res.err)
	}
	b, err := m.Marshal()
	if err != nil {
		return TrainResult{}, err
	}
	key := ModelKey(in.LoopID, in.Generation)
	if err := put(ctx, a.Store, key, b, "application/octet-stream"); err != nil {
		return TrainResult{}, err
	}
	return TrainResult{Model: in.Model, Key: key, Loss: res.st.PolicyLoss + res.st.ValueLoss}, nil
}

// appendExamples adds an export's rows as training positions (views into
// the decoded arrays, no copies).
func appendExamples(ex *model.Examples, d npz.Dataset) {
	dim := 1
	for _, s := range d.ObsShape {
		dim *= s
	}
	for i := 0; i < d.Len(); i++ {
		ex.States = append(ex.States, d.States[i*dim:(i+1)*dim:(i+1)*dim])
		ex.Policies = append(ex.Policies, d.Policy[i*d.Actions:(i+1)*d.Actions:(i+1)*d.Actions])
		ex.Values = append(ex.Values, d.Value[i])
		ex.ToMove = append(ex.ToMove, int(d.ToMove[i]))
	}
}
