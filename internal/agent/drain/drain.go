// Package drain is a node agent's one-way switch into draining: once a
// preemption notice, a SIGTERM or an operator's drain request arrives, the
// agent takes no new work and the work on it checkpoints at once and moves.
package drain

import (
	"sync"
	"time"
)

// Signal is safe for concurrent use; a nil *Signal never drains.
type Signal struct {
	mu       sync.Mutex
	ch       chan struct{} // closed while draining
	reason   string
	deadline time.Time
	changed  chan struct{}
}

// New returns a Signal that is not draining.
func New() *Signal { return &Signal{ch: make(chan struct{}), changed: make(chan struct{}, 1)} }

// Start begins draining for reason, to be finished by deadline (zero: no
// deadline given). It reports false (and changes nothing) when the node
// already drains.
func (s *Signal) Start(reason string, deadline time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason != "" {
		return false
	}
	s.reason, s.deadline = reason, deadline
	close(s.ch)
	s.notify()
	return true
}

// Stop ends draining (an operator's undrain): the node takes work again.
func (s *Signal) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason == "" {
		return
	}
	s.reason, s.deadline, s.ch = "", time.Time{}, make(chan struct{})
	s.notify()
}

func (s *Signal) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Changed receives after Start or Stop (coalesced), so the agent can tell
// its cluster at once.
func (s *Signal) Changed() <-chan struct{} { return s.changed }

// Done is closed while the node drains.
func (s *Signal) Done() <-chan struct{} {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// Reason is why the node drains; empty while it does not.
func (s *Signal) Reason() string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// Grace is the time left until the drain deadline, at least a second (so
// a trainer always gets a chance to write) and at most limit (also when no
// deadline was given).
func (s *Signal) Grace(limit time.Duration) time.Duration {
	if s == nil {
		return limit
	}
	s.mu.Lock()
	dl := s.deadline
	s.mu.Unlock()
	if dl.IsZero() {
		return limit
	}
	return min(max(time.Until(dl), time.Second), limit)
}
