//go:build unix && !linux

package console

import "syscall"

// consoleAttrs: a new session with the terminal as its controlling
// terminal. There is no parent-death signal here: the terminal's hangup
// when this process dies is what ends the program.
func consoleAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Setctty: true}
}

// holdsTerminal: the program must not hold the terminal's controlling
// side here, or this process's death would not hang the terminal up and
// nothing would end the program.
const holdsTerminal = false

// groupAttrs: a new process group.
func groupAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupAlive reports whether group pgid has a member (zombies included:
// without /proc there is no cheap way to tell them apart).
func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) != syscall.ESRCH
}
