package training

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/trainyard/trainyard/internal/pluginhost"
)

// TestClassify: a plugin's own failure is fatal (it fails the same way on
// any node); a call cut short by cancellation is not, however it is
// wrapped (the LLM loop e2e test saw "invalid plugin: ... abi_version:
// context canceled" fail a loop after a kill -9 of dev).
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err   error
		fatal bool
	}{
		{fmt.Errorf("step: %w", pluginhost.ErrTrap), true},
		{fmt.Errorf("%w: bad metadata", pluginhost.ErrInvalidPlugin), true},
		{fmt.Errorf("%w: abi_version: %w", pluginhost.ErrInvalidPlugin, context.Canceled), false},
		{fmt.Errorf("%w: ran 5s, limit 5s", pluginhost.ErrTimeout), true},
		{errors.New("S3 unreachable"), false},
	} {
		if got := errors.Is(classify(tc.err), ErrFatal); got != tc.fatal {
			t.Errorf("classify(%v) fatal %v, want %v", tc.err, got, tc.fatal)
		}
	}
}

// TestLoadCutShortIsNotFatal: a plugin that fails to load or start fails
// the run, unless the activity's cancellation cut the load short (a
// rollout worker cancelled while it validated its plugin failed its
// whole run).
func TestLoadCutShortIsNotFatal(t *testing.T) {
	cancelled := fmt.Errorf("%w: validate: abi_version: %w", pluginhost.ErrInvalidPlugin, context.Canceled)
	if errors.Is(fatal(cancelled), ErrFatal) {
		t.Errorf("fatal(%v) is fatal", cancelled)
	}
	if bad := fmt.Errorf("%w: bad metadata", pluginhost.ErrInvalidPlugin); !errors.Is(fatal(bad), ErrFatal) {
		t.Errorf("fatal(%v) is not fatal", bad)
	}
}
