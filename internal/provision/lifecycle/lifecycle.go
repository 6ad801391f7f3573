// Package lifecycle is the one implementation of an agent's life on a node,
// as POSIX sh run through a Runner (a local shell, or an SSH session): an
// agent directory holding a launcher script, the pid file and the log; a
// detached start (setsid, own session and process group, pid file written
// by the agent's own shell before exec so no crash window leaves an
// unrecorded agent); an identity check that survives pid reuse (the
// process's environment must carry this directory); stop with SIGTERM, then
// SIGKILL after a grace period.
package lifecycle

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Variables set in every agent's environment.
const (
	EnvAgentDir    = "TRAINYARD_AGENT_DIR"
	EnvAgentConfig = "TRAINYARD_AGENT_CONFIG"
)

// File names inside the agent directory.
const (
	PidFile    = "agent.pid"
	LogFile    = "agent.log"
	Launcher   = "run.sh"
	ConfigFile = "agent.yaml"
)

// Runner runs a sh script on the node, feeding stdin; a non-zero exit is an
// error carrying the script's stderr.
type Runner interface {
	Run(ctx context.Context, script string, stdin io.Reader) (stdout string, err error)
}

// Agent describes what Launch starts.
type Agent struct {
	// Dir is the agent directory: absolute, relative to the login
	// directory, or starting with "~/".
	Dir string
	// Binary is the program; a relative path is taken inside Dir.
	Binary string
	Args   []string
	// Inherit names variables copied from the launching shell when set
	// there; everything else is dropped (env -i).
	Inherit []string
	// Env are literal variables.
	Env map[string]string
	// Config, when non-nil, is written to Dir/agent.yaml (0600).
	Config []byte
}

// startTimeFn defines starttime PID: the process's start time in clock
// ticks after boot (field 22 of /proc/PID/stat, after the command name in
// parentheses, which may hold spaces), readable whoever the process is.
const startTimeFn = `starttime() { s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; set -- $s; eval "echo \${20}"; }`

// Quote makes s one sh word.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var nameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// prelude resolves the directory into $d and defines alive(), which sets
// $pid and succeeds when the pid file names a live process of this agent
// directory. create=false leaves a missing directory alone (exit 0 with
// "dir -").
func prelude(dir string, create bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "set -u\nd=%s\n", Quote(dir))
	b.WriteString(`case "$d" in "~") d="$HOME" ;; "~/"*) d="$HOME/${d#"~/"}" ;; esac` + "\n")
	if create {
		b.WriteString(`mkdir -p "$d" && chmod 700 "$d" || exit 10` + "\n")
	} else {
		b.WriteString(`[ -d "$d" ] || { echo "dir -"; exit 0; }` + "\n")
	}
	b.WriteString(`cd "$d" || exit 10
d=$(pwd -P)
echo "dir $d"
pid=
` + startTimeFn + `
alive() {
	read -r pid start < ` + PidFile + ` 2>/dev/null || return 1
	case "$pid" in ''|*[!0-9]*) return 1 ;; esac
	gone "$pid" && return 1
	# The pid file names the process by pid and start time: a reused pid
	# starts later. (The agent is non-dumpable, so its environ is closed
	# to its own user; pid files written before start times used it.)
	if [ -n "$start" ]; then
		[ "$(starttime "$pid")" = "$start" ]
		return
	fi
	{ tr '\0' '\n' < "/proc/$pid/environ"; } 2>/dev/null | grep -qxF "` + EnvAgentDir + `=$d"
}
# gone PID: exited (absent, or a zombie not yet reaped).
gone() { [ ! -e "/proc/$1" ] || grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
`)
	return b.String()
}

// Result is what a lifecycle script reports.
type Result struct {
	Dir   string // absolute agent directory ("" when it does not exist)
	PID   int    // the agent's pid when Alive
	Alive bool
	Sum   string // sha256 of the inspected file, when asked
	// Started is true when Launch started a new process.
	Started bool
}

