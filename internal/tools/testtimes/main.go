// Command testtimes is how `make test` keeps and prints where its time goes
// (mk/test.mk):
//
//	testtimes begin DIR                       start a table (empties DIR)
//	go test -json ... | testtimes record DIR NAME
//	testtimes step DIR NAME SECONDS RC        a step that is not go test
//	testtimes table DIR OUT                   print the table, also to OUT
//
// record reads `go test -json` from stdin, writes the plain test output to
// DIR/NAME.log, prints package results and the whole output of failed
// tests (not the chatter of passing ones), and keeps the events in
// DIR/NAME.jsonl. table sums them up: steps and packages by wall time,
// slowest first, the slowest 10 tests, and the whole run's wall time.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time        time.Time `json:",omitempty"`
	Action      string
	Package     string  `json:",omitempty"`
	ImportPath  string  `json:",omitempty"` // build-output, build-fail
	Test        string  `json:",omitempty"`
	Elapsed     float64 `json:",omitempty"`
	Output      string  `json:",omitempty"`
	FailedBuild string  `json:",omitempty"`
}

func main() {
	if len(os.Args) < 3 {
		usage()
	}
	dir := os.Args[2]
	var err error
	switch os.Args[1] {
	case "begin":
		err = begin(dir)
	case "record":
		if len(os.Args) != 4 {
			usage()
		}
		var failed bool
		failed, err = record(dir, os.Args[3], os.Stdin, os.Stdout)
		if err == nil && failed {
			os.Exit(1)
		}
	case "step":
		if len(os.Args) != 6 {
			usage()
		}
		err = step(dir, os.Args[3], os.Args[4], os.Args[5])
	case "table":
		if len(os.Args) != 4 {
			usage()
		}
		var t string
		if t, err = table(dir, time.Now()); err == nil {
			fmt.Print(t)
			err = os.WriteFile(os.Args[3], []byte(t), 0o644)
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testtimes begin DIR | record DIR NAME | step DIR NAME SECONDS RC | table DIR OUT")
	os.Exit(2)
}

func begin(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "begin"), []byte(time.Now().UTC().Format(time.RFC3339Nano)), 0o644)
}

func step(dir, name, secs, rc string) error {
	if _, err := strconv.ParseFloat(secs, 64); err != nil {
		return fmt.Errorf("step %s: seconds %q: %w", name, secs, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "steps.tsv"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s\t%s\t%s\n", name, secs, rc)
	return err
}

// record streams one go test -json run; failed reports whether any test,
// package or build failed (go test's own exit status says so too, but a
// pipe loses it).
func record(dir, name string, in io.Reader, out io.Writer) (failed bool, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	js, err := os.Create(filepath.Join(dir, name+".jsonl"))
	if err != nil {
		return false, err
	}
	defer js.Close()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return false, err
	}
	defer logf.Close()
	// Output of a test still running, by package and top-level test (its
	// subtests' output with it): shown only if it fails.
	held := map[string]*strings.Builder{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			// Not an event (go vet or the linker writing to stdout): keep it.
			fmt.Fprintf(out, "%s\n", line)
			fmt.Fprintf(logf, "%s\n", line)
			continue
		}
		js.Write(line)
		js.Write([]byte{'\n'})
		top, _, sub := strings.Cut(e.Test, "/")
		key := e.Package + "\x00" + top
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
			fmt.Fprint(logf, e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Action == "output" && e.Test == "":
			// Package lines: ok/FAIL summaries, panics outside tests.
			fmt.Fprint(logf, e.Output)
			if o := strings.TrimSpace(e.Output); o != "PASS" && o != "" && !strings.HasPrefix(o, "=== ") {
				fmt.Fprint(out, e.Output)
			}
		case e.Action == "output":
			fmt.Fprint(logf, e.Output)
			b := held[key]
			if b == nil {
				b = &strings.Builder{}
				held[key] = b
			}
			b.WriteString(e.Output)
		case sub:
			if e.Action == "fail" {
				failed = true
			}
		case e.Action == "pass" || e.Action == "skip":
			delete(held, key)
		case e.Action == "fail":
			failed = true
			if b := held[key]; b != nil {
				fmt.Fprint(out, b.String())
			}
			delete(held, key)
		}
	}
	if err := sc.Err(); err != nil {
		return failed, err
	}
	// A test still running when the stream ended (a timeout's panic kills
	// the binary): its output is the evidence.
	for _, b := range held {
		failed = true
		fmt.Fprint(out, b.String())
	}
	return failed, nil
}

