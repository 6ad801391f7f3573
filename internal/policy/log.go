package policy

import (
	"sync"
	"time"
)

// LogEntry is one logged admission decision.
type LogEntry struct {
	Seq        uint64      `json:"seq"`
	Time       time.Time   `json:"time"`
	WorkID     string      `json:"work_id"`
	InputHash  string      `json:"input_hash"`
	Revision   string      `json:"revision"`
	Allow      bool        `json:"allow"`
	Violations []Violation `json:"violations,omitempty"`
}

// Log keeps the latest decisions in a fixed-size ring; Seq numbers keep
// growing so readers can page with "after". Safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	ring []LogEntry
	next uint64 // seq of the next entry; entries hold seq next-len..next-1
}

// NewLog keeps up to capacity entries.
func NewLog(capacity int) *Log {
	return &Log{ring: make([]LogEntry, 0, max(capacity, 1))}
}

// Append logs a decision at t (passed in, not read from the clock) and
// returns its entry.
func (l *Log) Append(t time.Time, workID string, d Decision) LogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Seq starts at 1, so "after 0" means from the beginning.
	e := LogEntry{Seq: l.next + 1, Time: t, WorkID: workID, InputHash: d.InputHash, Revision: d.Revision, Allow: d.Allow, Violations: d.Violations}
	if len(l.ring) < cap(l.ring) {
		l.ring = append(l.ring, e)
	} else {
		l.ring[l.next%uint64(cap(l.ring))] = e
	}
	l.next++
	return e
}

// List returns up to limit entries with Seq > after, oldest first. Entries
// that fell out of the ring are gone.
func (l *Log) List(after int64, limit int) []LogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := uint64(len(l.ring))
	first := l.next - n
	start := first
	if after > 0 && uint64(after) > start { // entry at ring index i has Seq i+1
		start = uint64(after)
	}
	var out []LogEntry
	for s := start; s < l.next && (limit <= 0 || len(out) < limit); s++ {
		out = append(out, l.ring[s%uint64(cap(l.ring))])
	}
	return out
}
