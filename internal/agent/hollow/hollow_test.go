package hollow

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	sh := func(script string) []string { return []string{"sh", "-c", script} }
	for _, tc := range []struct {
		name    string
		command []string
		want    Plan
	}{
		{"sleep", []string{"sleep", "2.5"}, Plan{Duration: 2500 * time.Millisecond}},
		{"sleep path", []string{"/bin/sleep", "1"}, Plan{Duration: time.Second}},
		{"sleep suffixes summed", []string{"sleep", "1m", "30s", ".5"}, Plan{Duration: 90*time.Second + 500*time.Millisecond}},
		{"sleep 24h", []string{"sleep", "1d"}, Plan{Duration: MaxDuration}},
		{"true", []string{"true"}, Plan{}},
		{"false", []string{"false"}, Plan{ExitCode: 1}},
		{"echo", []string{"echo", "a", "b"}, Plan{Output: "a b\n"}},
		{"echo nothing expands", []string{"echo", "$HOME", "*"}, Plan{Output: "$HOME *\n"}},
		{"sh sleep exit", sh("sleep 1; exit 3"), Plan{Duration: time.Second, ExitCode: 3}},
		{"bash newlines", []string{"bash", "-c", "echo start\nsleep 0.5\n\necho 'done now'\n"}, Plan{Duration: 500 * time.Millisecond, Output: "start\ndone now\n"}},
		{"exit ends script", sh("exit 2; sleep 5"), Plan{ExitCode: 2}},
		{"bare exit keeps status", sh("false; exit"), Plan{ExitCode: 1}},
		{"last status wins", sh("false; true"), Plan{}},
		{"; goes on after failure", sh("false; sleep 1"), Plan{Duration: time.Second}},
		{"&& stops at failure", sh("false && sleep 1 && exit 0"), Plan{ExitCode: 1}},
		{"&& stops then ; goes on", sh("false && exit 0; echo x"), Plan{Output: "x\n"}},
		{"&& chain", sh("sleep 1 && echo \"a  b\" && exit 4"), Plan{Duration: time.Second, ExitCode: 4, Output: "a  b\n"}},
		{"empty script", sh(""), Plan{}},
		{"sh $0 words ignored", []string{"sh", "-c", "exit 5", "name", "arg"}, Plan{ExitCode: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.command)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.command, err)
			}
			if got != tc.want {
				t.Errorf("Parse(%q) = %+v, want %+v", tc.command, got, tc.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	sh := func(script string) []string { return []string{"sh", "-c", script} }
	for _, tc := range []struct {
		command []string
		want    string // in the error, besides the command itself
	}{
		{nil, "empty command"},
		{[]string{"python", "train.py"}, supported},
		{[]string{"exit", "3"}, supported}, // a builtin, not a binary
		{[]string{"sh", "script.sh"}, supported},
		{[]string{"sleep"}, "missing duration"},
		{[]string{"sleep", "-1"}, "invalid duration"},
		{[]string{"sleep", "inf"}, "invalid duration"},
		{[]string{"sleep", "1e3"}, "invalid duration"},
		{[]string{"sleep", "."}, "invalid duration"},
		{[]string{"sleep", "25h"}, "more than 24h"},
		{[]string{"sleep", "1d", "1"}, "more than 24h"},
		{sh("sleep 1 | cat"), supported},
		{sh("sleep 1 &"), supported},
		{sh("echo $HOME"), supported},
		{sh(`echo "$HOME"`), supported},
		{sh("python x.py; exit 0"), supported},
		{sh("echo 'open"), "unterminated"},
		{sh("&& true"), "&& without"},
		{sh("true &&"), "&& without"},
		{sh("exit 256"), "not 0..255"},
		{sh("exit -1"), "not 0..255"},
		{sh("exit +1"), "not 0..255"},
		{sh("exit 1 2"), "too many"},
	} {
		_, err := Parse(tc.command)
		if err == nil {
			t.Errorf("Parse(%q): no error", tc.command)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, fmt.Sprintf("%q", strings.Join(tc.command, " "))) {
			t.Errorf("Parse(%q) = %q, want it to name the command and say %q", tc.command, msg, tc.want)
		}
	}
}

func TestRun(t *testing.T) {
	var beats atomic.Int32
	start := time.Now()
	if err := Run(context.Background(), Plan{Duration: 55 * time.Millisecond}, 10*time.Millisecond, func() { beats.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 55*time.Millisecond {
		t.Errorf("Run returned after %v, before its 55ms", took)
	}
	if n := beats.Load(); n < 2 {
		t.Errorf("%d beats in 55ms every 10ms", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := Run(ctx, Plan{Duration: time.Hour}, 0, nil); err != context.DeadlineExceeded {
		t.Errorf("cancelled Run = %v, want %v", err, context.DeadlineExceeded)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("cancelled Run took %v", took)
	}

	cancel()
	if err := Run(ctx, Plan{}, time.Second, nil); err == nil {
		t.Error("Run with a done ctx and no sleep: nil error")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"sleep 1; exit 3", "echo 'a b' && false\nexit", "sleep 1d 1", "exit 255", "a && && b", "echo \"x", "sleep .5m;;"} {
		f.Add("sh", s)
	}
	f.Add("sleep", "2.5")
	f.Add("echo", "a")
	f.Fuzz(func(t *testing.T, name, arg string) {
		for _, command := range [][]string{{"sh", "-c", arg}, {name, arg}, strings.Fields(name + " " + arg)} {
			p, err := Parse(command)
			if err != nil {
				if p != (Plan{}) {
					t.Errorf("Parse(%q) = %+v with error %v", command, p, err)
				}
				continue
			}
			if p.ExitCode < 0 || p.ExitCode > 255 || p.Duration < 0 || p.Duration > MaxDuration {
				t.Errorf("Parse(%q) = %+v: out of range", command, p)
			}
		}
	})
}
