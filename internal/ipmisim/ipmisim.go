// Package ipmisim starts simulated IPMI BMCs for tests: OpenIPMI's
// ipmi_sim (Debian package openipmi) on a loopback UDP port, with a
// generated configuration whose chassis-control hook keeps a real power
// state and boot device in files the test can read and change.
//
// The simulator lacks cipher suite 17 and the "Get Channel Cipher Suites"
// command, so clients must use cipher suite 3 (ipmitool -C 3); otherwise
// ipmitool spends about ten seconds per call falling back. It keeps the
// boot device but not the persistent or EFI flags.
//
// Tests needing the simulator call Require, which skips with a one-line
// reason unless ANVIL_TEST_IPMI_SIM=1 is set, and fails when it is set but
// ipmi_sim or ipmitool is missing.
//
// With Options.SOL the BMC also has a serial-over-LAN device: ipmi_sim
// connects it to a TCP address, where a Machine (NewMachine) stands for
// the machine's serial port, so that a test reads what was typed into
// "ipmitool sol activate" and writes what the machine prints.
//
// # Usage
//
//	func TestPower(t *testing.T) {
//		ipmisim.Require(t)
//		bmc := ipmisim.Start(t, ipmisim.Options{})
//		// bmc.Port, bmc.Username, bmc.Password; bmc.Power(), bmc.Boot()
//	}
//
//	func TestConsole(t *testing.T) {
//		ipmisim.Require(t)
//		m := ipmisim.NewMachine(t)
//		bmc := ipmisim.Start(t, ipmisim.Options{SOL: m.Addr()})
//		// ipmitool ... sol activate; m.Print(ctx, "login: "), m.WaitTyped(ctx, "root\r")
//	}
package ipmisim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EnvVar is the environment variable that enables simulator tests.
const EnvVar = "ANVIL_TEST_IPMI_SIM"

// ErrNotInstalled is returned by Check when ipmi_sim or ipmitool is
// missing.
var ErrNotInstalled = errors.New("ipmisim: ipmi_sim or ipmitool not installed (apt-get install -y openipmi ipmitool)")

// Check reports whether the simulator and ipmitool are installed.
func Check() error {
	for _, bin := range []string{"ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrNotInstalled, bin, err)
		}
	}
	return nil
}

// Require skips t unless ANVIL_TEST_IPMI_SIM=1, and fails it when the
// variable is set but the tools are missing.
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvVar) != "1" {
		t.Skipf("IPMI simulator tests disabled: set %s=1 (needs openipmi and ipmitool)", EnvVar)
	}
	if err := Check(); err != nil {
		t.Fatal(err)
	}
}

// Options configures a simulated BMC.
type Options struct {
	// Username and Password of the admin user (defaults admin/password;
	// the password is at most 16 characters).
	Username string
	Password string
	// PoweredOn starts the simulated machine powered on.
	PoweredOn bool
	// SOL, when set, is a TCP address ("127.0.0.1:port") that ipmi_sim
	// connects its serial-over-LAN device to, relaying the bytes of an
	// activated SOL session ("ipmitool sol activate") without telnet
	// processing (lan.conf's sol "tcp:host:port"; ipmi_sim connects at
	// start and keeps trying while nothing listens). A Machine listens
	// there; a QEMU -serial tcp server would do as well.
	SOL string
	// IPv6 makes the BMC listen on ::1 instead of 127.0.0.1 (BMC.Addr
	// is then "::1").
	IPv6 bool
}

// BMC is one running simulator.
type BMC struct {
	Addr     string
	Port     int
	Username string
	Password string

	dir string
	cmd *exec.Cmd
	// waitDone is closed when the process has exited.
	waitDone chan struct{}
}

// hook is the chassis-control program ipmi_sim runs: "get power|boot"
// prints "parm:value" lines, "set parm value ..." records the change.
const hook = `#!/bin/sh
d="$(dirname "$0")"
op="$1"; shift
log() { echo "$*" >>"$d/events.log"; }
case "$op" in
get)
  for p in "$@"; do
    case "$p" in
      power) echo "power:$(cat "$d/power")" ;;
      boot) echo "boot:$(cat "$d/boot")" ;;
      *) echo "Invalid parameter: $p"; exit 1 ;;
    esac
  done ;;
set)
  while [ $# -gt 0 ]; do
    p="$1"; v="$2"; shift 2 || { echo "No value for $p"; exit 1; }
    case "$p" in
      power) echo "$v" >"$d/power"; log "power $v" ;;
      reset) echo $(( $(cat "$d/resets") + 1 )) >"$d/resets"; log "reset $v" ;;
      shutdown) echo 0 >"$d/power"; log "shutdown $v" ;;
      boot) case "$v" in none|pxe|default|cdrom|bios) ;; *) echo "Invalid boot value: $v"; exit 1 ;; esac
            echo "$v" >"$d/boot"; log "boot $v" ;;
      identify) shift 1 2>/dev/null || true; log "identify $v" ;;
      *) echo "Invalid parameter: $p"; exit 1 ;;
    esac
  done ;;
*) exit 1 ;;
esac
`

