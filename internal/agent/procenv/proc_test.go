package procenv

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStopKillsTheGroup(t *testing.T) {
	tests := []struct {
		name   string
		script string
		grace  time.Duration
		signal syscall.Signal // what ends the leader
	}{
		// A generous grace that is never used up: SIGTERM must suffice.
		{name: "exits on SIGTERM", script: `sleep 1000 & echo $!; wait`, grace: time.Minute, signal: syscall.SIGTERM},
		// Ignored signals are inherited, so the grandchild ignores it too.
		{name: "ignores SIGTERM", script: `trap "" TERM; sleep 1000 & echo $!; wait`, grace: 200 * time.Millisecond, signal: syscall.SIGKILL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, w := io.Pipe()
			p, err := Start(Command{Path: "/bin/sh", Args: []string{"-c", tt.script}, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: w})
			if err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(r).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			child, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				t.Fatal(err)
			}
			go io.Copy(io.Discard, r)
			if Gone(child) {
				t.Fatalf("grandchild %d not running before Stop", child)
			}
			if err := p.Stop(tt.grace); err != nil {
				t.Fatal(err)
			}
			w.Close()
			var ee *exec.ExitError
			if err := p.Wait(); !errors.As(err, &ee) {
				t.Fatalf("Wait = %v, want a signal exit", err)
			}
			if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != tt.signal {
				t.Fatalf("leader ended with %v, want signal %v", ws, tt.signal)
			}
			if !Gone(child) {
				t.Fatalf("grandchild %d survived Stop", child)
			}
			// Stopping again is harmless.
			if err := p.Stop(tt.grace); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		cancel bool
		err    string
	}{
		{name: "success", args: []string{"-c", "exit 0"}},
		{name: "failure", args: []string{"-c", "exit 3"}, err: "exit status 3"},
		{name: "cancelled", args: []string{"-c", "sleep 1000"}, cancel: true, err: "context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			err := Run(ctx, Command{Path: "/bin/sh", Args: tt.args}, time.Minute)
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Run = %v, want containing %q", err, tt.err)
			}
		})
	}
}

func TestStartMissingProgram(t *testing.T) {
	_, err := Start(Command{Path: "/nonexistent/job"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/job") {
		t.Fatalf("Start = %v, want an error naming the program", err)
	}
}
