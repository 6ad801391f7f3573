package scalars

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/trainyard/trainyard/internal/objstore"
)

// Object layout: one prefix per curve set, TensorBoard's logdir.
//
//	tensorboard/runs/<run-id>/events.out.tfevents.<first step, 10 digits>.trainyard
//	tensorboard/runs/<run-id>/metrics.csv
//	tensorboard/selfplay/<cluster>/<config>/<loop>/...   (the same two kinds of file)
const (
	Root    = "tensorboard/"
	CSVName = "metrics.csv"
	// eventPrefix and eventSuffix frame an event file's name; TensorBoard
	// picks up any name containing "tfevents" and reads them in name order.
	eventPrefix = "events.out.tfevents."
	eventSuffix = ".trainyard"
)

// RunPrefix is where a training run's (or sweep trial's) curves live.
func RunPrefix(runID string) string { return Root + "runs/" + runID + "/" }

// LoopPrefix is where a self-play loop's curves live; loopID is
// "selfplay/<cluster>/<config>/<loop>" (each start of a loop has its own).
func LoopPrefix(loopID string) string { return Root + loopID + "/" }

// EventFileName names the event file whose first step is first.
func EventFileName(first int64) string {
	return fmt.Sprintf("%s%010d%s", eventPrefix, first, eventSuffix)
}

// eventFileStep parses a name EventFileName made.
func eventFileStep(name string) (int64, bool) {
	num, ok := strings.CutPrefix(name, eventPrefix)
	if !ok {
		return 0, false
	}
	if num, ok = strings.CutSuffix(num, eventSuffix); !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	return n, err == nil && n >= 0
}

// Log is one prefix of curves in a bucket. It has one writer at a time
// (a run's trainer, a loop's workflow).
type Log struct {
	Store  *objstore.Store
	Prefix string
	// Now stamps steps written without a wall time (default time.Now).
	Now func() time.Time
}

// CurveFile is one object of a log.
type CurveFile struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// Files lists the log's event files in step order, then metrics.csv.
func (l Log) Files(ctx context.Context) ([]CurveFile, error) {
	var events []CurveFile
	var csvFile *CurveFile
	for o := range l.Store.Client.ListObjects(ctx, l.Store.Bucket, minio.ListObjectsOptions{Prefix: l.Prefix}) {
		if o.Err != nil {
			return nil, fmt.Errorf("list %s: %w", l.Prefix, o.Err)
		}
		name := strings.TrimPrefix(o.Key, l.Prefix)
		if _, ok := eventFileStep(name); ok {
			events = append(events, CurveFile{Name: name, Size: o.Size})
		} else if name == CSVName {
			csvFile = &CurveFile{Name: name, Size: o.Size}
		}
	}
	slices.SortFunc(events, func(a, b CurveFile) int {
		x, _ := eventFileStep(a.Name)
		y, _ := eventFileStep(b.Name)
		return cmp.Compare(x, y)
	})
	if csvFile != nil {
		events = append(events, *csvFile)
	}
	return events, nil
}

// ErrNotFound: the log has no such file.
var ErrNotFound = errors.New("not found")

// ReadFile returns one file of the log (an event file or metrics.csv).
func (l Log) ReadFile(ctx context.Context, name string) ([]byte, error) {
	if _, ok := eventFileStep(name); !ok && name != CSVName {
		return nil, fmt.Errorf("%s%s: %w", l.Prefix, name, ErrNotFound)
	}
	key := l.Prefix + name
	obj, err := l.Store.Client.GetObject(ctx, l.Store.Bucket, key, minio.GetObjectOptions{})
	if err == nil {
		var b []byte
		if b, err = io.ReadAll(obj); err == nil {
			obj.Close()
			return b, nil
		}
		obj.Close()
	}
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return nil, fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return nil, fmt.Errorf("s3 get %s: %w", key, err)
}

// Read returns every step of the log, ascending, from its CSV (one
// object, full precision; the event files hold the same steps).
func (l Log) Read(ctx context.Context) ([]Step, error) {
	return l.csvSteps(ctx)
}

