package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A go test -json stream: two packages, a passing and a failing test (with
// a subtest), a build error, and a package whose binary died mid-test.
const stream = `{"Time":"2026-11-27T08:00:00Z","Action":"start","Package":"x/a"}
{"Time":"2026-11-27T08:00:00Z","Action":"run","Package":"x/a","Test":"TestFast"}
{"Time":"2026-11-27T08:00:00Z","Action":"output","Package":"x/a","Test":"TestFast","Output":"=== RUN   TestFast\n"}
{"Time":"2026-11-27T08:00:01Z","Action":"output","Package":"x/a","Test":"TestFast","Output":"chatter of a passing test\n"}
{"Time":"2026-11-27T08:00:01Z","Action":"pass","Package":"x/a","Test":"TestFast","Elapsed":1.5}
{"Time":"2026-11-27T08:00:01Z","Action":"run","Package":"x/a","Test":"TestSlow"}
{"Time":"2026-11-27T08:00:01Z","Action":"output","Package":"x/a","Test":"TestSlow/sub","Output":"    slow_test.go:9: the reason\n"}
{"Time":"2026-11-27T08:00:09Z","Action":"fail","Package":"x/a","Test":"TestSlow/sub","Elapsed":8}
{"Time":"2026-11-27T08:00:09Z","Action":"output","Package":"x/a","Test":"TestSlow","Output":"--- FAIL: TestSlow (8.00s)\n"}
{"Time":"2026-11-27T08:00:09Z","Action":"fail","Package":"x/a","Test":"TestSlow","Elapsed":8}
{"Time":"2026-11-27T08:00:09Z","Action":"output","Package":"x/a","Output":"FAIL\tx/a\t9.6s\n"}
{"Time":"2026-11-27T08:00:09Z","Action":"fail","Package":"x/a","Elapsed":9.6}
{"ImportPath":"x/c","Action":"build-output","Output":"c.go:1: syntax error\n"}
{"ImportPath":"x/c","Action":"build-fail"}
{"Time":"2026-11-27T08:00:00Z","Action":"start","Package":"x/b"}
{"Time":"2026-11-27T08:00:00Z","Action":"run","Package":"x/b","Test":"TestHangs"}
{"Time":"2026-11-27T08:00:30Z","Action":"output","Package":"x/b","Test":"TestHangs","Output":"panic: test timed out\n"}
`

func TestRecordAndTable(t *testing.T) {
	dir := t.TempDir()
	if err := begin(dir); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	failed, err := record(dir, "race", strings.NewReader(stream), &out)
	if err != nil || !failed {
		t.Fatalf("record: failed %v, err %v", failed, err)
	}
	shown := out.String()
	for _, want := range []string{"the reason", "--- FAIL: TestSlow", "FAIL\tx/a", "syntax error", "panic: test timed out"} {
		if !strings.Contains(shown, want) {
			t.Errorf("output lacks %q:\n%s", want, shown)
		}
	}
	if strings.Contains(shown, "chatter of a passing test") {
		t.Errorf("a passing test's output was shown:\n%s", shown)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "race.log")); !strings.Contains(string(log), "chatter of a passing test") {
		t.Errorf("the log lacks a passing test's output:\n%s", log)
	}
	if err := step(dir, "lint", "12.5", "0"); err != nil {
		t.Fatal(err)
	}
	if err := step(dir, "ppo-learn", "abc", "0"); err == nil {
		t.Error("a step of abc seconds was taken")
	}
	tab, err := table(dir, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(tab, "\n")
	order := []string{"other", "lint", "race  x/b", "race  x/a", "race  x/a.TestSlow", "race  x/a.TestFast"}
	at := 0
	for _, l := range lines {
		if at < len(order) && strings.Contains(l, order[at]) {
			at++
		}
	}
	if at != len(order) {
		t.Errorf("table lacks %q (in that order):\n%s", order[at], tab)
	}
	for _, want := range []string{"total: ", "UNFINISHED", "FAIL        race  x/a"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
}
