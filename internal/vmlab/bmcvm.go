package vmlab

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// IPMISimBinary is Debian's IPMI simulator (package openipmi).
const IPMISimBinary = "ipmi_sim"

// Disk is a disk image a BMCMachine attaches as a virtio block device.
type Disk struct {
	// Path is a raw image file.
	Path string
	// Serial is the device's serial number (what root device hints and
	// IPA's inventory see); empty means none.
	Serial string
}

// BMCMachineOptions describe a virtual machine with an IPMI BMC.
type BMCMachineOptions struct {
	// Name names the machine in logs and in ipmi_sim's configuration.
	Name string
	// MAC is the NIC's address, lower case with colons.
	MAC string
	// MemoryMB defaults to 1024 (what the IPA ramdisk needs); CPUs to 1.
	MemoryMB, CPUs int
	// Disks are attached in order (vda, vdb, ...).
	Disks []Disk
	// Username and Password of the BMC's admin user; default admin and
	// password (at most 16 characters).
	Username, Password string
	// Dir holds the BMC's and the machine's files; required, and short
	// (Unix socket paths live in it).
	Dir string
	// Firmware is BIOS (default) or UEFI (OVMF with the machine's own
	// variable store in Dir, kept across power cycles).
	Firmware Firmware
	// NoROM (UEFI): the NIC without iPXE's option ROM, so that OVMF's
	// own PXE boots it (machineQEMU).
	NoROM bool
	// SecureBoot (UEFI): OVMF's secure boot build with Microsoft's keys
	// enrolled and secure boot on (machineQEMU.SecureBoot).
	SecureBoot bool
	// Logger: nil is slog.Default().
	Logger *slog.Logger
}

// BMCMachine is a QEMU virtual machine (TCG) on a Network whose BMC is
// Debian's ipmi_sim, listening on 127.0.0.1 in the host's namespace for
// IPMI over LAN (lanplus, cipher suite 3), as a real server's BMC would:
// Chassis Control powers the machine on (QEMU starts in the namespace,
// its boot order taken from the boot device last set through the BMC:
// pxe is the network, default the disk), off (QEMU ends) and resets it
// (QEMU is restarted, so that a boot device set meanwhile applies);
// power status is whether QEMU runs, so a guest that powers itself off
// reads as off. ipmi_sim reaches the harness through its chassis_control
// program, a shell script writing to a FIFO the harness reads: every
// QEMU is the harness's own process, stopped by PID. The machine also
// has an in-band BMC device (QEMU's isa-ipmi-bt over ipmi-bmc-extern,
// connected to ipmi_sim's VM serial interface), so the agent's ipmitool
// finds a BMC; and ipmi_sim's serial-over-LAN device carries the
// machine's serial console ("ipmitool sol activate"), which the harness
// also keeps, across every boot, in Console.
type BMCMachine struct {
	// Addr and Port are the BMC's IPMI LAN address (UDP).
	Addr               string
	Port               int
	Username, Password string
	// MAC is the NIC's address; Tap its tap device.
	MAC, Tap string
	// Console is the serial console of every boot, in one transcript;
	// ConsoleLog a file with the same bytes, for a person to follow.
	Console    *Console
	ConsoleLog string

	con  *consoleRelay
	opts BMCMachineOptions
	n    *Network
	log  *slog.Logger
	dir  string
	sim  *Process
	slot *slot

	ipmiLn, solLn net.Listener
	fifo          *os.File

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce // its mu guards what follows
	qemu      *Process
	solConn   net.Conn // ipmi_sim's SOL connection
	starts    []time.Time
	events    []string

	httpBoot atomic.Bool // SetHTTPBoot
}

// vars is the machine's UEFI variable store.
func (m *BMCMachine) vars() string { return filepath.Join(m.dir, "OVMF_VARS.fd") }

// SetHTTPBoot changes the UEFI machine's network boot, from its next
// power on, to UEFI HTTP boot only (OVMF's PXE off), as an operator
// changes a server's firmware setting; false is PXE again.
func (m *BMCMachine) SetHTTPBoot(on bool) { m.httpBoot.Store(on) }

