package console

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/anvilmetal/anvil/clock"
)

// Sentinel errors callers branch on (errors.Is).
var (
	// ErrNoSession: no console is running for the node.
	ErrNoSession = errors.New("console: no console session for the node")
	// ErrWriterBusy: another client already holds the console's keyboard.
	ErrWriterBusy = errors.New("console: another client is attached read-write")
	// ErrTokenInvalid: the token is unknown, expired, or for another node.
	ErrTokenInvalid = errors.New("console: console token is invalid or expired")
	// ErrClosed: the manager is closed (the conductor is stopping).
	ErrClosed = errors.New("console: manager is closed")
	// ErrPortsExhausted: no free port in Options.PortRange.
	ErrPortsExhausted = errors.New("console: no free port in the console port range")
	// ErrReadOnly: a ReadOnly client tried to write.
	ErrReadOnly = errors.New("console: client is attached read-only")
	// ErrIdleTimeout: the client was closed after its idle timeout with no
	// byte in either direction.
	ErrIdleTimeout = errors.New("console: client idle timeout")
	// ErrClientTooSlow: the client fell more than its buffer behind the
	// console's output and was closed so the console does not wait for it.
	ErrClientTooSlow = errors.New("console: client fell too far behind the output")
)

// SpecError says which field of a Spec or Options is wrong and what was
// expected; Start returns it before touching any process or port.
type SpecError struct {
	NodeUUID string
	Field    string // "Spec.Command.Path", "Options.PortRange", ...
	Want     string
}

func (e *SpecError) Error() string {
	return fmt.Sprintf("console: node %s: %s: want %s", e.NodeUUID, e.Field, e.Want)
}

// StartError says why a console did not start: the node, the program and
// what it printed (secrets scrubbed).
type StartError struct {
	NodeUUID string
	Program  string // base name of Command.Path
	Output   string // the program's last output, scrubbed, at most 4 KiB
	Err      error
}

func (e *StartError) Error() string {
	s := fmt.Sprintf("console: node %s: starting %s: %v", e.NodeUUID, e.Program, e.Err)
	if e.Output != "" {
		s += ": " + e.Output
	}
	return s
}

func (e *StartError) Unwrap() error { return e.Err }

// Command is a program a console runs. Secrets go in Env, never in Args,
// where ps shows them. The program's environment is this process's PATH,
// TERM=xterm, then Env: nothing else of this process's environment (a
// database password, say) is passed on.
type Command struct {
	Path string
	Args []string
	Env  []string
}

// Spec describes one node's console.
type Spec struct {
	NodeUUID string
	// Command is the console itself, run under a pseudo-terminal: its
	// output is what the machine prints, its input the keyboard. When it
	// exits while the console is enabled it is started again, with
	// backoff.
	Command Command
	// Before, when set, runs to completion before every start of Command
	// (ipmitool's "sol deactivate", dropping a stale session); its
	// failure is logged, not fatal.
	Before *Command
	// Port is the TCP port of the raw console (ipmi_terminal_port); 0
	// takes one from Options.PortRange, or any free port.
	Port int
	// IdleTimeout closes an attached client after this long with no byte
	// in either direction; 0 means Options.IdleTimeout. The console
	// itself keeps running and recording.
	IdleTimeout time.Duration
	// Secrets are scrubbed from every log line, error and transcript
	// chunk Anvil writes (the BMC password), and from what clients see.
	Secrets []string
	// Ready, when set, is the text the program prints once it is up
	// (ipmitool's "[SOL Session operational"): Start waits for it. When
	// empty the program counts as up once it is still alive 100 ms after
	// starting.
	Ready string
}

// Options configures a Manager. Names follow Ironic's [console] options.
type Options struct {
	Logger *slog.Logger
	Clock  clock.Clock
	// BindAddress is where raw TCP consoles listen ([console]socat_address;
	// default 127.0.0.1).
	BindAddress string
	// PortRange is [console]port_range ("10000:20000"), inclusive; zero
	// means any free port.
	PortRange [2]int
	// IdleTimeout is [console]terminal_timeout (default 600 s).
	IdleTimeout time.Duration
	// SubprocessTimeout is [console]subprocess_timeout (default 10 s): how
	// long Start waits for the console program to come up, and Before to
	// finish.
	SubprocessTimeout time.Duration
	// KillTimeout is [console]kill_timeout (default 1 s): SIGTERM to the
	// process group, then SIGKILL after this long.
	KillTimeout time.Duration
	// TranscriptBytes bounds each session's in-memory transcript (default
	// 1 MiB); the oldest bytes go first, each chunk counting 64 bytes
	// beyond its own.
	TranscriptBytes int
	// TranscriptDir, when set, also appends each session's transcript to
	// <dir>/<node-uuid>.log (file mode 0600).
	TranscriptDir string
	// TokenTTL is how long an issued token may open a WebSocket (default
	// 10 minutes).
	TokenTTL time.Duration
}

// Mode is how a client attaches.
type Mode int

func (m Mode) String() string {
	switch m {
	case ReadOnly:
		return "read-only"
	case ReadWrite:
		return "read-write"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

const (
	// ReadOnly clients see the output; any number may attach.
	ReadOnly Mode = iota
	// ReadWrite is the one client whose bytes reach the machine.
	ReadWrite
)

// Info describes a running console.
type Info struct {
	NodeUUID  string
	Addr      string // host:port of the raw TCP console
	PID       int    // the console program's PID (0 between restarts)
	StartedAt time.Time
}

// URL is the raw console's address as Ironic's socat console reports it
// (tcp://host:port).
func (i Info) URL() string { return "tcp://" + i.Addr }

// Chunk is one piece of a transcript.
type Chunk struct {
	At    time.Time
	Input bool // typed by the read-write client, not printed by the machine
	Data  []byte
}

// Token lets its holder open one node's console over WebSocket until
// Expires.
type Token struct {
	Value    string
	NodeUUID string
	Mode     Mode
	Expires  time.Time
}
