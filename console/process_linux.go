package console

import (
	"os"
	"strconv"
	"syscall"

	"github.com/anvilmetal/anvil/internal/procstat"
)

// consoleAttrs: a new session with the terminal as its controlling
// terminal, and SIGKILL when this process dies.
func consoleAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Setctty: true, Pdeathsig: syscall.SIGKILL}
}

// holdsTerminal: the console program keeps a descriptor of the
// terminal's controlling side (fd 3), so that this process's death does
// not close that side.
//
// When this process dies, two kernel mechanisms would otherwise end the
// program at once: the parent-death SIGKILL, and the hangup of the
// terminal when its controlling side's last descriptor (ours) closes.
// Each alone sends SIGHUP to the program's process group (its children):
// the dying session leader signals the terminal's foreground group, or
// the hangup records that group for the leader to signal when it exits.
// Interleaved, they lose it: the exiting leader finds its terminal, the
// hangup then clears the terminal's foreground group and the leader's,
// and the leader finds no group to signal. The children outlive it, the
// more often the busier the machine. With the program holding the
// controlling side, no hangup happens before the program has died of the
// parent-death signal with its terminal intact, which always signals the
// group.
const holdsTerminal = true

// groupAttrs: a new process group, and SIGKILL when this process dies.
func groupAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// groupAlive reports whether a process of group pgid is alive. kill(-pgid,
// 0) would also count zombies, which stay members of their group until
// reaped, and whoever reaps them here (PID 1 in a container, often not
// an init) may never do so; /proc shows their state.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
		return false
	}
	d, err := os.Open("/proc")
	if err != nil {
		return true
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return true
	}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		st, err := procstat.Read(pid)
		if err == nil && st.PGRP == pgid && st.Alive() {
			return true
		}
	}
	return false
}