// chassisHook is ipmi_sim's chassis_control program: "get" answers from
// the files the harness keeps; "set boot" records the boot device;
// "set power|reset|shutdown" asks the harness through the FIFO and waits
// for its answer file.
const chassisHook = `#!/bin/sh
d="$(dirname "$0")"
op="$1"; shift
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
      boot)
        case "$v" in none|pxe|default|cdrom|bios) ;; *) echo "Invalid boot value: $v"; exit 1 ;; esac
        echo "$v" >"$d/boot.tmp" && mv "$d/boot.tmp" "$d/boot"
        echo "boot $v" >"$d/ctl" ;;
      power|reset|shutdown)
        id="$$-$(date +%s%N)"
        echo "$p $v $id" >"$d/ctl"
        i=0
        while [ ! -e "$d/ack/$id" ]; do
          i=$((i + 1))
          [ $i -gt 600 ] && { echo "no answer from the harness"; exit 1; }
          sleep 0.1
        done
        a="$(cat "$d/ack/$id")"; rm -f "$d/ack/$id"
        [ "$a" = ok ] || { echo "$a"; exit 1; } ;;
      identify) shift 1 2>/dev/null || true ;;
      *) echo "Invalid parameter: $p"; exit 1 ;;
    esac
  done ;;
*) exit 1 ;;
esac
`

// StartBMCMachine starts the machine's BMC, powered off. It waits
// (bounded by ctx) for one of the machine-wide VM slots, held until
// Close. Without ipmi_sim, ipmitool or QEMU the error wraps
// ErrUnavailable.
func StartBMCMachine(ctx context.Context, n *Network, o BMCMachineOptions) (*BMCMachine, error) {
	if err := checkMachine("machine", o.MAC, "Debian packages openipmi, ipmitool, qemu-system-x86", IPMISimBinary, "ipmitool", QEMUBinary); err != nil {
		return nil, err
	}
	if o.Dir == "" {
		return nil, errors.New("vmlab: BMCMachineOptions.Dir is required")
	}
	o.Name = cmp.Or(o.Name, "vm")
	o.MemoryMB = cmp.Or(o.MemoryMB, 1024)
	o.CPUs = cmp.Or(o.CPUs, 1)
	o.Username = cmp.Or(o.Username, "admin")
	o.Password = cmp.Or(o.Password, "password")
	if len(o.Password) > 16 || strings.ContainsAny(o.Password+o.Username, "\"\n\\") {
		return nil, errors.New("vmlab: BMC username or password: want at most 16 characters, no quote, backslash or newline")
	}
	if o.SecureBoot && o.Firmware != UEFI {
		return nil, errors.New("vmlab: secure boot needs UEFI firmware")
	}
	log := cmp.Or(o.Logger, slog.Default())
	m := &BMCMachine{Addr: "127.0.0.1", Username: o.Username, Password: o.Password, MAC: o.MAC,
		opts: o, n: n, log: log, dir: o.Dir}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	ok := false
	defer closeUnless(&ok, m)
	var err error
	if m.Tap, err = n.AddTap(ctx); err != nil {
		return nil, err
	}
	for _, f := range []struct{ name, text string }{{"power", "0\n"}, {"boot", "none\n"}} {
		if err := os.WriteFile(filepath.Join(m.dir, f.name), []byte(f.text), 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(m.dir, "ack"), 0o755); err != nil {
		return nil, err
	}
	switch o.Firmware {
	case "", BIOS:
	case UEFI:
		if err := newUEFIVars(m.vars(), o.SecureBoot); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("vmlab: firmware %q: want %q or %q", o.Firmware, BIOS, UEFI)
	}
	if err := unix.Mkfifo(filepath.Join(m.dir, "ctl"), 0o600); err != nil {
		return nil, fmt.Errorf("vmlab: BMC control FIFO: %w", err)
	}
	// O_RDWR: the harness holds a writer too, so the reader never sees
	// end of file between two hook runs.
	if m.fifo, err = os.OpenFile(filepath.Join(m.dir, "ctl"), os.O_RDWR, 0); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(m.dir, "chassis"), []byte(chassisHook), 0o755); err != nil {
		return nil, err
	}

	// The console: QEMU connects to the relay at each start; every
	// boot's bytes go into one Console, and to ipmi_sim's SOL.
	if m.con, err = newConsoleRelay(m.dir, m.toSOL); err != nil {
		return nil, err
	}
	m.Console, m.ConsoleLog = m.con.console, m.con.logPath
	// The in-band BMC device: QEMU connects to ipmiLn; the relay dials
	// ipmi_sim's VM interface on the host's loopback.
	if m.ipmiLn, err = net.Listen("unix", filepath.Join(m.dir, "ipmi.sock")); err != nil {
		return nil, fmt.Errorf("vmlab: BMC device socket: %w", err)
	}
	// SOL: ipmi_sim connects here and gets the console.
	if m.solLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	vmPort, err := freeTCPPort()
	if err != nil {
		return nil, err
	}
	if m.Port, err = freeUDPPort(); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`name "%s"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 %d
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a1b2c3d4e5f6%020x
  endlan
  serial 15 127.0.0.1 %d codec VM
  chassis_control "%s"
  sol "tcp:%s" 115200
  user 2 true "%s" "%s" admin 10 none md2 md5 straight
`, o.Name, m.Port, m.Port, vmPort, filepath.Join(m.dir, "chassis"), m.solLn.Addr(), o.Username, o.Password)
	emu := "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nsel_enable 0x20 1000 0x0a\nmc_enable 0x20\n"
	if err := os.WriteFile(filepath.Join(m.dir, "lan.conf"), []byte(conf), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(m.dir, "bmc.emu"), []byte(emu), 0o644); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(m.dir, "state"), 0o700); err != nil {
		return nil, err
	}
	simLog, err := os.Create(filepath.Join(m.dir, "ipmi_sim.log"))
	if err != nil {
		return nil, err
	}
	defer simLog.Close()
	// In the host's namespace (not through ip netns exec): the conductor
	// reaches the BMC on the loopback, as a BMC network apart from the
	// provisioning network.
	cmd := exec.Command(IPMISimBinary, "-n", "-c", filepath.Join(m.dir, "lan.conf"), "-f", filepath.Join(m.dir, "bmc.emu"), "-s", filepath.Join(m.dir, "state"))
	cmd.Stdout, cmd.Stderr = simLog, simLog
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if m.sim, err = n.Start("ipmi_sim "+o.Name, cmd); err != nil {
		return nil, err
	}
	m.wg.Add(4)
	go m.control()
	go m.con.serve(&m.wg)
	go m.relayBMCDevice(vmPort)
	go m.acceptSOL()
	if err := m.waitReady(ctx); err != nil {
		return nil, err
	}
	if err := m.configureLAN(ctx); err != nil {
		return nil, err
	}
	if m.slot, err = acquireSlot(ctx, slotDir()); err != nil {
		return nil, err
	}
	ok = true
	return m, nil
}

