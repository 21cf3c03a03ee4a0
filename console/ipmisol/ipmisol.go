package ipmisol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
)

// Name is the console interface's name, as Ironic names it.
const Name = ipmitool.ImplSocatConsole

// Keys of driver_internal_info the console interface writes while a
// node's console runs and removes when it stops; other code may read
// them but must not set them.
const (
	// InternalAddress is the running console's host:port, so that any
	// conductor (not only the one running it) can answer GetConsole.
	InternalAddress = "ipmi_console_address"
	// InternalAllocatedPort is the TCP port taken from the console port
	// range when driver_info has no ipmi_terminal_port (Ironic's key and
	// meaning, so a node moved from Ironic keeps it).
	InternalAllocatedPort = "allocated_ipmi_terminal_port"
)

// IdleTimeoutKey is the optional driver_info key (whole seconds, at
// least 1) that overrides Options.IdleTimeout for one node's console: a
// node whose operators leave a client attached for long (a serial log
// watched all day) or one that should free its console sooner.
const IdleTimeoutKey = "console_idle_timeout"

// DeactivateTimeout bounds the "sol deactivate" StopConsole runs.
const DeactivateTimeout = 10 * time.Second

// Options configures the console interface.
type Options struct {
	// IPMI tunes the ipmitool calls made outside the console itself
	// (cipher suite negotiation, sol deactivate on stop): the binary and
	// the retry timing, as for the ipmitool power interface.
	IPMI ipmitool.Options
	// Host, when set, is the host put in console URLs instead of the
	// listener's own address: the name clients reach the conductor by
	// when the Manager listens on a wildcard address.
	Host string
	// IdleTimeout overrides the Manager's idle timeout for these
	// consoles; zero keeps the Manager's ([console]terminal_timeout). A
	// node's driver_info console_idle_timeout (IdleTimeoutKey) overrides
	// both for that node.
	IdleTimeout time.Duration
	// Logger receives what StopConsole cannot return (a failed sol
	// deactivate); default slog.Default(). The BMC password never reaches
	// it.
	Logger *slog.Logger
}

// Console is the ipmitool-socat console interface. It is safe for
// concurrent use; it keeps no per-node state of its own (the Manager
// holds the running consoles, driver_internal_info their addresses).
type Console struct {
	m          *console.Manager
	opts       Options
	missingErr error
}

