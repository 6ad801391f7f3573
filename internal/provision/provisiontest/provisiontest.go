// Package provisiontest helps test provisioners with a real long-running
// process: it builds the fakeagent command and reads its marker file.
package provisiontest

import (
	"bufio"
	"fmt"
	"github.com/trainyard/trainyard/internal/agent/procenv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// BuildFakeAgent compiles fakeagent into dir and returns its path.
func BuildFakeAgent(dir string) (string, error) {
	out := filepath.Join(dir, "fakeagent")
	cmd := exec.Command("go", "build", "-o", out, "github.com/trainyard/trainyard/internal/provision/provisiontest/fakeagent")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build fakeagent: %w: %s", err, b)
	}
	return out, nil
}

// Record is one agent life read from a marker file.
type Record struct {
	PID     int
	Args    []string
	Env     map[string]string
	Child   int
	Stopped bool
}

// ReadMarker parses a marker file (missing: no records).
func ReadMarker(path string) ([]Record, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []Record
	byPID := map[int]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		cur := len(recs) - 1
		switch k {
		case "start":
			pid, _ := strconv.Atoi(v)
			byPID[pid] = len(recs)
			recs = append(recs, Record{PID: pid, Env: map[string]string{}})
		case "arg":
			recs[cur].Args = append(recs[cur].Args, v)
		case "env":
			ek, ev, _ := strings.Cut(v, "=")
			recs[cur].Env[ek] = ev
		case "child":
			recs[cur].Child, _ = strconv.Atoi(v)
		case "stop":
			pid, _ := strconv.Atoi(v)
			if i, ok := byPID[pid]; ok {
				recs[i].Stopped = true
			}
		}
	}
	return recs, sc.Err()
}

// WaitMarker polls the marker until cond holds or timeout passes (a
// deadline for a condition, not a speed assertion).
func WaitMarker(path string, timeout time.Duration, cond func([]Record) bool) ([]Record, error) {
	deadline := time.Now().Add(timeout)
	for {
		recs, err := ReadMarker(path)
		if err != nil {
			return nil, err
		}
		if cond(recs) {
			return recs, nil
		}
		if time.Now().After(deadline) {
			return recs, fmt.Errorf("marker %s: condition not met within %v; records %+v", path, timeout, recs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ProcessGone reports whether pid has exited (absent, or a zombie awaiting
// a reaper).
func ProcessGone(pid int) bool { return procenv.Gone(pid) }

// RunWithFakeAgent builds the fake agent into a temp dir, stores its path
// in *bin, runs the package's tests and exits: the body of a TestMain.
func RunWithFakeAgent(m interface{ Run() int }, bin *string) {
	dir, err := os.MkdirTemp("", "fakeagent")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *bin, err = BuildFakeAgent(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
