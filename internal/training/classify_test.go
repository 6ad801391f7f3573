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

// TestCutShort: after its context ends, a call's failure is its
// cancellation however the piece it was in put it (CI saw a rollout
// worker killed mid-write fail with S3's request error, not
// context.Canceled); before, the failure stands as it is.
func TestCutShort(t *testing.T) {
	live, ended := context.Background(), func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}()
	s3 := errors.New(`Put "http://127.0.0.1:9000/b/k": read: connection reset`)
	trap := fmt.Errorf("%w: %w: guest exited", ErrFatal, pluginhost.ErrTrap)
	for _, tc := range []struct {
		ctx           context.Context
		err           error
		cancel, fatal bool
	}{
		{live, nil, false, false},
		{live, s3, false, false},
		{live, trap, false, true},
		{ended, nil, false, false},
		{ended, s3, true, false},
		{ended, trap, true, false},
		{ended, fmt.Errorf("x: %w", context.Canceled), true, false},
	} {
		got := cutShort(tc.ctx, tc.err)
		if tc.err == nil && got != nil || errors.Is(got, context.Canceled) != tc.cancel || errors.Is(got, ErrFatal) != tc.fatal {
			t.Errorf("cutShort(%v): %v (cancelled %v, fatal %v)", tc.err, got, errors.Is(got, context.Canceled), errors.Is(got, ErrFatal))
		}
	}
}
