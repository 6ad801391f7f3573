package selfplay

import (
	"context"
	"errors"

	"github.com/trainyard/trainyard/internal/selfplay/engine"
)

// TEMPORARY until internal/selfplay/model lands: replaced by the real
// training and evaluator.
var errNoModel = errors.New("selfplay model package not available yet")

func (a *AgentActivities) evaluator(ctx context.Context, key string) (engine.Evaluator, string, error) {
	return nil, "", errNoModel
}

// SelfplayTrain trains a candidate.
func (a *AgentActivities) SelfplayTrain(ctx context.Context, in TrainInput) (TrainResult, error) {
	return TrainResult{}, errNoModel
}
