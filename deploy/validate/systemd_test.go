package validate

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unit is the part of a systemd unit file the checks need.
type unit struct {
	execStart []string
	env       map[string]bool // Environment= names
	envFiles  []string        // EnvironmentFile= paths
}

// parseUnit reads [Service] ExecStart, Environment and EnvironmentFile,
// joining backslash-continued lines as systemd does.
func parseUnit(path string) (unit, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return unit{}, err
	}
	u := unit{env: map[string]bool{}}
	var logical []string
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		if cur == "" && (strings.HasPrefix(t, "#") || strings.HasPrefix(t, ";")) {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			cur += strings.TrimSuffix(t, "\\") + " "
			continue
		}
		logical = append(logical, cur+t)
		cur = ""
	}
	for _, l := range logical {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		switch k {
		case "ExecStart":
			u.execStart = strings.Fields(v)
		case "Environment":
			for _, f := range strings.Fields(v) {
				name, _, _ := strings.Cut(strings.Trim(f, `"`), "=")
				u.env[name] = true
			}
		case "EnvironmentFile":
			u.envFiles = append(u.envFiles, strings.TrimPrefix(v, "-"))
		}
	}
	return u, nil
}

// envFileNames are the variables an EnvironmentFile sets (commented-out
// lines are examples, not settings).
func envFileNames(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";") {
			continue
		}
		name, _, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		out[strings.TrimSpace(name)] = true
	}
	return out, sc.Err()
}

// installed maps the EnvironmentFile paths the units name to the files in
// deploy/systemd their install comments copy there.
var installed = map[string]string{
	"/etc/trainyard/agent.env":     "trainyard-agent.env",
	"/etc/trainyard/trainyard.env": "trainyard.env",
}

func TestSystemdUnitsMatchTrainyard(t *testing.T) {
	cmds := commands(t)
	for _, tc := range []struct {
		unit, cmd string
	}{
		{"trainyard-agent.service", "agent"},
		{"trainyard-server.service", "server"},
		{"trainyard-worker.service", "worker"},
	} {
		t.Run(tc.unit, func(t *testing.T) {
			u, err := parseUnit(repo("deploy", "systemd", tc.unit))
			if err != nil {
				t.Fatal(err)
			}
			if len(u.execStart) < 2 || filepath.Base(u.execStart[0]) != "trainyard" {
				t.Fatalf("ExecStart %q does not run trainyard", u.execStart)
			}
			if u.execStart[1] != tc.cmd {
				t.Fatalf("ExecStart runs trainyard %s, want %s", u.execStart[1], tc.cmd)
			}
			for _, a := range u.execStart {
				// An empty ${VAR} becomes an empty argument; settings go
				// through the environment instead.
				if strings.Contains(a, "${") {
					t.Errorf("ExecStart argument %q expands a variable", a)
				}
			}
			env := map[string]bool{}
			for k := range u.env {
				env[k] = true
			}
			for _, f := range u.envFiles {
				local, ok := installed[f]
				if !ok {
					t.Fatalf("EnvironmentFile %s: no file in deploy/systemd installs there", f)
				}
				names, err := envFileNames(repo("deploy", "systemd", local))
				if err != nil {
					t.Fatal(err)
				}
				for k := range names {
					env[k] = true
				}
			}
			checkInvocation(t, cmds, invocation{where: tc.unit, args: u.execStart[1:], env: env})
		})
	}
}

// systemd-analyze verify parses the units as systemd would: unknown keys,
// bad values and missing executables are reported. The binary path is
// pointed at a stand-in, since trainyard is not installed here.
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian package systemd)")
	}
	dir := t.TempDir()
	stub := filepath.Join(dir, "trainyard")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	units, err := filepath.Glob(repo("deploy", "systemd", "*.service"))
	if err != nil || len(units) == 0 {
		t.Fatalf("no units: %v", err)
	}
	var paths []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/trainyard", stub)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	// A broken copy first: proves the check can fail here.
	bad := filepath.Join(dir, "broken.service")
	if err := os.WriteFile(bad, []byte("[Service]\nExecStart="+stub+" agent\nKillMode=sometimes\nRestartSecc=5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command(analyze, "verify", "--man=no", bad).CombinedOutput(); !strings.Contains(string(out), "RestartSecc") {
		t.Fatalf("systemd-analyze did not flag a broken unit:\n%s", out)
	}
	out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, paths...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
