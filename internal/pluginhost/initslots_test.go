package pluginhost

import (
	"context"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/plugintest"
)

// An instantiation's init deadline counts from when it gets one of the
// runtime's init slots, not from when it asked: with every slot taken for
// longer than InitTimeout, a healthy plugin still opens once one frees.
// Before the slots, a rollout worker opening 100 instances on 2 busy cores
// failed healthy plugins with "_initialize: deadline exceeded".
func TestInitDeadlineStartsWithASlot(t *testing.T) {
	rt := newTestRuntime(t)
	l := testLimits
	l.InitTimeout = time.Second
	m := load(t, rt, plugintest.BuildGo(t, "./plugins/cartpole"), l)
	// Hold the instance Load left in the pool, so the next one is new.
	held, err := m.NewVecEnv(context.Background(), 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	for range cap(rt.inits) {
		rt.inits <- struct{}{}
	}
	done := make(chan error, 1)
	go func() {
		v, err := m.NewVecEnv(context.Background(), 4, 1)
		if err == nil {
			t.Cleanup(func() { _ = v.Close() }) // held too: the last case needs a new instance
		}
		done <- err
	}()
	time.Sleep(3 * l.InitTimeout / 2)
	select {
	case err := <-done:
		t.Fatalf("instantiated while every init slot was taken: %v", err)
	default:
	}
	for range cap(rt.inits) {
		<-rt.inits
	}
	if err := <-done; err != nil {
		t.Fatalf("healthy plugin after waiting for a slot: %v", err)
	}

	// A caller that gives up while waiting gets its context's error.
	for range cap(rt.inits) {
		rt.inits <- struct{}{}
	}
	defer func() {
		for range cap(rt.inits) {
			<-rt.inits
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := m.NewVecEnv(ctx, 4, 1); err == nil {
		t.Fatal("instantiated with every init slot taken and the context done")
	}
}
