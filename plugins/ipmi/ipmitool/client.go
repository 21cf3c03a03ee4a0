package ipmitool

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/driver"
)

// ErrNotInstalled is wrapped when the ipmitool binary cannot be found: the
// ipmi hardware type is then unavailable, with this as the reason.
var ErrNotInstalled = errors.New("ipmitool is not installed")

// ErrCommand is wrapped by every failed ipmitool invocation.
var ErrCommand = errors.New("ipmitool command failed")

// ErrTimeout is wrapped when the BMC did not reach a requested power
// state in time.
var ErrTimeout = errors.New("power state change timed out")

// CommandError is a failed ipmitool call: the operation, the BMC's
// address and port, why it failed (Class), what ipmitool printed (which
// never contains the password: it travels in the environment, and any
// echo of it is scrubbed), and, for a call retried until the retry
// timeout, the attempts made and the time spent. A CommandError of class
// FailAuth also matches driver.ErrBMCAuthentication, and one of class
// FailNoAnswer driver.ErrBMCUnreachable; the driver implementations turn
// those into *driver.BMCAuthError and *driver.BMCUnreachableError.
type CommandError struct {
	Op       string
	Endpoint string // host:port of the BMC
	Username string
	Class    Failure
	Output   string
	Attempts int
	Waited   time.Duration
	Err      error
}

