//go:build !unix

package console

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// errNoTerminal: consoles need a Unix pseudo-terminal and process groups.
var errNoTerminal = errors.New("console: consoles need a Unix pseudo-terminal")

func startProcess(*exec.Cmd) (*process, error) { return nil, errNoTerminal }

func runToCompletion(context.Context, *Command, time.Duration) ([]byte, error) {
	return nil, errNoTerminal
}

func signalGroup(int, syscall.Signal) {}

func waitGroupGone(int, time.Duration) bool { return true }
