package ipmitool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	bmcipmitool "github.com/bmc-toolbox/bmclib/v2/providers/ipmitool"
)

// ErrNotInstalled is wrapped when the ipmitool binary cannot be found: the
// ipmi hardware type is then unavailable, with this as the reason.
var ErrNotInstalled = errors.New("ipmitool is not installed")

// ErrCommand is wrapped by every failed ipmitool invocation.
var ErrCommand = errors.New("ipmitool command failed")

// ErrTimeout is wrapped when the BMC did not reach a requested power
// state in time.
var ErrTimeout = errors.New("power state change timed out")

// CommandError is a failed ipmitool call: the operation, ipmitool's
// output (which never contains the password: it travels in the
// environment) and the underlying error.
type CommandError struct {
	Op     string
	Output string
	Err    error
}

func (e *CommandError) Error() string {
	msg := "ipmitool: " + e.Op + " failed"
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Output != "" && (e.Err == nil || !strings.Contains(e.Err.Error(), e.Output)) {
		msg += ": " + e.Output
	}
	return msg
}

// Unwrap returns the cause.
func (e *CommandError) Unwrap() error { return e.Err }

// Is matches ErrCommand.
func (e *CommandError) Is(target error) bool { return target == ErrCommand }

// Lookup finds the ipmitool binary: path when set, otherwise $PATH. The
// error wraps ErrNotInstalled and says what to install.
func Lookup(path string) (string, error) {
	if path == "" {
		path = "ipmitool"
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("ipmitool: %w (install the ipmitool package): %w", ErrNotInstalled, err)
	}
	return p, nil
}

// Options tunes a Client.
type Options struct {
	// IpmitoolPath is the binary; empty means "ipmitool" from $PATH.
	IpmitoolPath string
	// CallTimeout bounds one ipmitool invocation (default 60 s).
	CallTimeout time.Duration
	// PowerTimeout bounds waiting for a power state change (default 60 s,
	// Ironic's power_state_change_timeout).
	PowerTimeout time.Duration
	// PollInterval is how often the power state is read while waiting
	// (default 1 s).
	PollInterval time.Duration
	// Sleep waits d or until ctx ends; tests may inject a fast one.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (o *Options) defaults() {
	if o.CallTimeout <= 0 {
		o.CallTimeout = 60 * time.Second
	}
	if o.PowerTimeout <= 0 {
		o.PowerTimeout = 60 * time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.Sleep == nil {
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// Client talks to one BMC. Power, boot device, NMI and BMC reset go
// through bmclib's ipmitool provider when the session is one bmclib can
// express (IPMI 2.0 at ADMINISTRATOR privilege); other sessions, and the
// commands bmclib lacks (boot device read-back, sensors, raw), run
// ipmitool directly with the same arguments. A Client is stateless and
// safe for concurrent use.
type Client struct {
	info Info
	path string
	opts Options
	bmc  *bmcipmitool.Conn // nil when the session needs options bmclib lacks
}

// New returns a Client for info. It fails with ErrNotInstalled when
// ipmitool is missing; it does not contact the BMC.
func New(info Info, opts Options) (*Client, error) {
	opts.defaults()
	path, err := Lookup(opts.IpmitoolPath)
	if err != nil {
		return nil, err
	}
	c := &Client{info: info, path: path, opts: opts}
	if info.ProtocolVersion == "2.0" && info.PrivLevel == "ADMINISTRATOR" {
		bopts := []bmcipmitool.Option{bmcipmitool.WithIpmitoolPath(path)}
		if info.Port != 0 {
			bopts = append(bopts, bmcipmitool.WithPort(strconv.Itoa(info.Port)))
		}
		if info.CipherSuite != "" {
			bopts = append(bopts, bmcipmitool.WithCipherSuite(info.CipherSuite))
		}
		c.bmc, err = bmcipmitool.New(info.Address, info.Username, info.Password, bopts...)
		if err != nil {
			return nil, fmt.Errorf("ipmitool: %w", err)
		}
	}
	return c, nil
}

// UsesBMCLib reports whether calls go through bmclib's provider.
func (c *Client) UsesBMCLib() bool { return c.bmc != nil }

// Info returns the validated driver_info.
func (c *Client) Info() Info { return c.info }

// args builds the session arguments. The password is never an argument:
// -E makes ipmitool read IPMITOOL_PASSWORD from the environment.
func (c *Client) args() []string {
	iface := "lanplus"
	if c.info.ProtocolVersion == "1.5" {
		iface = "lan"
	}
	a := []string{"-I", iface, "-H", c.info.Address, "-L", c.info.PrivLevel}
	if c.info.Port != 0 {
		a = append(a, "-p", strconv.Itoa(c.info.Port))
	}
	if c.info.Username != "" {
		a = append(a, "-U", c.info.Username)
	}
	a = append(a, "-E")
	if iface == "lanplus" && c.info.CipherSuite != "" {
		a = append(a, "-C", c.info.CipherSuite)
	}
	return a
}

// run executes ipmitool with the session arguments and the command.
func (c *Client) run(ctx context.Context, op string, command ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.path, append(c.args(), command...)...)
	cmd.Env = []string{"IPMITOOL_PASSWORD=" + c.info.Password, "PATH=" + os.Getenv("PATH")}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	text := strings.TrimSpace(stdout.String())
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		detail := strings.TrimSpace(stderr.String() + "\n" + text)
		return text, &CommandError{Op: op, Output: c.scrub(detail), Err: err}
	}
	return text, nil
}

// scrub removes the password from text, in case a BMC echoes it.
func (c *Client) scrub(text string) string {
	if c.info.Password != "" {
		text = strings.ReplaceAll(text, c.info.Password, "******")
	}
	return text
}

// wrap turns a bmclib error into a CommandError; when ctx ended, the
// cause is the context's error so callers can tell a deadline apart.
func (c *Client) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return &CommandError{Op: op, Output: c.scrub(strings.TrimSpace(err.Error())), Err: ctx.Err()}
	}
	return &CommandError{Op: op, Err: errors.New(c.scrub(strings.TrimSpace(err.Error())))}
}

