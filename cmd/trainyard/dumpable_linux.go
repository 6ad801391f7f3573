//go:build linux

package main

import (
	"fmt"
	"syscall"
)

// notDumpable closes /proc/<agent>/{environ,mem,fd,...} and ptrace to the
// agent's own user, so its jobs cannot read its memory (its provisioner
// knows it by pid and start time, not its environment).
func notDumpable() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", e)
	}
	return nil
}
