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