// PowerState reads the chassis power state: true when on.
func (c *Client) PowerState(ctx context.Context) (bool, error) {
	var out string
	var err error
	if c.bmc != nil {
		cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		out, err = c.bmc.PowerStateGet(cctx)
		err = c.wrap(cctx, "power status", err)
		cancel()
	} else {
		out, err = c.run(ctx, "power status", "power", "status")
	}
	if err != nil {
		return false, err
	}
	switch {
	case strings.Contains(out, "Chassis Power is on"):
		return true, nil
	case strings.Contains(out, "Chassis Power is off"):
		return false, nil
	}
	return false, &CommandError{Op: "power status", Output: c.scrub(strings.TrimSpace(out)), Err: errors.New("unrecognised answer")}
}

// power sends a chassis power command ("on", "off", "soft", "reset").
func (c *Client) power(ctx context.Context, action string) error {
	if c.bmc != nil {
		cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		defer cancel()
		_, err := c.bmc.PowerSet(cctx, action)
		return c.wrap(cctx, "power "+action, err)
	}
	_, err := c.run(ctx, "power "+action, "power", action)
	return err
}

// waitPower polls until the power state is want or the power timeout
// passes.
func (c *Client) waitPower(ctx context.Context, want bool, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = c.opts.PowerTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		on, err := c.PowerState(ctx)
		if err == nil && on == want {
			return nil
		}
		if serr := c.opts.Sleep(ctx, c.opts.PollInterval); serr != nil {
			state := "off"
			if want {
				state = "on"
			}
			if err != nil {
				return fmt.Errorf("ipmitool: waiting for power %s on %s: %w: %w", state, c.info.Address, ErrTimeout, err)
			}
			return fmt.Errorf("ipmitool: power %s on %s not reached within %s: %w", state, c.info.Address, timeout, ErrTimeout)
		}
	}
}

// PowerOn turns the machine on and waits until it reports on.
func (c *Client) PowerOn(ctx context.Context, timeout time.Duration) error {
	if err := c.power(ctx, "on"); err != nil {
		return err
	}
	return c.waitPower(ctx, true, timeout)
}

// PowerOff turns the machine off hard and waits until it reports off.
func (c *Client) PowerOff(ctx context.Context, timeout time.Duration) error {
	if err := c.power(ctx, "off"); err != nil {
		return err
	}
	return c.waitPower(ctx, false, timeout)
}

// SoftPowerOff asks the OS to shut down (ACPI) and waits until off.
func (c *Client) SoftPowerOff(ctx context.Context, timeout time.Duration) error {
	if err := c.power(ctx, "soft"); err != nil {
		return err
	}
	return c.waitPower(ctx, false, timeout)
}