func parse(out string) (Result, error) {
	var r Result
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch k {
		case "dir":
			if v != "-" {
				r.Dir = v
			}
		case "running", "started":
			pid, err := strconv.Atoi(v)
			if err != nil {
				return r, fmt.Errorf("unexpected script output %q", line)
			}
			r.PID, r.Alive, r.Started = pid, true, k == "started"
		case "sum":
			r.Sum = v
		}
	}
	return r, nil
}

// Status reports whether the agent in dir runs. file, when non-empty, also
// asks for the sha256 of Dir/file (empty Sum when missing).
func Status(ctx context.Context, r Runner, dir, file string) (Result, error) {
	script := prelude(dir, false) + `if alive; then echo "running $pid"; fi
`
	if file != "" {
		script += `if [ -f ` + Quote(file) + ` ] && command -v sha256sum >/dev/null 2>&1; then
	echo "sum $(sha256sum ` + Quote(file) + ` | cut -d' ' -f1)"
fi
`
	}
	out, err := r.Run(ctx, script, nil)
	if err != nil {
		return Result{}, fmt.Errorf("check agent in %s: %w", dir, err)
	}
	return parse(out)
}

// Put writes stdin to Dir/name with mode, atomically: a failed or cut copy
// leaves only a temporary file, which it removes.
func Put(ctx context.Context, r Runner, dir, name string, mode uint32, data io.Reader) error {
	if strings.ContainsAny(name, "/\x00") || name == "" || name == "." || name == ".." {
		return fmt.Errorf("bad file name %q", name)
	}
	tmp := Quote(name + ".tmp")
	script := prelude(dir, true) + `umask 077
trap 'rm -f ` + tmp + `' EXIT
cat > ` + tmp + ` || exit 11
chmod ` + fmt.Sprintf("%o", mode) + ` ` + tmp + ` && mv -f ` + tmp + ` ` + Quote(name) + ` || exit 12
trap - EXIT
`
	if _, err := r.Run(ctx, script, data); err != nil {
		return fmt.Errorf("copy %s to %s: %w", name, dir, err)
	}
	return nil
}

