package procenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Command is one job process.
type Command struct {
	Path   string
	Args   []string // argv after the program name
	Env    []string // from Build; used as is (nothing inherited)
	Dir    string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// DieWithParent kills the process when the agent that started it dies
	// (Linux): a trainer whose agent was killed is placed again elsewhere,
	// and must not train on unwatched beside its successor.
	DieWithParent bool
	// User, when set, is who the process runs as (Dir must be theirs).
	User *User
}

// Process is a started command leading its own process group, so the job's
// children (data loaders, torch workers) are stopped with it.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts c in a new process group.
func Start(c Command) (*Process, error) {
	if c.Env == nil {
		// exec.Cmd treats nil as "inherit everything": exactly what this
		// package exists to prevent.
		c.Env = []string{}
	}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env, cmd.Dir = c.Env, c.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.DieWithParent {
		dieWithParent(cmd.SysProcAttr)
	}
	if c.User != nil {
		cmd.SysProcAttr.Credential = c.User.credential()
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", c.Path, err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process (and process group) id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the leader has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the leader to exit and returns its error (*exec.ExitError
// for a non-zero exit or a signal).
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// Stop sends SIGTERM to the whole group, waits up to grace for every member
// to exit, then SIGKILLs what is left. It returns once the group is gone
// (or after the kill when members linger as unreaped zombies) and is safe to
// call more than once or after the process exited by itself.
func (p *Process) Stop(grace time.Duration) error {
	pgid := p.Pid()
	if err := signalGroup(pgid, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			if err := signalGroup(pgid, syscall.SIGKILL); err != nil {
				return err
			}
			<-p.done
			// SIGKILL lands asynchronously; return once the group's
			// members are really gone, not merely signalled.
			waitGroupGone(pgid, 5*time.Second)
			return nil
		case <-tick.C:
			// The leader is reaped by Wait; once it is, an empty group
			// means every child has gone too.
			select {
			case <-p.done:
				if !GroupAlive(pgid) {
					return nil
				}
			default:
			}
		}
	}
}

// Run starts c and waits for it; cancelling ctx stops the group with grace.
func Run(ctx context.Context, c Command, grace time.Duration) error {
	p, err := Start(c)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		if err := p.Stop(grace); err != nil {
			return fmt.Errorf("stop %s: %w", c.Path, err)
		}
		return fmt.Errorf("%s: %w", c.Path, ctx.Err())
	}
}

// GroupAlive reports whether any live process is left in process group
// pgid. Zombies do not count: in a container whose PID 1 never reaps, an
// orphaned child stays a zombie forever and would otherwise keep the group
// "alive" until the grace period runs out.
func GroupAlive(pgid int) bool {
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		return groupHasLive(pgid)
	}
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func signalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return fmt.Errorf("signal process group %d with %v: %w", pgid, sig, err)
}

// waitGroupGone polls, for at most limit, until process group pgid has no
// live member.
func waitGroupGone(pgid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for GroupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

func groupHasLive(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, pgrp, ok := procStat(pid); ok && state != 'Z' && pgrp == pgid {
			return true
		}
	}
	return false
}

// Gone reports whether pid has exited: it no longer exists, or it is a
// zombie nobody reaps (orphans in a container whose PID 1 does not reap).
func Gone(pid int) bool {
	state, _, ok := procStat(pid)
	return !ok || state == 'Z'
}

// procStat reads a process's state and process group from /proc.
func procStat(pid int) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// Fields after the command name: state ppid pgrp ...
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err = strconv.Atoi(f[2])
	return f[0][0], pgrp, err == nil
}

// Tail is an io.Writer keeping the last Max bytes written: a job's recent
// output, for heartbeats and results, without unbounded memory.
type Tail struct {
	Max int
	mu  sync.Mutex
	buf []byte
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.Max {
		t.buf = t.buf[len(t.buf)-t.Max:]
	}
	return len(p), nil
}

func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.buf, nil))
}

// LastLine is the last non-empty line of s (a failed job's likely reason).
func LastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