// Reboot powers off hard, then on, as Ironic's ipmitool driver does
// (some BMCs ignore "power reset" on a machine that is off).
func (c *Client) Reboot(ctx context.Context, timeout time.Duration) error {
	if err := c.PowerOff(ctx, timeout); err != nil {
		return err
	}
	return c.PowerOn(ctx, timeout)
}

// SoftReboot shuts down softly, then powers on.
func (c *Client) SoftReboot(ctx context.Context, timeout time.Duration) error {
	if err := c.SoftPowerOff(ctx, timeout); err != nil {
		return err
	}
	return c.PowerOn(ctx, timeout)
}

// SetBootDevice sets the next boot device: pxe, disk, cdrom, bios, safe.
func (c *Client) SetBootDevice(ctx context.Context, device string, persistent, efi bool) error {
	if c.bmc != nil {
		cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		defer cancel()
		_, err := c.bmc.BootDeviceSet(cctx, device, persistent, efi)
		return c.wrap(cctx, "chassis bootdev "+device, err)
	}
	cmd := []string{"chassis", "bootdev", device}
	var o []string
	if persistent {
		o = append(o, "persistent")
	}
	if efi {
		o = append(o, "efiboot")
	}
	if len(o) > 0 {
		cmd = append(cmd, "options="+strings.Join(o, ","))
	}
	_, err := c.run(ctx, "chassis bootdev "+device, cmd...)
	return err
}

// BootDevice is the boot device as the BMC reports it.
type BootDevice struct {
	Device     string // pxe, disk, cdrom, bios, safe, or "" when none is forced
	Persistent bool
	EFI        bool
}

// BootDevice reads boot parameter 5 (boot flags) and decodes it.
func (c *Client) BootDevice(ctx context.Context) (BootDevice, error) {
	out, err := c.run(ctx, "chassis bootparam get 5", "chassis", "bootparam", "get", "5")
	if err != nil {
		return BootDevice{}, err
	}
	return parseBootParam(out)
}

// NMI injects a non-maskable interrupt (chassis power diag).
func (c *Client) NMI(ctx context.Context) error {
	if c.bmc != nil {
		cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		defer cancel()
		return c.wrap(cctx, "chassis power diag", c.bmc.SendNMI(cctx))
	}
	_, err := c.run(ctx, "chassis power diag", "chassis", "power", "diag")
	return err
}

// ResetBMC restarts the BMC itself: warm or cold.
func (c *Client) ResetBMC(ctx context.Context, warm bool) error {
	kind := "cold"
	if warm {
		kind = "warm"
	}
	if c.bmc != nil {
		cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		defer cancel()
		_, err := c.bmc.BmcReset(cctx, kind)
		return c.wrap(cctx, "mc reset "+kind, err)
	}
	_, err := c.run(ctx, "mc reset "+kind, "mc", "reset", kind)
	return err
}

// Raw sends a raw IPMI request (network function, command, data bytes)
// and returns the response bytes.
func (c *Client) Raw(ctx context.Context, netfn, cmd byte, data []byte) ([]byte, error) {
	args := []string{"raw", fmt.Sprintf("0x%02x", netfn), fmt.Sprintf("0x%02x", cmd)}
	for _, b := range data {
		args = append(args, fmt.Sprintf("0x%02x", b))
	}
	out, err := c.run(ctx, "raw", args...)
	if err != nil {
		return nil, err
	}
	return parseRaw(out)
}

// Sensor is one sensor reading.
type Sensor struct {
	Name    string `json:"name"`
	Reading string `json:"reading"`
	Unit    string `json:"unit,omitempty"`
	Status  string `json:"status"`
}

// Sensors reads the sensor data repository ("sdr elist full"). A BMC
// without sensors yields an empty list.
func (c *Client) Sensors(ctx context.Context) ([]Sensor, error) {
	out, err := c.run(ctx, "sdr list", "sdr", "elist", "full")
	if err != nil {
		var ce *CommandError
		if errors.As(err, &ce) && isEmptySDR(ce.Output) {
			return nil, nil
		}
		return nil, err
	}
	return parseSensors(out), nil
}

// ClearSEL empties the BMC's system event log.
func (c *Client) ClearSEL(ctx context.Context) error {
	if c.bmc != nil {
		cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		defer cancel()
		return c.wrap(cctx, "sel clear", c.bmc.ClearSystemEventLog(cctx))
	}
	_, err := c.run(ctx, "sel clear", "sel", "clear")
	return err
}