// launcher is run.sh: record our pid, then become the agent with a minimal
// environment. Writing the pid file here (not in the starter) means an
// agent always has one, even if whoever started it died a moment later.
func launcher(a Agent) (string, error) {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Generated by trainyard: starts this node's agent. Holds secrets: keep 0700.\n")
	b.WriteString(`cd "$(dirname "$0")" || exit 1
d=$(pwd -P)
` + startTimeFn + `
echo "$$ $(starttime $$)" > ` + PidFile + `.tmp && mv -f ` + PidFile + `.tmp ` + PidFile + ` || exit 1
set --
`)
	for _, v := range a.Inherit {
		if !nameRe.MatchString(v) {
			return "", fmt.Errorf("inherited variable name %q", v)
		}
		fmt.Fprintf(&b, "[ -n \"${%s+x}\" ] && set -- \"$@\" \"%s=${%s}\"\n", v, v, v)
	}
	keys := make([]string, 0, len(a.Env))
	for k := range a.Env {
		if !nameRe.MatchString(k) {
			return "", fmt.Errorf("variable name %q", k)
		}
		if k == EnvAgentDir || k == EnvAgentConfig {
			return "", fmt.Errorf("variable %s is set by the provisioner", k)
		}
		if strings.ContainsRune(a.Env[k], 0) {
			return "", fmt.Errorf("variable %s contains a NUL byte", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString(`exec env -i "$@" "` + EnvAgentDir + `=$d"`)
	if a.Config != nil {
		b.WriteString(` "` + EnvAgentConfig + `=$d/` + ConfigFile + `"`)
	}
	for _, k := range keys {
		b.WriteString(" " + Quote(k+"="+a.Env[k]))
	}
	bin := a.Binary
	if !strings.HasPrefix(bin, "/") {
		bin = "./" + strings.TrimPrefix(bin, "./")
	}
	b.WriteString(" " + Quote(bin))
	for _, arg := range a.Args {
		if strings.ContainsRune(arg, 0) {
			return "", fmt.Errorf("argument contains a NUL byte")
		}
		b.WriteString(" " + Quote(arg))
	}
	b.WriteString("\n")
	return b.String(), nil
}

// Launch writes the launcher (and config) and starts the agent unless one
// already runs in Dir. It waits until the pid file is written; whether the
// agent then stays up is the caller's check.
func Launch(ctx context.Context, r Runner, a Agent) (Result, error) {
	run, err := launcher(a)
	if err != nil {
		return Result{}, fmt.Errorf("agent launcher: %w", err)
	}
	if a.Config != nil {
		if err := Put(ctx, r, a.Dir, ConfigFile, 0o600, strings.NewReader(string(a.Config))); err != nil {
			return Result{}, err
		}
	}
	// Serialise starters (a retried start racing a slow first one) where
	// flock(1) exists; fd 9 is closed for the agent so it does not keep
	// the lock.
	script := prelude(a.Dir, true) + `if command -v flock >/dev/null 2>&1; then
	exec 9>agent.lock && flock -w 60 9 || { echo "another start holds $d/agent.lock" >&2; exit 13; }
fi
if alive; then echo "running $pid"; exit 0; fi
umask 077
cat > ` + Launcher + `.tmp && chmod 700 ` + Launcher + `.tmp && mv -f ` + Launcher + `.tmp ` + Launcher + ` || exit 11
rm -f ` + PidFile + `
if command -v setsid >/dev/null 2>&1; then
	setsid ./` + Launcher + ` </dev/null >>` + LogFile + ` 2>&1 9>&- &
else
	nohup ./` + Launcher + ` </dev/null >>` + LogFile + ` 2>&1 9>&- &
fi
launched=$!
i=0
while ! alive; do
	i=$((i+1))
	if gone "$launched" || [ $i -gt 300 ]; then
		echo "agent exited right after start; last log lines:" >&2
		tail -n 20 ` + LogFile + ` >&2
		exit 14
	fi
	sleep 0.05
done
echo "started $pid"
`
	out, err := r.Run(ctx, script, strings.NewReader(run))
	if err != nil {
		return Result{}, fmt.Errorf("start agent in %s: %w", a.Dir, err)
	}
	return parse(out)
}

// Stop ends the agent in dir: SIGTERM to its process group, SIGKILL after
// grace, then removes the pid file. A stopped agent is not an error.
func Stop(ctx context.Context, r Runner, dir string, grace time.Duration) error {
	ticks := int(grace / (100 * time.Millisecond))
	script := prelude(dir, false) + `if alive; then
	kill -s TERM -- "-$pid" 2>/dev/null || kill -s TERM "$pid" 2>/dev/null
	i=0
	while alive && [ $i -lt ` + strconv.Itoa(ticks) + ` ]; do sleep 0.1; i=$((i+1)); done
	if alive; then
		kill -s KILL -- "-$pid" 2>/dev/null || kill -s KILL "$pid" 2>/dev/null
		i=0
		while alive && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
		if alive; then echo "agent $pid survived SIGKILL" >&2; exit 15; fi
	fi
fi
rm -f ` + PidFile + `
`
	if _, err := r.Run(ctx, script, nil); err != nil {
		return fmt.Errorf("stop agent in %s: %w", dir, err)
	}
	return nil
}

// LogTail returns the last lines of the agent's log, for error messages.
func LogTail(ctx context.Context, r Runner, dir string, lines int) string {
	out, err := r.Run(ctx, prelude(dir, false)+`tail -n `+strconv.Itoa(lines)+` `+LogFile+` 2>/dev/null`+"\n", nil)
	if err != nil {
		return ""
	}
	// Drop the "dir" line of the prelude.
	_, rest, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(rest)
}

// CheckStaysUp waits d and fails, with the log's tail, if the agent in dir
// died meanwhile; its pid file is removed so nothing half-started remains.
// d <= 0 skips the check.
func CheckStaysUp(ctx context.Context, r Runner, dir string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	st, err := Status(ctx, r, dir, "")
	if err != nil {
		return err
	}
	if st.Alive {
		return nil
	}
	tail := LogTail(ctx, r, dir, 20)
	_ = Stop(ctx, r, dir, 0)
	return fmt.Errorf("agent exited right after start; log %s/%s ends with:\n%s", st.Dir, LogFile, tail)
}
