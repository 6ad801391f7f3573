package validate

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/trainyard/trainyard/deploy/validate/cliflags"
)

// repo is the repository root, from this file's location.
func repo(parts ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", ".."}, parts...)...)
}

var (
	cmdsOnce sync.Once
	cmds     map[string]cliflags.Command
	cmdsErr  error
)

func commands(t *testing.T) map[string]cliflags.Command {
	t.Helper()
	cmdsOnce.Do(func() { cmds, cmdsErr = cliflags.Read(repo("cmd", "trainyard")) })
	if cmdsErr != nil {
		t.Fatal(cmdsErr)
	}
	return cmds
}

// required are the settings without which each long-running command cannot
// work outside `trainyard dev` (the defaults point at loopback).
var required = map[string][]string{
	"server": {"temporal-address", "s3-endpoint", "listen"},
	"worker": {"temporal-address", "s3-endpoint"},
	"agent":  {"temporal-address", "cluster", "node", "TRAINYARD_JOIN_SECRET"},
}

// errorer is the part of testing.T checkInvocation reports through.
type errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

// recorder keeps what checkInvocation reports, to test the check itself.
type recorder struct{ errs []string }

func (*recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// invocation is one way a deployment file runs trainyard.
type invocation struct {
	where string          // file and unit/service/container, for messages
	args  []string        // after the binary: command, then flags
	env   map[string]bool // names set in its environment
}

// checkInvocation fails t for a command trainyard lacks, a flag the command
// lacks, a TRAINYARD_* variable nothing reads (a typo or a leftover is
// silently ignored by the binary), or a required setting left unset.
func checkInvocation(t errorer, cmds map[string]cliflags.Command, inv invocation) {
	t.Helper()
	if len(inv.args) == 0 {
		t.Errorf("%s: no trainyard command", inv.where)
		return
	}
	c, ok := cmds[inv.args[0]]
	if !ok {
		t.Errorf("%s: trainyard has no command %q", inv.where, inv.args[0])
		return
	}
	set := map[string]bool{}
	for _, a := range inv.args[1:] {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !c.Accepts(name) {
			t.Errorf("%s: trainyard %s has no flag --%s", inv.where, c.Name, name)
		}
		set[name] = true
	}
	for name := range inv.env {
		if strings.HasPrefix(name, cliflags.EnvPrefix) && !c.ReadsEnv(name) {
			t.Errorf("%s: trainyard %s does not read %s", inv.where, c.Name, name)
		}
	}
	for _, r := range required[c.Name] {
		env := r
		if !strings.HasPrefix(r, cliflags.EnvPrefix) {
			env = cliflags.EnvName(r)
		}
		if !set[r] && !inv.env[env] {
			t.Errorf("%s: trainyard %s needs %s (or --%s)", inv.where, c.Name, env, r)
		}
	}
}

func TestCheckInvocationCatches(t *testing.T) {
	for _, tc := range []struct {
		name string
		inv  invocation
		want string
	}{
		{"old control-plane flag", invocation{"x", []string{"agent", "--control-plane", "h:7233"}, nil}, "has no flag --control-plane"},
		{"old env name", invocation{"x", []string{"agent"}, map[string]bool{"TRAINYARD_CONTROL_PLANE": true}}, "does not read TRAINYARD_CONTROL_PLANE"},
		{"missing join secret", invocation{"x", []string{"agent"}, map[string]bool{"TRAINYARD_TEMPORAL_ADDRESS": true, "TRAINYARD_CLUSTER": true, "TRAINYARD_NODE": true}}, "needs TRAINYARD_JOIN_SECRET"},
		{"fine", invocation{"x", []string{"worker", "--temporal-address=h:1"}, map[string]bool{"TRAINYARD_S3_ENDPOINT": true, "AWS_ACCESS_KEY_ID": true}}, ""},
		{"flag of another command", invocation{"x", []string{"worker", "--listen=:80"}, nil}, "has no flag --listen"},
		{"no such command", invocation{"x", []string{"controller"}, nil}, `no command "controller"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			checkInvocation(rec, commands(t), tc.inv)
			if tc.want == "" {
				if len(rec.errs) > 0 {
					t.Errorf("errors %q, want none", rec.errs)
				}
				return
			}
			if !strings.Contains(strings.Join(rec.errs, "\n"), tc.want) {
				t.Errorf("errors %q, want one containing %q", rec.errs, tc.want)
			}
		})
	}
}
