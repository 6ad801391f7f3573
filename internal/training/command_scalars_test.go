package training

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/scalars"
)

func TestParseScalarLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
		step int64
		v    scalars.Value
		err  string // "" = valid
	}{
		{"TRAINYARD_SCALAR step=12 tag=loss value=0.31", true, 12, scalars.Value{Tag: "loss", Value: 0.31}, ""},
		{"2026-01-02 INFO TRAINYARD_SCALAR value=-1e3 tag=eval/return step=0", true, 0, scalars.Value{Tag: "eval/return", Value: -1000}, ""},
		{"epoch 3 loss 0.2", false, 0, scalars.Value{}, ""},
		{"MY_TRAINYARD_SCALAR step=1 tag=a value=1", false, 0, scalars.Value{}, ""},
		{"TRAINYARD_SCALAR step=1 tag=a", true, 0, scalars.Value{}, "want step=N"},
		{"TRAINYARD_SCALAR step=-1 tag=a value=1", true, 0, scalars.Value{}, "integer ≥ 0"},
		{"TRAINYARD_SCALAR step=1 tag=a value=one", true, 0, scalars.Value{}, "want a number"},
		{"TRAINYARD_SCALAR step=1 tag=a value=1 unit=s", true, 0, scalars.Value{}, "unknown field"},
		{"TRAINYARD_SCALAR step=1 step=2 tag=a value=1", true, 0, scalars.Value{}, "each once"},
		{"TRAINYARD_SCALAR step=1 tag= value=1", true, 0, scalars.Value{}, "1 to 256"},
	} {
		step, v, ok, err := ParseScalarLine(tc.line)
		if ok != tc.ok || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: ok %v err %v, want ok %v err %q", tc.line, ok, err, tc.ok, tc.err)
			continue
		}
		if tc.err == "" && (step != tc.step || v != tc.v) {
			t.Errorf("%q: step %d %+v, want %d %+v", tc.line, step, v, tc.step, tc.v)
		}
	}
}

// TestCommandScalarsReachTheCurves: lines split across writes, a step's
// tags over two lines and a malformed line (noted in the output) end up
// in the run's curves at the next flush.
func TestCommandScalarsReachTheCurves(t *testing.T) {
	ctx := context.Background()
	var notes bytes.Buffer
	r := &Runner{Objects: bucket}
	lines := r.commandScalars("run-cmd-scalars", &notes)
	for _, w := range []string{"TRAINYARD_SCALAR step=1 tag=loss", " value=0.5\nhello\nTRAINYARD_SCALAR step=2 tag=loss value=0.25\n",
		"TRAINYARD_SCALAR step=2 tag=acc value=0.75\nTRAINYARD_SCALAR step=two tag=loss value=1\n"} {
		if _, err := lines.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	lines.flush(ctx)
	lines.Write([]byte("TRAINYARD_SCALAR step=2 tag=lr value=0.001\n"))
	lines.flush(ctx)
	got, err := scalars.Log{Store: bucket, Prefix: scalars.RunPrefix("run-cmd-scalars")}.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var vals [][]scalars.Value
	for _, s := range got {
		vals = append(vals, s.Values)
	}
	want := [][]scalars.Value{{{Tag: "loss", Value: 0.5}}, {{Tag: "loss", Value: 0.25}, {Tag: "acc", Value: 0.75}, {Tag: "lr", Value: 0.001}}}
	if !reflect.DeepEqual(vals, want) || got[0].Step != 1 || got[1].Step != 2 {
		t.Fatalf("curves %+v, want %+v", got, want)
	}
	if !strings.Contains(notes.String(), `TRAINYARD_SCALAR line ignored: "TRAINYARD_SCALAR step=two tag=loss value=1"`) {
		t.Fatalf("notes %q", notes.String())
	}
}
