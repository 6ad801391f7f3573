package temporalx

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// BeatEvery heartbeats at once and then every d until the returned stop is
// called, for activities whose work has no progress of its own to report.
// With a heartbeat timeout of a few d, an activity whose worker was
// killed is retried after that timeout, not after its whole
// start-to-close (a self-play export sat 10 minutes on a dead control
// worker).
func BeatEvery(ctx context.Context, d time.Duration) (stop func()) {
	activity.RecordHeartbeat(ctx)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	// The last beat is over before the activity returns.
	return func() { close(done); <-exited }
}
