//go:build linux

package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestNotDumpable is the /proc attack by a job of the agent's own user
// (not root): the job reads its parent's environment. It can while the
// parent is dumpable, and cannot once the parent called notDumpable. The
// parent and the job both run as nobody, so the test needs root.
func TestNotDumpable(t *testing.T) {
	if os.Getenv("TY_DUMPABLE_CHILD") != "" {
		dumpableChild()
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the parent and its job as another user")
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // nobody must reach the binary
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "test.bin")
	if err := copyFile(self, bin); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		closed   string
		readable bool
	}{
		{"dumpable", "", true},
		{"not dumpable", "1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, "-test.run=^TestNotDumpable$")
			cmd.Env = []string{"TY_DUMPABLE_CHILD=1", "TY_CLOSE=" + tc.closed, "TY_SECRET=hunter2", "PATH=/usr/bin:/bin"}
			cmd.Dir = dir
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if got := strings.Contains(string(out), "TY_SECRET=hunter2"); got != tc.readable {
				t.Fatalf("the job read its parent's environment: %v, want %v\n%s", got, tc.readable, out)
			}
		})
	}
}

// dumpableChild is the agent's part: maybe close itself, then start a job
// (as its own user) that prints the parent's environment.
func dumpableChild() {
	if os.Getenv("TY_CLOSE") == "1" {
		if err := notDumpable(); err != nil {
			os.Stdout.WriteString("notDumpable: " + err.Error() + "\n")
			os.Exit(1)
		}
	}
	out, _ := exec.Command("sh", "-c", `tr '\0' '\n' < /proc/$PPID/environ`).CombinedOutput()
	os.Stdout.Write(out)
	os.Exit(0)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
