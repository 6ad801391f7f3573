package scalars

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/embedded/s3test"
	"github.com/trainyard/trainyard/internal/objstore"
)

var bucket *objstore.Store

func TestMain(m *testing.M) {
	os.Exit(s3test.Main(m, "scalars-test", func(s *objstore.Store, _ string) { bucket = s }))
}

// steps makes steps from..to with one value each: loss = step*10 + v.
func steps(from, to int64, v float64) []Step {
	var out []Step
	for s := from; s <= to; s++ {
		out = append(out, Step{Step: s, Values: []Value{{"loss", float64(s*10) + v}}})
	}
	return out
}

// TestLogWrites: writes in order, a segment redone after a crash, a
// trainer resumed from an older checkpoint, a segment whose steps came
// back with its successor's and a step logged in two writes: every step
// is listed once, with the latest values, in the event files and in the
// CSV alike.
func TestLogWrites(t *testing.T) {
	type want struct {
		steps []int64   // steps read back, ascending
		value []float64 // their loss values
		files []int64   // event files' first steps
	}
	for _, tc := range []struct {
		name   string
		writes [][]Step
		want   want
	}{
		{"segments in order", [][]Step{steps(1, 3, 0), steps(4, 6, 0)},
			want{[]int64{1, 2, 3, 4, 5, 6}, []float64{10, 20, 30, 40, 50, 60}, []int64{1, 4}}},
		{"segment redone", [][]Step{steps(1, 3, 0), steps(4, 6, 0), steps(4, 6, 0.5)},
			want{[]int64{1, 2, 3, 4, 5, 6}, []float64{10, 20, 30, 40.5, 50.5, 60.5}, []int64{1, 4}}},
		{"resumed from an older step", [][]Step{steps(1, 3, 0), steps(4, 6, 0), steps(7, 9, 0), steps(5, 8, 0.5)},
			want{[]int64{1, 2, 3, 4, 5, 6, 7, 8, 9}, []float64{10, 20, 30, 40, 50.5, 60.5, 70.5, 80.5, 90}, []int64{1, 4, 5}}},
		{"lost segment handed on with the next", [][]Step{steps(1, 3, 0), steps(4, 6, 0), steps(4, 9, 0)},
			want{[]int64{1, 2, 3, 4, 5, 6, 7, 8, 9}, []float64{10, 20, 30, 40, 50, 60, 70, 80, 90}, []int64{1, 4}}},
		{"restart from zero", [][]Step{steps(0, 3, 0), steps(4, 6, 0), steps(0, 1, 0.5)},
			want{[]int64{0, 1, 2, 3, 4, 5, 6}, []float64{0.5, 10.5, 20, 30, 40, 50, 60}, []int64{0}}},
		{"a step split over two writes", [][]Step{steps(1, 3, 0), {{Step: 3, Values: []Value{{"acc", 1}}}, {Step: 4, Values: []Value{{"loss", 40}}}}},
			want{[]int64{1, 2, 3, 4}, []float64{10, 20, 30, 40}, []int64{1, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clock := time.Unix(1_700_000_000, 0)
			l := Log{Store: bucket, Prefix: RunPrefix(strings.ReplaceAll(t.Name(), "/", "-")), Now: func() time.Time {
				clock = clock.Add(time.Second)
				return clock
			}}
			for _, w := range tc.writes {
				if err := l.Write(ctx, w); err != nil {
					t.Fatal(err)
				}
			}
			got := readEvents(t, l)
			fromCSV, err := l.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var gotSteps []int64
			var gotValues, csvValues []float64
			for i, s := range got {
				gotSteps = append(gotSteps, s.Step)
				gotValues = append(gotValues, s.Values[0].Value)
				if i < len(fromCSV) {
					csvValues = append(csvValues, f32(fromCSV[i].Values[0].Value))
					if fromCSV[i].Step != s.Step || fromCSV[i].WallTime != s.WallTime || len(fromCSV[i].Values) != len(s.Values) {
						t.Errorf("CSV row %d: step %d at %v, event file: step %d at %v", i, fromCSV[i].Step, fromCSV[i].WallTime, s.Step, s.WallTime)
					}
				}
			}
			var wantValues []float64
			for _, v := range tc.want.value {
				wantValues = append(wantValues, f32(v))
			}
			if !reflect.DeepEqual(gotSteps, tc.want.steps) || !reflect.DeepEqual(gotValues, wantValues) || !reflect.DeepEqual(csvValues, wantValues) {
				t.Fatalf("steps %v values %v (CSV %v), want %v %v", gotSteps, gotValues, csvValues, tc.want.steps, wantValues)
			}
			files, err := l.Files(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var firsts []int64
			for _, f := range files {
				if k, ok := eventFileStep(f.Name); ok {
					firsts = append(firsts, k)
				}
			}
			if !reflect.DeepEqual(firsts, tc.want.files) || files[len(files)-1].Name != CSVName {
				t.Fatalf("files %+v, want event files from %v then %s", files, tc.want.files, CSVName)
			}
		})
	}
}

// TestLogKeepsRecordedWallTimes: a step written again without a wall
// time (metrics handed on from a checkpoint) keeps the time it was first
// recorded at; a new one gets Now.
func TestLogKeepsRecordedWallTimes(t *testing.T) {
	ctx := context.Background()
	l := Log{Store: bucket, Prefix: RunPrefix("walltimes"), Now: func() time.Time { return time.Unix(2_000_000_000, 0) }}
	first := []Step{{Step: 1, WallTime: 100, Values: []Value{{"x", 1}}}, {Step: 2, WallTime: 200, Values: []Value{{"x", 2}}}}
	if err := l.Write(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(ctx, []Step{{Step: 2, Values: []Value{{"x", 2}}}, {Step: 3, Values: []Value{{"x", 3}}}}); err != nil {
		t.Fatal(err)
	}
	got, err := l.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if events := readEvents(t, l); !reflect.DeepEqual(events, got) {
		t.Fatalf("event files %+v, CSV %+v", events, got)
	}
	var times []float64
	for _, s := range got {
		times = append(times, s.WallTime)
	}
	if want := []float64{100, 200, 2e9}; !reflect.DeepEqual(times, want) {
		t.Fatalf("wall times %v, want %v", times, want)
	}
	for _, bad := range [][]Step{{{Step: -1}}, {{Step: 2}, {Step: 2}}, {{Step: 3}, {Step: 1}}} {
		if err := l.Write(ctx, bad); err == nil {
			t.Errorf("Write(%+v) accepted", bad)
		}
	}
	if _, err := l.ReadFile(ctx, "../secret"); err == nil {
		t.Error("ReadFile outside the log's files accepted")
	}
}

// readEvents reads every step of the log's event files in file order,
// failing on a step listed twice.
func readEvents(t *testing.T, l Log) []Step {
	t.Helper()
	files, err := l.Files(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []Step
	for _, f := range files {
		if f.Name == CSVName {
			continue
		}
		b, err := l.ReadFile(context.Background(), f.Name)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := DecodeFile(b)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		for _, s := range steps {
			if n := len(out); n > 0 && out[n-1].Step >= s.Step {
				t.Fatalf("%s: step %d after step %d", f.Name, s.Step, out[n-1].Step)
			}
			out = append(out, s)
		}
	}
	return out
}
