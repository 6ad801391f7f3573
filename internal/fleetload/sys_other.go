//go:build !linux

package fleetload

import "syscall"

// childAttrs puts a child in its own process group (no parent-death
// signal outside Linux: stop the load with Close).
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
