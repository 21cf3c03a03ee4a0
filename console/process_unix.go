//go:build unix

package console

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// startProcess starts cmd under a new pseudo-terminal, in a new session
// whose controlling terminal it is (so the program leads its own process
// group, and its children get SIGHUP when it dies), with SIGKILL as its
// parent-death signal.
//
// The parent-death signal fires when the thread that forked the child
// exits, not the process. Go's runtime ends a thread when a goroutine
// locked to it exits, so a thread the fork merely happened to run on may
// go away under the child at any time. The goroutine that forks therefore
// locks its thread and keeps it, waiting for the child, until the child
// has exited: the signal then comes only from the death of this process.
//
// Where the program must also hold the terminal's controlling side
// (holdsTerminal, see there), it gets it as file descriptor 3.
func startProcess(cmd *exec.Cmd) (*process, error) {
	p := &process{exited: make(chan struct{})}
	ptm, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	if err := pty.Setsize(ptm, &pty.Winsize{Rows: 24, Cols: 80}); err != nil {
		_ = ptm.Close()
		_ = tty.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	if holdsTerminal {
		cmd.ExtraFiles = append(cmd.ExtraFiles, ptm)
	}
	cmd.SysProcAttr = consoleAttrs() // Ctty 0: the terminal is stdin
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		ch <- err
		if err != nil {
			return
		}
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	err = <-ch
	_ = tty.Close() // the program has its own
	if err != nil {
		_ = ptm.Close()
		return nil, err
	}
	p.pid = cmd.Process.Pid
	f, err := pollable(ptm)
	if err != nil {
		signalGroup(p.pid, sigKILL)
		<-p.exited
		return nil, err
	}
	p.pty = f
	return p, nil
}

// pollable returns a non-blocking duplicate of f and closes f. creack/pty
// hands out a blocking file, whose Read neither Close nor a deadline can
// interrupt; the pump needs both.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	sc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var derr error
	if err := sc.Control(func(fd uintptr) {
		nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("duplicating the terminal: %w", derr)
	}
	if err := unix.SetNonblock(nfd, true); err != nil {
		_ = unix.Close(nfd)
		return nil, fmt.Errorf("terminal non-blocking: %w", err)
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}

// signalGroup signals the process group led by pgid; a group already
// gone is not an error.
func signalGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}

// runToCompletion runs c (Spec.Before) in its own process group with
// SIGKILL as parent-death signal, returns its output (at most 4 KiB) and
// kills the group when ctx is done or the program has exited.
func runToCompletion(ctx context.Context, c *Command, killTimeout time.Duration) ([]byte, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = commandEnv(c.Env)
	out := &boundedBuffer{max: startOutputBytes}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = killTimeout
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Locked for the child's life, as in startProcess.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd.SysProcAttr = groupAttrs()
		if err = cmd.Start(); err != nil {
			return
		}
		stop := context.AfterFunc(ctx, func() {
			signalGroup(cmd.Process.Pid, sigTERM)
			t := time.AfterFunc(killTimeout, func() { signalGroup(cmd.Process.Pid, sigKILL) })
			<-done
			t.Stop()
		})
		err = cmd.Wait()
		stop()
		signalGroup(cmd.Process.Pid, sigKILL)
	}()
	<-done
	if ctx.Err() != nil && err != nil {
		err = fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return out.Bytes(), err
}

// waitGroupGone waits up to d for the process group pgid to have no
// live member; zombies count as gone (this process may not be their
// reaper).
func waitGroupGone(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !groupAlive(pgid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