// IPMITool returns an ipmitool command addressing the BMC (lanplus,
// cipher suite 3), with the password in the environment (-E), never in
// the arguments.
func (m *BMCMachine) IPMITool(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ipmitool", append([]string{"-I", "lanplus", "-C", "3", "-H", m.Addr,
		"-p", strconv.Itoa(m.Port), "-U", m.Username, "-E", "-R", "2", "-N", "2"}, args...)...)
	cmd.Env = append(os.Environ(), "IPMI_PASSWORD="+m.Password)
	return cmd
}

// configureLAN gives the BMC's LAN channel (1) the address it listens on
// and a MAC, as a real BMC's LAN configuration has: ipmi_sim starts with
// 0.0.0.0 and 00:00:00:00:00:00, and the agent's inventory then asks
// channels 1 to 11 in turn for an address and a MAC (22 in-band ipmitool
// runs, seconds each under TCG) before it gives up. The MAC is the
// machine's with the high bit of its last octet flipped.
func (m *BMCMachine) configureLAN(ctx context.Context) error {
	mac, err := net.ParseMAC(m.opts.MAC)
	if err != nil || len(mac) != 6 {
		return fmt.Errorf("vmlab: BMC of %s: MAC %q: want six octets", m.opts.Name, m.opts.MAC)
	}
	bmcMAC := append(net.HardwareAddr(nil), mac...)
	bmcMAC[5] ^= 0x80
	for _, set := range [][]string{
		{"ipsrc", "static"}, {"ipaddr", m.Addr}, {"netmask", "255.0.0.0"}, {"macaddr", bmcMAC.String()},
	} {
		if out, err := m.IPMITool(ctx, append([]string{"lan", "set", "1"}, set...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("vmlab: BMC of %s: lan set 1 %s: %v: %s", m.opts.Name, strings.Join(set, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

func (m *BMCMachine) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := m.IPMITool(ctx, "power", "status").CombinedOutput()
		if err == nil {
			return nil
		}
		select {
		case <-m.sim.Done():
			b, _ := os.ReadFile(filepath.Join(m.dir, "ipmi_sim.log"))
			return fmt.Errorf("vmlab: ipmi_sim exited: %v: %s", m.sim.err, b)
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("vmlab: the BMC did not answer: %v: %s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Powered reports whether QEMU runs.
func (m *BMCMachine) Powered() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running()
}

func (m *BMCMachine) running() bool { return m.qemu.Running() }

// Starts returns when QEMU was started, each time.
func (m *BMCMachine) Starts() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Time(nil), m.starts...)
}

// Events returns what the BMC was asked to do, in order, each with its
// time ("15:04:05.000 power 1").
func (m *BMCMachine) Events() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.events...)
}

// control serves the chassis hook's requests until Close.
func (m *BMCMachine) control() {
	defer m.wg.Done()
	r := bufio.NewReaderSize(m.fifo, 512)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		m.mu.Lock()
		m.events = append(m.events, time.Now().Format("15:04:05.000")+" "+f[0]+" "+f[1])
		m.mu.Unlock()
		if f[0] == "boot" || len(f) < 3 {
			continue
		}
		answer := "ok"
		if err := m.chassis(f[0], f[1]); err != nil {
			m.log.Warn("vmlab: BMC chassis control failed", "machine", m.opts.Name, "op", f[0], "err", err)
			answer = strings.ReplaceAll(err.Error(), "\n", " ")
		}
		id := filepath.Base(f[2])
		_ = os.WriteFile(filepath.Join(m.dir, "ack", id), []byte(answer), 0o644)
	}
}

// chassis carries out one chassis control request.
func (m *BMCMachine) chassis(op, val string) error {
	switch {
	case op == "power" && val == "1":
		return m.powerOn()
	case op == "power" && val == "0", op == "shutdown":
		return m.powerOff()
	case op == "reset":
		if !m.Powered() {
			return nil // a reset of a machine that is off does nothing
		}
		if err := m.powerOff(); err != nil {
			return err
		}
		return m.powerOn()
	}
	return fmt.Errorf("unknown request %s %s", op, val)
}

func (m *BMCMachine) setPowerFile(on bool) {
	v := "0\n"
	if on {
		v = "1\n"
	}
	tmp := filepath.Join(m.dir, "power.tmp")
	if err := os.WriteFile(tmp, []byte(v), 0o644); err == nil {
		_ = os.Rename(tmp, filepath.Join(m.dir, "power"))
	}
}

// bootOrder maps the boot device set through the BMC to QEMU's order.
func (m *BMCMachine) bootOrder() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "boot"))
	switch strings.TrimSpace(string(b)) {
	case "pxe":
		return "n"
	case "default", "bios":
		return "c"
	case "cdrom":
		return "d"
	}
	return "cn" // no override: the disk, then the network
}