// New returns the console interface running consoles in m. It looks for
// ipmitool once; when it is missing the interface still describes
// itself and reports itself unavailable (Unavailable). It panics when m
// is nil, a mistake of the program found at start.
func New(m *console.Manager, opts Options) *Console {
	if m == nil {
		panic("ipmisol: New: nil *console.Manager")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var missing error
	if opts.IPMI.Run == nil {
		_, missing = ipmitool.Lookup(opts.IPMI.IpmitoolPath)
	}
	return &Console{m: m, opts: opts, missingErr: missing}
}

// Bundle returns the implementation alone: the ipmi hardware type that
// lists it is declared by the ipmi plugin (or ipmitool.NewDrivers in
// process). It runs in the process that owns the Manager, never in a
// plugin, since a console is a long-running process and a TCP port on
// the conductor host.
func (c *Console) Bundle() driver.Bundle {
	return driver.Bundle{Implementations: []driver.Implementation{{Kind: driver.KindConsole, Name: Name, Impl: c}}}
}

// Properties returns the ipmi driver_info properties (ipmi_terminal_port
// among them) and console_idle_timeout.
func (c *Console) Properties() []driver.Property {
	ps := ipmitool.Properties()
	out := make([]driver.Property, 0, len(ps)+1)
	for _, p := range ps {
		out = append(out, driver.Property{Name: p.Name, Description: p.Description, Required: p.Required})
	}
	return append(out, driver.Property{Name: IdleTimeoutKey,
		Description: "Seconds a client attached to the node's console may stay silent before it is disconnected; overrides the conductor's console idle timeout for this node. Optional."})
}

// Unavailable returns a *driver.UnavailableError when ipmitool is not
// installed, or nil.
func (c *Console) Unavailable() error {
	return driver.NewUnavailableError(driver.KindConsole, Name, c.missingErr)
}

// Validate checks the ipmi_* driver_info, ipmi_terminal_port included,
// and that ipmitool is installed, without contacting the BMC.
func (c *Console) Validate(ctx context.Context, t *driver.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := c.info(t); err != nil {
		return err
	}
	return c.Unavailable()
}

// maxIdleSeconds bounds console_idle_timeout: beyond 68 years the
// nanoseconds of a time.Duration would not hold it anyway.
const maxIdleSeconds = math.MaxInt32

// consoleInfo is the console's reading of driver_info: the ipmi_* keys
// and the node's idle timeout (zero: the interface's or Manager's).
type consoleInfo struct {
	ipmitool.Info
	idle time.Duration
}

func (c *Console) info(t *driver.Task) (consoleInfo, error) {
	r := driver.ReadDriverInfo(t, driver.KindConsole, Name)
	info, err := ipmitool.ParseInfo(r)
	if err != nil {
		return consoleInfo{Info: info}, err
	}
	ci := consoleInfo{Info: info}
	if n, ok := r.Int(IdleTimeoutKey, false, 1, maxIdleSeconds); ok {
		ci.idle = time.Duration(n) * time.Second
	}
	return ci, r.Err()
}

// client returns an ipmitool client for the node.
func (c *Console) client(t *driver.Task) (*ipmitool.Client, consoleInfo, error) {
	info, err := c.info(t)
	if err != nil {
		return nil, info, err
	}
	if err := c.Unavailable(); err != nil {
		return nil, info, err
	}
	cl, err := ipmitool.New(info.Info, c.opts.IPMI)
	if err != nil {
		return nil, info, c.wrap(t, "connect", err)
	}
	return cl, info, nil
}

// StartConsole starts (or restarts) the node's serial-over-LAN console:
// "sol deactivate" first, dropping a session a killed console left on
// the BMC, then "sol activate" under a pseudo-terminal, up once ipmitool
// prints SOL's operational banner, on ipmi_terminal_port or a port from
// the Manager's range. It records the console's address in
// driver_internal_info. A refused password is a *driver.BMCAuthError; a
// console that did not come up is a *console.StartError.
func (c *Console) StartConsole(ctx context.Context, t *driver.Task) error {
	cl, info, err := c.client(t)
	if err != nil {
		return err
	}
	sol, err := cl.SOL(ctx)
	if err != nil {
		return c.wrap(t, "start console", err)
	}
	spec := console.Spec{
		NodeUUID:    t.NodeUUID,
		Command:     command(sol.Activate),
		Before:      new(command(sol.Deactivate)),
		Ready:       ipmitool.SOLReady,
		Port:        info.TerminalPort,
		IdleTimeout: c.opts.IdleTimeout,
	}
	if info.idle > 0 {
		spec.IdleTimeout = info.idle
	}
	if info.Password != "" {
		spec.Secrets = []string{info.Password}
	}
	ci, err := c.m.Start(ctx, spec)
	if err != nil {
		return c.wrap(t, "start console", err)
	}
	t.SetDriverInternalInfo(InternalAddress, ci.Addr)
	if info.TerminalPort == 0 {
		if _, p, err := net.SplitHostPort(ci.Addr); err == nil {
			if n, err := strconv.Atoi(p); err == nil {
				t.SetDriverInternalInfo(InternalAllocatedPort, n)
			}
		}
	} else {
		t.DeleteDriverInternalInfo(InternalAllocatedPort)
	}
	return nil
}

// StopConsole stops the node's console, then asks the BMC to drop the
// SOL session ("sol deactivate", as Ironic does; its failure is logged,
// since the console is stopped either way and the next start drops a
// stale session first), and removes the recorded address. Stopping a
// console that is not running is not an error.
func (c *Console) StopConsole(ctx context.Context, t *driver.Task) error {
	if err := c.m.Stop(ctx, t.NodeUUID); err != nil {
		return c.wrap(t, "stop console", err)
	}
	t.DeleteDriverInternalInfo(InternalAddress)
	t.DeleteDriverInternalInfo(InternalAllocatedPort)
	if err := c.deactivate(ctx, t); err != nil {
		c.opts.Logger.Warn("sol deactivate after stopping the console failed", "node", t.NodeUUID, "interface", Name, "error", err.Error())
	}
	return nil
}

// deactivate runs "sol deactivate" once, bounded by DeactivateTimeout.
// Exit status 1 is ipmitool's "SOL payload already de-activated".
func (c *Console) deactivate(ctx context.Context, t *driver.Task) error {
	cl, info, err := c.client(t)
	if err != nil {
		return err
	}
	sol, err := cl.SOL(ctx)
	if err != nil {
		return c.wrap(t, "sol deactivate", err)
	}
	ctx, cancel := context.WithTimeout(ctx, DeactivateTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, sol.Deactivate.Path, sol.Deactivate.Args...)
	cmd.Env = sol.Deactivate.Env
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err == nil || (errors.As(err, &ee) && ee.ExitCode() == 1 && ctx.Err() == nil) {
		return nil
	}
	return fmt.Errorf("%s/%s: node %s: sol deactivate on %s: %w: %s", driver.KindConsole, Name, t.NodeUUID, cl.Endpoint(), err, scrub(string(out), info.Password))
}

// GetConsole returns the console's address as Ironic's socat console
// does: type "socat", URL tcp://host:port. It answers from the Manager
// when the console runs in this process and from driver_internal_info
// otherwise, so any conductor can answer. Without a running console it
// fails with an error matching console.ErrNoSession.
func (c *Console) GetConsole(ctx context.Context, t *driver.Task) (driver.ConsoleInfo, error) {
	if err := ctx.Err(); err != nil {
		return driver.ConsoleInfo{}, err
	}
	addr := ""
	if ci, ok := c.m.Info(t.NodeUUID); ok {
		addr = ci.Addr
	} else if s, ok := t.DriverInternalInfo[InternalAddress].(string); ok && s != "" {
		addr = s
	}
	if addr == "" {
		return driver.ConsoleInfo{}, fmt.Errorf("%s/%s: node %s: %w", driver.KindConsole, Name, t.NodeUUID, console.ErrNoSession)
	}
	if c.opts.Host != "" {
		if _, p, err := net.SplitHostPort(addr); err == nil {
			addr = net.JoinHostPort(c.opts.Host, p)
		}
	}
	return driver.ConsoleInfo{Type: "socat", URL: console.Info{Addr: addr}.URL()}, nil
}

// wrap names the node, the interface and the operation in err; a refused
// password becomes a *driver.BMCAuthError and a BMC that never answered
// a *driver.BMCUnreachableError, as the ipmitool interfaces do.
func (c *Console) wrap(t *driver.Task, op string, err error) error {
	var ce *ipmitool.CommandError
	if errors.As(err, &ce) {
		detail := op
		if ce.Output != "" {
			detail += ": " + ce.Output
		}
		switch ce.Class {
		case ipmitool.FailAuth:
			return &driver.BMCAuthError{Node: t.NodeUUID, Kind: driver.KindConsole, Impl: Name, Address: ce.Endpoint, Username: ce.Username, Detail: detail}
		case ipmitool.FailNoAnswer:
			return &driver.BMCUnreachableError{Node: t.NodeUUID, Kind: driver.KindConsole, Impl: Name, Address: ce.Endpoint,
				Attempts: ce.Attempts, Waited: ce.Waited.Round(10 * time.Millisecond).String(), Detail: detail}
		}
	}
	var se *console.StartError
	if errors.As(err, &se) { // it names the node already
		return fmt.Errorf("%s/%s: %s: %w", driver.KindConsole, Name, op, err)
	}
	return fmt.Errorf("%s/%s: node %s: %s: %w", driver.KindConsole, Name, t.NodeUUID, op, err)
}

// command is inv as the console package runs it.
func command(inv ipmitool.Invocation) console.Command {
	return console.Command{Path: inv.Path, Args: inv.Args, Env: inv.Env}
}

// scrub removes the password from text.
func scrub(text, password string) string {
	if password == "" {
		return text
	}
	return strings.ReplaceAll(text, password, "******")
}

// Compile-time checks.
var (
	_ driver.ConsoleInterface     = (*Console)(nil)
	_ driver.AvailabilityReporter = (*Console)(nil)
)
