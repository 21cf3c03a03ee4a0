//go:build linux

package plugin

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the plugin when the host
// thread that started it dies, so plugins never outlive a crashed host.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