func (e *CommandError) Error() string {
	msg := "ipmitool: " + e.Op + " failed"
	if e.Endpoint != "" {
		msg += " on " + e.Endpoint
	}
	switch e.Class {
	case FailAuth:
		msg += fmt.Sprintf(": the BMC refused the credentials of user %q", e.Username)
	case FailCipher:
		msg += ": the BMC does not support the cipher suite"
	case FailNoAnswer:
		msg += ": no answer from the BMC"
	case FailBusy:
		msg += ": the BMC is busy"
	}
	if e.Attempts > 1 || (e.Class.retryable() && e.Attempts > 0) {
		msg += fmt.Sprintf(" after %d attempt(s) in %s", e.Attempts, e.Waited.Round(10*time.Millisecond))
	}
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

// Is matches ErrCommand, and the driver's BMC sentinels for the
// authentication and no-answer classes.
func (e *CommandError) Is(target error) bool {
	switch target {
	case ErrCommand:
		return true
	case driver.ErrBMCAuthentication:
		return e.Class == FailAuth
	case driver.ErrBMCUnreachable:
		return e.Class == FailNoAnswer
	}
	return false
}

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

// Runner runs one ipmitool process: the binary, its arguments (never the
// password) and its environment (which holds it). It returns what the
// process wrote to stdout and stderr and its exit error; when ctx ends it
// must stop the process and return.
type Runner func(ctx context.Context, path string, args, env []string) (stdout, stderr string, err error)

// execRunner runs ipmitool as a child process.
func execRunner(ctx context.Context, path string, args, env []string) (string, string, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	cmd.WaitDelay = time.Second // a killed ipmitool's pipes must not hold the call
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// Options tunes a Client.
type Options struct {
	// IpmitoolPath is the binary; empty means "ipmitool" from $PATH.
	IpmitoolPath string
	// RetryTimeout bounds one operation, all its attempts included
	// (default 60 s, Ironic's [ipmi] command_retry_timeout). A BMC that
	// does not answer, or answers busy, is tried again until then; a
	// refused password or an unsupported cipher suite is not.
	RetryTimeout time.Duration
	// MinCommandInterval is the least time between the starts of two
	// attempts of one operation (default 5 s, Ironic's [ipmi]
	// min_command_interval), so a struggling BMC is not flooded.
	MinCommandInterval time.Duration
	// PowerTimeout bounds waiting for a power state change (default 60 s,
	// Ironic's power_state_change_timeout).
	PowerTimeout time.Duration
	// PollInterval is how often the power state is read while waiting
	// (default 1 s).
	PollInterval time.Duration
	// Sleep waits d or until ctx ends; tests may inject a fast one.
	Sleep func(ctx context.Context, d time.Duration) error
	// Run runs one ipmitool process (default: exec). When set, New and
	// NewDrivers do not look for the binary; tests use it to stand in
	// for ipmitool and a BMC.
	Run Runner
}

func (o *Options) defaults() {
	if o.RetryTimeout <= 0 {
		o.RetryTimeout = 60 * time.Second
	}
	if o.MinCommandInterval <= 0 {
		o.MinCommandInterval = 5 * time.Second
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

// lookup finds the binary, or trusts IpmitoolPath when Run stands in for
// it.
func (o *Options) lookup() (string, error) {
	if o.Run != nil {
		if o.IpmitoolPath == "" {
			return "ipmitool", nil
		}
		return o.IpmitoolPath, nil
	}
	return Lookup(o.IpmitoolPath)
}

// Client talks to one BMC by running ipmitool, one process per attempt,
// with the password in the environment (-E). It runs ipmitool itself
// rather than through bmclib's ipmitool provider because the provider
// merges the outputs of the cipher suites it tries and reports only the
// last (so a wrong password read as a cipher mismatch), fixes ipmitool's
// retry timing, and leaves out -v, without which ipmitool prints the same
// line for a wrong password and for a BMC that never answers.
//
// A Client may be used concurrently. It remembers the cipher suite it
// negotiated and the system GUID it read, for the one sequence of calls
// (one driver operation) it serves; a new Client reads them again.
type Client struct {
	info Info
	path string
	opts Options

	mu       sync.Mutex
	cipher   string // the negotiated suite, once one worked
	guidRead bool
	guid     string
}

// New returns a Client for info. It fails with ErrNotInstalled when
// ipmitool is missing; it does not contact the BMC.
func New(info Info, opts Options) (*Client, error) {
	opts.defaults()
	path, err := opts.lookup()
	if err != nil {
		return nil, err
	}
	if opts.Run == nil {
		opts.Run = execRunner
	}
	return &Client{info: info, path: path, opts: opts}, nil
}

// Info returns the validated driver_info.
func (c *Client) Info() Info { return c.info }

// Endpoint is the BMC's address and UDP port (623 when ipmi_port is
// unset), as errors name it.
func (c *Client) Endpoint() string {
	port := c.info.Port
	if port == 0 {
		port = 623
	}
	return net.JoinHostPort(c.info.Address, strconv.Itoa(port))
}

// ciphers returns the suites to try in order: the configured one, the
// one negotiated earlier, or 3 then 17 (the suites BMCs commonly offer;
// "" for IPMI 1.5, which has none).
func (c *Client) ciphers() []string {
	if c.info.ProtocolVersion == "1.5" {
		return []string{""}
	}
	if c.info.CipherSuite != "" {
		return []string{c.info.CipherSuite}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cipher != "" {
		return []string{c.cipher}
	}
	return []string{"3", "17"}
}

// args builds the session arguments for one attempt. The password is
// never an argument: -E makes ipmitool read IPMITOOL_PASSWORD from the
// environment. -v makes ipmitool say why a session failed (the RAKP
// outcome); -R 1 makes each process try once, since retries are the
// Client's, bounded by RetryTimeout and spaced by MinCommandInterval.
func (c *Client) args(cipher string) []string {
	return c.sessionArgs(cipher, "-v", "-R", "1", "-N", strconv.Itoa(attemptWaitSeconds))
}

// sessionArgs are the arguments every ipmitool session takes (interface,
// BMC address and port, privilege, user, -E), then extra, then the
// cipher suite; the console's invocations take no extra.
func (c *Client) sessionArgs(cipher string, extra ...string) []string {
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
	a = append(a, extra...)
	if cipher != "" {
		a = append(a, "-C", cipher)
	}
	return a
}

// attemptWaitSeconds is ipmitool's -N for one attempt: how long it waits
// for each answer (ipmitool's own default). A silent BMC costs about
// twice that per attempt (ipmitool asks twice for the authentication
// capabilities).
const attemptWaitSeconds = 2

// run executes ipmitool with the session arguments and the command, and
// returns its standard output. A BMC that does not answer, or answers
// busy, is tried again, each attempt starting at least MinCommandInterval
// after the previous one, until RetryTimeout has passed; then the error is
// a CommandError of that class naming the attempts and the time spent. A
// refused password (FailAuth) or a command the BMC answered with an error
// is returned at once; an unsupported cipher suite moves on to the next
// suite when the suite is negotiated.
func (c *Client) run(ctx context.Context, op string, command ...string) (string, error) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, c.opts.RetryTimeout)
	defer cancel()
	env := []string{"IPMITOOL_PASSWORD=" + c.info.Password, "PATH=" + os.Getenv("PATH")}
	ciphers := c.ciphers()
	attempts := 0
	var last *CommandError
	var lastStart time.Time
	var lastStdout string
loop:
	for ci := 0; ci < len(ciphers); {
		if attempts > 0 {
			wait := c.opts.MinCommandInterval - time.Since(lastStart)
			if dl, ok := rctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
				break loop // the next attempt could not start within the retry timeout
			}
			if wait > 0 {
				if err := c.opts.Sleep(rctx, wait); err != nil {
					break loop
				}
			}
		}
		attempts++
		lastStart = time.Now()
		stdout, stderr, err := c.opts.Run(rctx, c.path, append(c.args(ciphers[ci]), command...), env)
		if err == nil {
			if c.info.CipherSuite == "" && ciphers[ci] != "" {
				c.mu.Lock()
				c.cipher = ciphers[ci]
				c.mu.Unlock()
			}
			return strings.TrimSpace(stdout), nil
		}
		if cerr := callerGaveUp(ctx); cerr != nil { // not the BMC's fault
			return "", &CommandError{Op: op, Endpoint: c.Endpoint(), Output: c.scrub(quiet(stderr + "\n" + stdout)), Attempts: attempts, Waited: time.Since(start), Err: cerr}
		}
		output := c.scrub(stderr + "\n" + stdout)
		class, line := Classify(output, rctx.Err() != nil)
		prev := last
		lastStdout = strings.TrimSpace(stdout)
		last = &CommandError{Op: op, Endpoint: c.Endpoint(), Username: c.info.Username, Class: class, Output: quiet(output), Attempts: attempts}
		if line != "" {
			last.Output = line
		} else if class == FailNoAnswer && prev != nil && prev.Class == FailNoAnswer {
			last.Output = prev.Output // stopped at the deadline: what the attempt before said
		}
		if class == FailCommand {
			last.Err = err
		}
		switch {
		case class == FailCipher && ci+1 < len(ciphers):
			ci++
		case class.retryable() && rctx.Err() == nil:
		default:
			break loop
		}
	}
	if last == nil { // no attempt could start: the caller's time was up
		last = &CommandError{Op: op, Endpoint: c.Endpoint(), Class: FailNoAnswer, Err: rctx.Err()}
	}
	last.Waited = time.Since(start)
	if last.Class == FailCipher && len(ciphers) > 1 {
		last.Output = "suites " + strings.Join(ciphers, ", ") + " refused: " + last.Output
	}
	if last.Class == FailCommand { // the session worked: what the BMC did answer
		return c.scrub(lastStdout), last
	}
	return "", last
}

// callerGaveUp is ctx's error, or context.DeadlineExceeded once ctx's
// deadline has passed even if its timer has not fired yet (on a loaded
// machine it fires late, and an attempt that ended after the caller's
// deadline would otherwise be blamed on the BMC); nil while the caller
// still waits.
func callerGaveUp(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// scrub removes the password from text, in case a BMC echoes it.
func (c *Client) scrub(text string) string {
	if c.info.Password != "" {
		text = strings.ReplaceAll(text, c.info.Password, "******")
	}
	return text
}

// PowerState reads the chassis power state: true when on.
func (c *Client) PowerState(ctx context.Context) (bool, error) {
	out, err := c.run(ctx, "power status", "power", "status")
	if err != nil {
		return false, err
	}
	return c.parsePower(out)
}

func (c *Client) parsePower(out string) (bool, error) {
	switch {
	case strings.Contains(out, "Chassis Power is on"):
		return true, nil
	case strings.Contains(out, "Chassis Power is off"):
		return false, nil
	}
	return false, &CommandError{Op: "power status", Endpoint: c.Endpoint(), Output: c.scrub(strings.TrimSpace(out)), Err: errors.New("unrecognised answer")}
}

// PowerStateAndGUID reads the system GUID (as SystemGUID does) and the
// power state in one ipmitool session (ipmitool's exec with a command
// file holding "raw 0x06 0x37" and "power status"), so that checking the
// machine's identity on every power read costs no second session. When
// the GUID was already read by this Client only the power state is read.
func (c *Client) PowerStateAndGUID(ctx context.Context) (on bool, guid string, err error) {
	c.mu.Lock()
	read, guid := c.guidRead, c.guid
	c.mu.Unlock()
	if read {
		on, err := c.PowerState(ctx)
		return on, guid, err
	}
	f, err := os.CreateTemp("", "anvil-ipmitool-*.cmds")
	if err != nil {
		return false, "", fmt.Errorf("ipmitool: command file: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString("raw 0x06 0x37\npower status\n") // no secret: the file only names commands
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, "", fmt.Errorf("ipmitool: command file: %w", err)
	}
	out, err := c.run(ctx, "power status", "exec", f.Name())
	var guidLine string
	var powerLines []string
	for _, l := range strings.Split(out, "\n") {
		if _, perr := parseRaw(l); perr == nil && strings.TrimSpace(l) != "" && guidLine == "" {
			guidLine = l
			continue
		}
		powerLines = append(powerLines, l)
	}
	if err != nil {
		var ce *CommandError
		if !errors.As(err, &ce) || ce.Class != FailCommand || !completionCodeRe.MatchString(ce.Output) || guidLine != "" {
			return false, "", err
		}
		// Get System GUID answered with a completion code (unsupported);
		// the power status that followed in the session stands.
	} else if guid, err = formatGUID(guidLine); err != nil {
		return false, "", err
	}
	on, err = c.parsePower(strings.Join(powerLines, "\n"))
	if err != nil {
		return false, "", err
	}
	c.mu.Lock()
	c.guidRead, c.guid = true, guid
	c.mu.Unlock()
	return on, guid, nil
}

// power sends a chassis power command ("on", "off", "soft", "reset").
func (c *Client) power(ctx context.Context, action string) error {
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
		var ce *CommandError
		if errors.As(err, &ce) && (ce.Class == FailAuth || ce.Class == FailCipher) {
			return err // asking again cannot help
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
	_, err := c.run(ctx, "chassis power diag", "chassis", "power", "diag")
	return err
}

// ResetBMC restarts the BMC itself: warm or cold.
func (c *Client) ResetBMC(ctx context.Context, warm bool) error {
	kind := "cold"
	if warm {
		kind = "warm"
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

// ChassisStatus is what "chassis status" reports: the power state and
// the chassis's fault flags (IPMI Get Chassis Status).
type ChassisStatus struct {
	PowerOn           bool
	PowerOverload     bool
	MainPowerFault    bool
	PowerControlFault bool
	DriveFault        bool
	CoolingFault      bool
}

// ChassisStatus reads the chassis status ("chassis status").
func (c *Client) ChassisStatus(ctx context.Context) (ChassisStatus, error) {
	out, err := c.run(ctx, "chassis status", "chassis", "status")
	if err != nil {
		return ChassisStatus{}, err
	}
	return parseChassisStatus(out)
}

// ClearSEL empties the BMC's system event log.
func (c *Client) ClearSEL(ctx context.Context) error {
	_, err := c.run(ctx, "sel clear", "sel", "clear")
	return err
}

// SystemGUID reads the machine's system GUID (Get System GUID, network
// function 0x06 command 0x37) as 32 lower-case hex digits in 8-4-4-4-12
// groups, in the byte order the BMC sends (ipmitool's "mc guid" prints
// the same digits). It returns "" when the BMC does not implement the
// command (it answers with a completion code) or reports an all-zero
// GUID. The first answer is kept for the Client's lifetime, so the
// power-state polls of one operation do not read it again.
func (c *Client) SystemGUID(ctx context.Context) (string, error) {
	c.mu.Lock()
	if c.guidRead {
		defer c.mu.Unlock()
		return c.guid, nil
	}
	c.mu.Unlock()
	out, err := c.run(ctx, "get system guid", "raw", "0x06", "0x37")
	guid := ""
	if err != nil {
		var ce *CommandError
		if !errors.As(err, &ce) || ce.Class != FailCommand || !completionCodeRe.MatchString(ce.Output) {
			return "", err
		}
	} else if guid, err = formatGUID(out); err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.guidRead, c.guid = true, guid
	return guid, nil
}

// completionCodeRe matches ipmitool's report of a request the BMC
// answered with a completion code ("Unable to send RAW command
// (channel=0x0 netfn=0x6 lun=0x0 cmd=0x37 rsp=0xc1): Invalid command").
var completionCodeRe = regexp.MustCompile(`Unable to send RAW command \(.*rsp=0x[0-9a-f]{2}\)`)

// formatGUID formats the 16 bytes of a Get System GUID answer.
func formatGUID(out string) (string, error) {
	b, err := parseRaw(out)
	if err != nil {
		return "", err
	}
	if len(b) != 16 {
		return "", &CommandError{Op: "get system guid", Output: out, Err: fmt.Errorf("%d bytes, want 16", len(b))}
	}
	zero := true
	for _, x := range b {
		if x != 0 {
			zero = false
		}
	}
	if zero {
		return "", nil
	}
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}
