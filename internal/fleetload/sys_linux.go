package fleetload

import "syscall"

// childAttrs puts a child in its own process group and has the kernel
// kill it when this process dies: a load or test killed mid-run must not
// leave a control plane or a fleet of agents behind.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