func (m *BMCMachine) powerOn() error {
	if err := m.lockOpen("machine closed"); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if m.running() {
		return nil
	}
	args := machineQEMUArgs(machineQEMU{Name: m.opts.Name, MemoryMB: m.opts.MemoryMB, CPUs: m.opts.CPUs,
		Console: m.con.addr(), Tap: m.Tap, MAC: m.MAC, Order: m.bootOrder(), Disks: m.opts.Disks,
		Firmware: m.opts.Firmware, Vars: m.vars(), NoROM: m.opts.NoROM, NoPXE: m.httpBoot.Load(), SecureBoot: m.opts.SecureBoot})
	args = append(args,
		"-chardev", "socket,id=ipmi0,path="+m.ipmiLn.Addr().String()+",reconnect=2",
		"-device", "ipmi-bmc-extern,chardev=ipmi0,id=bmc0",
		"-device", "isa-ipmi-bt,bmc=bmc0")
	cmd := m.n.Command(QEMUBinary, args...)
	stderr := &boundedBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	p, err := m.n.Start("qemu "+m.opts.Name, cmd)
	if err != nil {
		return err
	}
	m.qemu = p
	m.starts = append(m.starts, time.Now())
	m.setPowerFile(true)
	m.log.Debug("vmlab: machine powered on", "machine", m.opts.Name, "pid", p.PID(), "args", strings.Join(args, " "))
	m.wg.Add(1)
	go func() { // ends when QEMU exits
		defer m.wg.Done()
		<-p.Done()
		m.mu.Lock()
		if m.qemu == p {
			m.setPowerFile(false)
		}
		m.mu.Unlock()
		if p.err != nil && !strings.Contains(p.err.Error(), "signal") {
			m.log.Warn("vmlab: QEMU exited", "machine", m.opts.Name, "err", p.err, "output", stderr.String())
		}
	}()
	return nil
}