type timed struct {
	name    string
	secs    float64
	outcome string
}

// table reads what begin, record and step left in dir.
func table(dir string, now time.Time) (string, error) {
	var steps, pkgs, tests []timed
	if b, err := os.ReadFile(filepath.Join(dir, "steps.tsv")); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Split(l, "\t")
			if len(f) != 3 {
				continue
			}
			s, _ := strconv.ParseFloat(f[1], 64)
			o := "ok"
			if f[2] != "0" {
				o = "FAIL (exit " + f[2] + ")"
			}
			steps = append(steps, timed{f[0], s, o})
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	for _, fn := range files {
		run := strings.TrimSuffix(filepath.Base(fn), ".jsonl")
		p, ts, err := readRun(fn, run)
		if err != nil {
			return "", err
		}
		pkgs = append(pkgs, p...)
		tests = append(tests, ts...)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(t timed) { fmt.Fprintf(tw, "%8.1f\t%s\t%s\n", t.secs, t.outcome, t.name) }
	fmt.Fprintln(&b, "=== make test: where the time went (seconds of wall time)")
	if begun, err := os.ReadFile(filepath.Join(dir, "begin")); err == nil {
		if t0, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(begun))); err == nil {
			total := now.Sub(t0).Seconds()
			fmt.Fprintf(&b, "total: %.0f s (%.1f min), begun %s\n", total, total/60, t0.Format(time.RFC3339))
			if len(steps) > 0 {
				// What no step timed: installs, plugin builds, tool builds.
				other := total
				for _, s := range steps {
					other -= s.secs
				}
				steps = append(steps, timed{"other (installs, builds, the learning and SDK runs)", max(other, 0), "ok"})
			}
		}
	}
	section := func(title, note string, rows []timed, limit int) {
		if len(rows) == 0 {
			return
		}
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].secs > rows[j].secs })
		sum := 0.0
		for _, r := range rows {
			sum += r.secs
		}
		fmt.Fprintf(&b, "\n%s (%d, %.0f s summed%s)\n", title, len(rows), sum, note)
		for i, r := range rows {
			if limit > 0 && i == limit {
				break
			}
			row(r)
		}
		tw.Flush()
	}
	section("steps", "", steps, 0)
	section("packages", "; a go test run's packages run side by side", pkgs, 0)
	section("slowest tests", "; parallel ones overlap", tests, 10)
	return b.String(), nil
}

// readRun gives a go test run's packages and top-level tests, each named
// with the run (race or not: it tells the two apart).
func readRun(fn, run string) (pkgs, tests []timed, err error) {
	f, err := os.Open(fn)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	started := map[string]time.Time{}
	ended := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var last time.Time
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if !e.Time.IsZero() {
			last = e.Time
		}
		switch {
		case e.Action == "start" && e.Test == "":
			started[e.Package] = e.Time
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			ended[e.Package] = true
			if e.Elapsed == 0 && e.Action == "skip" {
				continue // no test files
			}
			pkgs = append(pkgs, timed{run + "  " + e.Package, e.Elapsed, outcome(e.Action)})
		case e.Test != "" && !strings.Contains(e.Test, "/") && (e.Action == "pass" || e.Action == "fail"):
			tests = append(tests, timed{run + "  " + e.Package + "." + e.Test, e.Elapsed, outcome(e.Action)})
		}
	}
	// A package that never ended (its binary was killed): as long as it ran.
	for p, t0 := range started {
		if !ended[p] && !last.IsZero() {
			pkgs = append(pkgs, timed{run + "  " + p, last.Sub(t0).Seconds(), "UNFINISHED"})
		}
	}
	return pkgs, tests, sc.Err()
}

func outcome(action string) string {
	if action == "pass" {
		return "ok"
	}
	return strings.ToUpper(action)
}
