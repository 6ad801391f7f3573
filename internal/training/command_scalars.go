package training

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trainyard/trainyard/internal/scalars"
)

// ScalarLine starts a line by which a command trainer reports one scalar
// on its output; the line may carry a prefix (a logger's) before it:
//
//	TRAINYARD_SCALAR step=12 tag=loss value=0.31
//
// Such scalars land in the run's curves (scalars.RunPrefix), as the
// built-in learner's do, flushed with every checkpoint sync and at exit.
const ScalarLine = "TRAINYARD_SCALAR"

// ParseScalarLine reads a ScalarLine line: ok is false for any other
// line; err says what is wrong with a malformed one.
func ParseScalarLine(line string) (step int64, v scalars.Value, ok bool, err error) {
	fields := strings.Fields(line)
	i := slices.Index(fields, ScalarLine)
	if i < 0 {
		return 0, v, false, nil
	}
	seen := map[string]bool{}
	for _, f := range fields[i+1:] {
		key, val, found := strings.Cut(f, "=")
		if !found || seen[key] {
			return 0, v, true, fmt.Errorf("%q: want step=N tag=NAME value=X, each once", f)
		}
		seen[key] = true
		switch key {
		case "step":
			if step, err = strconv.ParseInt(val, 10, 64); err != nil || step < 0 {
				return 0, v, true, fmt.Errorf("step %q: want an integer ≥ 0", val)
			}
		case "tag":
			if val == "" || len(val) > 256 {
				return 0, v, true, fmt.Errorf("tag %q: want 1 to 256 characters", val)
			}
			v.Tag = val
		case "value":
			if v.Value, err = strconv.ParseFloat(val, 64); err != nil {
				return 0, v, true, fmt.Errorf("value %q: want a number", val)
			}
		default:
			return 0, v, true, fmt.Errorf("unknown field %q (want step, tag, value)", key)
		}
	}
	if len(seen) != 3 {
		return 0, v, true, fmt.Errorf("want step=N tag=NAME value=X")
	}
	return step, v, true, nil
}

// scalarLines picks ScalarLine lines out of a trainer's output and
// keeps their scalars until flushed to the run's curves. What goes wrong
// (a malformed line, a failed write) is noted in the trainer's output.
type scalarLines struct {
	log   scalars.Log
	notes io.Writer
	// also, when set, sees every line too (the loop's step lines).
	also func(string)

	mu      sync.Mutex
	partial []byte
	pending map[int64]scalars.Step
	bad     int
}

// commandScalars collects a command run's scalars (none are written
// without a bucket).
func (r *Runner) commandScalars(runID string, notes io.Writer) *scalarLines {
	return &scalarLines{log: scalars.Log{Store: r.Objects, Prefix: scalars.RunPrefix(runID)}, notes: notes, pending: map[int64]scalars.Step{}}
}

// maxNotes bounds the malformed lines noted one by one.
const maxNotes = 10

// maxLine bounds a partial line kept between writes: a longer one is no
// scalar.
const maxLine = 64 << 10

func (s *scalarLines) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		s.line(string(s.partial[:i]))
		if s.also != nil {
			s.also(string(s.partial[:i]))
		}
		s.partial = s.partial[i+1:]
	}
	if len(s.partial) > maxLine {
		s.partial = nil
	}
	s.partial = append([]byte(nil), s.partial...) // let the consumed bytes go
	return len(p), nil
}

func (s *scalarLines) line(l string) {
	step, v, ok, err := ParseScalarLine(l)
	switch {
	case !ok:
	case err != nil:
		s.bad++
		if s.bad <= maxNotes {
			fmt.Fprintf(s.notes, "trainyard: %s line ignored: %q: %v\n", ScalarLine, strings.TrimSpace(l), err)
		}
		if s.bad == maxNotes {
			fmt.Fprintf(s.notes, "trainyard: further malformed %s lines are ignored silently\n", ScalarLine)
		}
	default:
		now := float64(time.Now().UnixNano()) / 1e9 // when it was printed
		s.pending[step] = scalars.Merge(s.pending[step], scalars.Step{Step: step, WallTime: now, Values: []scalars.Value{v}})
	}
}

// add records one scalar the agent itself measured (a loop step's loss).
func (s *scalarLines) add(step int64, tag string, value float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := float64(time.Now().UnixNano()) / 1e9
	s.pending[step] = scalars.Merge(s.pending[step], scalars.Step{Step: step, WallTime: now, Values: []scalars.Value{{Tag: tag, Value: value}}})
}

// flush writes the scalars collected since the last flush to the run's
// curves. Curves are a by-product of the trainer: a failure is noted in
// its output and the scalars are kept for the next flush.
func (s *scalarLines) flush(ctx context.Context) {
	s.mu.Lock()
	pending := s.pending
	s.pending = map[int64]scalars.Step{}
	s.mu.Unlock()
	if len(pending) == 0 || s.log.Store == nil {
		return
	}
	steps := make([]scalars.Step, 0, len(pending))
	for _, k := range slices.Sorted(maps.Keys(pending)) {
		steps = append(steps, pending[k])
	}
	if err := s.log.Write(ctx, steps); err != nil {
		fmt.Fprintf(s.notes, "trainyard: curves not written (will retry): %v\n", err)
		s.mu.Lock()
		for k, st := range pending {
			if newer, ok := s.pending[k]; ok {
				st = scalars.Merge(st, newer)
			}
			s.pending[k] = st
		}
		s.mu.Unlock()
	}
}
