//go:build !linux

package plugin

import "os/exec"

// setParentDeathSignal has no kernel support outside Linux; plugins watch
// their parent process instead (see Serve).
func setParentDeathSignal(*exec.Cmd) {}