// Start runs a simulated BMC for the duration of t and stops it (by its
// own process ID) in t.Cleanup.
func Start(t testing.TB, opts Options) *BMC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := Launch(ctx, t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// Launch starts a simulated BMC with its files in dir and waits until it
// answers. The caller must Close it.
func Launch(ctx context.Context, dir string, opts Options) (*BMC, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if opts.Username == "" {
		opts.Username = "admin"
	}
	if opts.Password == "" {
		opts.Password = "password"
	}
	if len(opts.Password) > 16 {
		return nil, errors.New("ipmisim: password longer than 16 characters")
	}
	if opts.SOL != "" {
		if _, _, err := net.SplitHostPort(opts.SOL); err != nil || strings.ContainsAny(opts.SOL, "\" \n") {
			return nil, fmt.Errorf("ipmisim: Options.SOL %q is not a host:port", opts.SOL)
		}
	}
	for attempt := 0; ; attempt++ {
		port, err := freeUDPPort(opts.IPv6)
		if err != nil {
			return nil, err
		}
		b, err := launch(ctx, dir, port, opts)
		if err == nil || attempt >= 2 || ctx.Err() != nil {
			return b, err
		}
	}
}

func freeUDPPort(v6 bool) (int, error) {
	network, addr := "udp4", "127.0.0.1:0"
	if v6 {
		network, addr = "udp6", "[::1]:0"
	}
	c, err := net.ListenPacket(network, addr)
	if err != nil {
		return 0, fmt.Errorf("ipmisim: find a free port: %w", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

func launch(ctx context.Context, parent string, port int, opts Options) (*BMC, error) {
	dir := filepath.Join(parent, "bmc-"+strconv.Itoa(port))
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o755); err != nil {
		return nil, fmt.Errorf("ipmisim: %w", err)
	}
	power := "0"
	if opts.PoweredOn {
		power = "1"
	}
	host := "127.0.0.1"
	if opts.IPv6 {
		host = "::1"
	}
	files := map[string]string{
		"power": power + "\n", "boot": "none\n", "resets": "0\n", "events.log": "",
		"bmc.emu": "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nsel_enable 0x20 1000 0x0a\nmc_enable 0x20\n",
		"lan.conf": fmt.Sprintf(`name "anvil%d"
set_working_mc 0x20
  startlan 1
    addr %s %d
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a1b2c3d4e5f6%020x
  endlan
  chassis_control "%s"
%s  user 2 true "%s" "%s" admin 10 none md2 md5 straight
`, port, host, port, port, filepath.Join(dir, "chassis"), solLine(opts.SOL), opts.Username, opts.Password),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, fmt.Errorf("ipmisim: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "chassis"), []byte(hook), 0o755); err != nil {
		return nil, fmt.Errorf("ipmisim: %w", err)
	}
	logf, err := os.Create(filepath.Join(dir, "ipmi_sim.log"))
	if err != nil {
		return nil, fmt.Errorf("ipmisim: %w", err)
	}
	cmd := exec.Command("ipmi_sim", "-n", "-c", filepath.Join(dir, "lan.conf"), "-f", filepath.Join(dir, "bmc.emu"), "-s", filepath.Join(dir, "state"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("ipmisim: start ipmi_sim: %w", err)
	}
	b := &BMC{Addr: host, Port: port, Username: opts.Username, Password: opts.Password, dir: dir, cmd: cmd, waitDone: make(chan struct{})}
	go func() { // owned by b; ends when the process exits (Close kills it)
		_ = cmd.Wait()
		logf.Close()
		close(b.waitDone)
	}()
	if err := b.waitReady(ctx); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// solLine is lan.conf's sol directive for a TCP serial device at addr,
// or nothing.
func solLine(addr string) string {
	if addr == "" {
		return ""
	}
	return fmt.Sprintf("  sol \"tcp:%s\" 115200\n", addr)
}

func (b *BMC) waitReady(ctx context.Context) error {
	for {
		select {
		case <-b.waitDone:
			log, _ := os.ReadFile(filepath.Join(b.dir, "ipmi_sim.log"))
			return fmt.Errorf("ipmisim: ipmi_sim on port %d exited: %s", b.Port, strings.TrimSpace(string(log)))
		default:
		}
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		cmd := exec.CommandContext(c, "ipmitool", "-I", "lanplus", "-C", "3", "-H", b.Addr, "-p", strconv.Itoa(b.Port),
			"-U", b.Username, "-E", "-R", "1", "-N", "1", "power", "status")
		cmd.Env = append(os.Environ(), "IPMITOOL_PASSWORD="+b.Password)
		err := cmd.Run()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ipmisim: BMC on port %d did not answer: %w", b.Port, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close stops the simulator (SIGTERM, then SIGKILL after 5 s) and waits
// for it to exit.
func (b *BMC) Close() error {
	if b.cmd.Process == nil {
		return nil
	}
	select {
	case <-b.waitDone:
		return nil
	default:
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.waitDone:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.waitDone
	}
	return nil
}

func (b *BMC) read(name string) string {
	v, _ := os.ReadFile(filepath.Join(b.dir, name))
	return strings.TrimSpace(string(v))
}

// Power reports whether the simulated machine is on.
func (b *BMC) Power() bool { return b.read("power") == "1" }

// SetPower flips the simulated power out of band, as if someone pressed
// the button or the machine crashed.
func (b *BMC) SetPower(on bool) error {
	v := "0\n"
	if on {
		v = "1\n"
	}
	return os.WriteFile(filepath.Join(b.dir, "power"), []byte(v), 0o644)
}

// Boot returns the boot device the simulator holds: none, pxe, default
// (disk), cdrom or bios.
func (b *BMC) Boot() string { return b.read("boot") }

// Resets returns how many hard resets the BMC received.
func (b *BMC) Resets() int {
	n, _ := strconv.Atoi(b.read("resets"))
	return n
}

// Events returns the chassis-control events recorded so far, oldest
// first, such as "power 1" or "boot pxe".
func (b *BMC) Events() []string {
	f, err := os.Open(filepath.Join(b.dir, "events.log"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