func (m *BMCMachine) powerOff() error {
	m.mu.Lock()
	p := m.qemu
	m.mu.Unlock()
	if p == nil {
		return nil
	}
	// SIGTERM: QEMU flushes its disks and exits.
	err := p.Stop(10 * time.Second)
	m.mu.Lock()
	m.setPowerFile(false)
	m.mu.Unlock()
	return err
}

// toSOL copies console output to ipmi_sim's SOL connection, when there
// is one.
func (m *BMCMachine) toSOL(b []byte) {
	m.mu.Lock()
	sol := m.solConn
	m.mu.Unlock()
	if sol != nil {
		_ = sol.SetWriteDeadline(time.Now().Add(2 * time.Second))
		if _, err := sol.Write(b); err != nil {
			sol.Close()
		}
	}
}

// acceptSOL takes ipmi_sim's SOL connections; what arrives on one (typed
// into an activated SOL session) goes to the running QEMU's console.
func (m *BMCMachine) acceptSOL() {
	defer m.wg.Done()
	serveLatest(m.solLn, &m.mu, &m.solConn, func(c net.Conn) {
		m.wg.Add(1)
		go func() { // ends when the connection closes
			defer m.wg.Done()
			buf := make([]byte, 1024)
			for {
				k, err := c.Read(buf)
				if vm := m.con.current(); k > 0 && vm != nil {
					_, _ = vm.Write(buf[:k])
				}
				if err != nil {
					c.Close()
					return
				}
			}
		}()
	})
}

// relayBMCDevice joins each QEMU's BMC device connection to ipmi_sim's
// VM interface on the host's loopback (QEMU, in the namespace, cannot
// reach it; the file system is shared).
func (m *BMCMachine) relayBMCDevice(port int) {
	defer m.wg.Done()
	for {
		c, err := m.ipmiLn.Accept()
		if err != nil {
			return
		}
		var d net.Dialer
		dctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
		s, err := d.DialContext(dctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		cancel()
		if err != nil {
			c.Close()
			continue
		}
		m.wg.Add(1)
		go func() { // ends when either side closes (Close closes the listener; QEMU's exit closes c)
			defer m.wg.Done()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(s, c)
				s.Close()
				close(done)
			}()
			stop := context.AfterFunc(m.ctx, func() { c.Close(); s.Close() })
			defer stop()
			_, _ = io.Copy(c, s)
			c.Close()
			<-done
		}()
	}
}

// Close stops QEMU and ipmi_sim (by PID), the relays and the console, and
// frees the VM slot. It is idempotent.
func (m *BMCMachine) Close() error {
	var p *Process
	if !m.begin(func() { p = m.qemu }) {
		return nil
	}
	var errs []error
	if p != nil {
		errs = append(errs, p.Stop(5*time.Second))
	}
	if m.sim != nil {
		errs = append(errs, m.sim.Stop(5*time.Second))
	}
	m.cancel()
	for _, c := range []io.Closer{m.ipmiLn, m.solLn, m.fifo} {
		if c != nil {
			c.Close()
		}
	}
	m.mu.Lock()
	if m.solConn != nil {
		m.solConn.Close()
	}
	m.mu.Unlock()
	m.con.stop(&m.wg)
	m.slot.release()
	return errors.Join(errs...)
}

