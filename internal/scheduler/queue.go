package scheduler

import (
	"fmt"
	"sort"
	"time"

	"github.com/trainyard/trainyard/internal/policy/params"
)

// Item is queued work.
type Item struct {
	Work
	// Priority is the base priority (higher first); Submitted starts the
	// starvation clock.
	Priority  int
	Submitted time.Time
}

// Queue orders pending work by effective priority: the base priority plus
// the starvation boost once an item waited past the threshold (4 h by
// default), then by submission time, then by ID. Time is always passed in.
// Not safe for concurrent use; a workflow owns it.
type Queue struct {
	params params.Params
	items  map[string]Item
}

// NewQueue makes an empty queue using p's starvation settings.
func NewQueue(p params.Params) *Queue {
	return &Queue{params: p, items: map[string]Item{}}
}

// Push adds an item; IDs are unique.
func (q *Queue) Push(it Item) error {
	if it.ID == "" {
		return fmt.Errorf("queue: item has no ID")
	}
	if _, dup := q.items[it.ID]; dup {
		return fmt.Errorf("queue: %s is already queued", it.ID)
	}
	q.items[it.ID] = it
	return nil
}

// Remove drops an item (placed, cancelled); it reports whether it was there.
func (q *Queue) Remove(id string) bool {
	_, ok := q.items[id]
	delete(q.items, id)
	return ok
}

// Len is the number of queued items.
func (q *Queue) Len() int { return len(q.items) }

// Queued is an item with its ordering data at a given time.
type Queued struct {
	Item
	EffectivePriority int           `json:"effective_priority"`
	Waited            time.Duration `json:"waited"`
	Boosted           bool          `json:"boosted"`
}

// Ordered lists items in scheduling order as of now.
func (q *Queue) Ordered(now time.Time) []Queued {
	out := make([]Queued, 0, len(q.items))
	for _, it := range q.items {
		waited := max(now.Sub(it.Submitted), 0)
		eff := q.params.EffectivePriority(it.Priority, waited)
		out = append(out, Queued{Item: it, EffectivePriority: eff, Waited: waited, Boosted: eff != it.Priority})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.EffectivePriority != b.EffectivePriority {
			return a.EffectivePriority > b.EffectivePriority
		}
		if !a.Submitted.Equal(b.Submitted) {
			return a.Submitted.Before(b.Submitted)
		}
		return a.ID < b.ID
	})
	return out
}
