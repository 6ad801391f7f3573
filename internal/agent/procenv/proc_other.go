//go:build !linux

package procenv

import "syscall"

// dieWithParent: only Linux can tie a process's life to its parent's.
func dieWithParent(*syscall.SysProcAttr) {}