func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func freeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// machineQEMU is what a lab machine's QEMU has whatever its BMC.
type machineQEMU struct {
	Name           string
	MemoryMB, CPUs int
	// Console is the Unix socket QEMU connects its serial port to.
	Console  string
	Tap, MAC string
	// Order is the boot order (c disk, d CD-ROM, n network): QEMU's
	// -boot order under SeaBIOS, the devices' bootindex under OVMF
	// (which reads only those), devices the order leaves out after it.
	Order string
	Disks []Disk
	// Firmware is BIOS (SeaBIOS, the default) or UEFI: OVMF's code
	// read-only and Vars, the machine's own variable store (a copy of
	// OVMFVars that lives as long as the machine, so that the boot
	// entries an OS installer makes survive power cycles, as a real
	// machine's NVRAM does).
	Firmware Firmware
	Vars     string
	// NoROM (UEFI) drops the NIC's iPXE option ROM: OVMF's own PXE asks
	// for a boot file by its client architecture (option 93), as a real
	// machine's UEFI network stack does. NoPXE turns OVMF's PXE off, so
	// that it boots the NIC by UEFI HTTP boot.
	NoROM, NoPXE bool
	// SecureBoot (UEFI) runs OVMFSecureCode on a q35 machine with SMM
	// and its flash secure (the secure boot build keeps its variables
	// behind SMM); Vars must then be a copy of OVMFSecureVars, with
	// Microsoft's keys enrolled and secure boot on.
	SecureBoot bool
}

// newUEFIVars copies OVMF's variable store template to path, for a
// machine's UEFI firmware: OVMFSecureVars for secure boot, else
// OVMFVars. Without OVMF the error wraps ErrUnavailable.
func newUEFIVars(path string, secureBoot bool) error {
	code, vars := OVMFCode, OVMFVars
	if secureBoot {
		code, vars = OVMFSecureCode, OVMFSecureVars
	}
	for _, f := range []string{code, vars} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%w: %s (Debian package ovmf)", ErrUnavailable, f)
		}
	}
	return copyFile(vars, path)
}

// bootIndex is the ",bootindex=N" of a device of kind c (disk), d
// (CD-ROM) or n (network) under UEFI: its place in Order, the kinds the
// order leaves out after it; "" under SeaBIOS or for a disk but the
// first.
func (q machineQEMU) bootIndex(kind byte) string {
	if q.Firmware != UEFI {
		return ""
	}
	order := q.Order
	for _, k := range "cdn" {
		if !strings.ContainsRune(order, k) {
			order += string(k)
		}
	}
	return ",bootindex=" + strconv.Itoa(strings.IndexByte(order, kind))
}

// machineQEMUArgs are the QEMU arguments of a lab machine (TCG, SeaBIOS
// or OVMF, serial console to a socket, a virtio NIC on its tap, virtio
// disks), to which a BMC adds its own devices.
func machineQEMUArgs(q machineQEMU) []string {
	machine, code := "pc,graphics=off", OVMFCode
	if q.Firmware == UEFI && q.SecureBoot {
		machine, code = "q35,smm=on,graphics=off", OVMFSecureCode
	}
	args := []string{
		"-name", q.Name,
		"-accel", "tcg",
		"-machine", machine,
		"-m", strconv.Itoa(q.MemoryMB),
		"-smp", strconv.Itoa(q.CPUs),
		"-nodefaults", "-display", "none", "-vga", "none",
		"-chardev", "socket,id=con0,path=" + q.Console,
		"-serial", "chardev:con0",
		"-netdev", "tap,id=net0,ifname=" + q.Tap + ",script=no,downscript=no",
	}
	nic := "virtio-net-pci,netdev=net0,mac=" + q.MAC + q.bootIndex('n')
	if q.Firmware == UEFI {
		if q.NoROM {
			nic += ",romfile="
		}
		if q.SecureBoot {
			args = append(args, "-global", "driver=cfi.pflash01,property=secure,value=on")
		}
		args = append(args,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+code,
			"-drive", "if=pflash,format=raw,unit=1,file="+q.Vars)
		if q.NoPXE {
			args = append(args,
				"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=n",
				"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n")
		}
	} else {
		args = append(args, "-boot", "order="+q.Order)
	}
	args = append(args, "-device", nic)
	for i, d := range q.Disks {
		id := "disk" + strconv.Itoa(i)
		dev := "virtio-blk-pci,drive=" + id
		if d.Serial != "" {
			dev += ",serial=" + d.Serial
		}
		if i == 0 {
			dev += q.bootIndex('c')
		}
		args = append(args, "-drive", "file="+d.Path+",format=raw,if=none,id="+id, "-device", dev)
	}
	return args
}
