package vmlab

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// Process is a process a lab started (QEMU, dnsmasq), stopped by its PID.
type Process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, set before done is closed
}

func startProcess(name string, cmd *exec.Cmd, fork func(*exec.Cmd) error) (*Process, error) {
	if err := fork(cmd); err != nil {
		return nil, fmt.Errorf("vmlab: start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Name is the name the process was started with.
func (p *Process) Name() string { return p.name }

// PID is the process's id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Running reports whether p was started and has not exited; a nil p has
// not been started.
func (p *Process) Running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Wait waits for the process to exit and returns its exit error, or ctx's
// error first.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop sends SIGTERM to the process's PID, and SIGKILL after grace if it
// is still running; it returns once the process has exited. A process that
// had already exited is not an error.
func (p *Process) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		select {
		case <-p.done:
			return nil
		default:
		}
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("vmlab: %s (pid %d) did not exit after SIGKILL", p.name, p.PID())
	}
}
