package procenv

import "syscall"

// dieWithParent has the kernel send SIGKILL to the process when the thread
// that started it exits; Go never ends its threads unless a goroutine
// locked to one returns, so that is when the agent dies.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