// Write merges steps (ascending, none negative) into the log: a step
// already there keeps the tags the new one lacks and takes the new values
// of the rest, so a segment redone after a crash, or a trainer that
// resumed from an older checkpoint and logs its steps again, replaces
// values and never lists a step twice. The steps from steps[0].Step on
// become one event file named after that step (replacing any file there;
// later files go, an earlier one reaching into them is cut short), and
// the CSV is rewritten whole. A step without a wall time keeps the one
// recorded for it, else takes Now. Each object is put whole, so a reader
// never sees a partly written file.
func (l Log) Write(ctx context.Context, steps []Step) error {
	if len(steps) == 0 {
		return nil
	}
	for i, s := range steps {
		if s.Step < 0 || i > 0 && s.Step <= steps[i-1].Step {
			return fmt.Errorf("scalars %s: steps must be ascending and not negative (step %d)", l.Prefix, s.Step)
		}
	}
	first := steps[0].Step
	old, err := l.csvSteps(ctx)
	if err != nil {
		return err
	}
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	t := float64(now().UnixNano()) / 1e9
	byStep := map[int64]Step{}
	overlap := false
	for _, s := range old {
		byStep[s.Step] = s
		overlap = overlap || s.Step >= first
	}
	for _, s := range steps {
		m := Merge(byStep[s.Step], s)
		m.WallTime = cmp.Or(m.WallTime, t)
		byStep[s.Step] = m
	}
	all := sortedSteps(byStep)
	i, _ := slices.BinarySearchFunc(all, first, func(s Step, step int64) int { return cmp.Compare(s.Step, step) })
	if err := l.put(ctx, EventFileName(first), EncodeFile(all[i:], t)); err != nil {
		return err
	}
	if err := l.trim(ctx, first, overlap); err != nil {
		return err
	}
	var csvb bytes.Buffer
	if err := WriteCSV(&csvb, all); err != nil {
		return fmt.Errorf("scalars %s: %w", l.Prefix, err)
	}
	return l.put(ctx, CSVName, csvb.Bytes())
}

// Merge lays step s over old (the same step, or zero): old's tags in
// their order with s's values, then s's new tags; s's wall time, else
// old's.
func Merge(old, s Step) Step {
	out := Step{Step: s.Step, WallTime: cmp.Or(s.WallTime, old.WallTime)}
	out.Values = slices.Clone(old.Values)
	for _, v := range s.Values {
		if j := slices.IndexFunc(out.Values, func(o Value) bool { return o.Tag == v.Tag }); j >= 0 {
			out.Values[j] = v
		} else {
			out.Values = append(out.Values, v)
		}
	}
	return out
}

func sortedSteps(m map[int64]Step) []Step {
	out := make([]Step, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Step) int { return cmp.Compare(a.Step, b.Step) })
	return out
}

// csvSteps reads the log's CSV (none yet: no steps).
func (l Log) csvSteps(ctx context.Context) ([]Step, error) {
	b, err := l.ReadFile(ctx, CSVName)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	steps, err := ParseCSV(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", l.Prefix, CSVName, err)
	}
	return steps, nil
}

// trim removes steps at or after first from every event file but the one
// named after first: files that begin later go and, when earlier writes
// recorded such steps (overlap), a file that begins earlier and reaches
// past first is rewritten without them.
func (l Log) trim(ctx context.Context, first int64, overlap bool) error {
	files, err := l.Files(ctx)
	if err != nil {
		return err
	}
	for _, f := range files {
		k, ok := eventFileStep(f.Name)
		switch {
		case !ok || k == first || k < first && !overlap:
		case k > first:
			if err := l.Store.Client.RemoveObject(ctx, l.Store.Bucket, l.Prefix+f.Name, minio.RemoveObjectOptions{}); err != nil {
				return fmt.Errorf("s3 delete %s%s: %w", l.Prefix, f.Name, err)
			}
		default:
			b, err := l.ReadFile(ctx, f.Name)
			if err != nil {
				return err
			}
			steps, err := DecodeFile(b)
			if err != nil {
				return fmt.Errorf("%s%s: %w", l.Prefix, f.Name, err)
			}
			n := len(steps)
			steps = slices.DeleteFunc(steps, func(s Step) bool { return s.Step >= first })
			if len(steps) < n {
				if err := l.put(ctx, f.Name, EncodeFile(steps, float64(time.Now().UnixNano())/1e9)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (l Log) put(ctx context.Context, name string, b []byte) error {
	key := l.Prefix + name
	ct := "application/octet-stream"
	if name == CSVName {
		ct = "text/csv"
	}
	if _, err := l.Store.Client.PutObject(ctx, l.Store.Bucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{ContentType: ct}); err != nil {
		return fmt.Errorf("s3 put %s: %w", key, err)
	}
	return nil
}
