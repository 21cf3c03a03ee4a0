package vmlab

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// RedfishMachineOptions describe a virtual machine with a Redfish BMC.
type RedfishMachineOptions struct {
	// Name names the machine in logs; also the system's Name.
	Name string
	// MAC is the NIC's address, lower case with colons.
	MAC string
	// MemoryMB defaults to 1024 (what the IPA ramdisk needs); CPUs to 1.
	MemoryMB, CPUs int
	// Disks are attached in order (vda, vdb, ...).
	Disks []Disk
	// Username and Password of the BMC (HTTP Basic); default admin and
	// password.
	Username, Password string
	// SystemID is the ComputerSystem's Id; default "vm".
	SystemID string
	// MaxMediaSize bounds a virtual media image (default 1 GiB);
	// MediaFetchTimeout its download (default 5 minutes).
	MaxMediaSize      int64
	MediaFetchTimeout time.Duration
	// Dir holds the BMC's and the machine's files; required, and short
	// (Unix socket paths live in it).
	Dir string
	// Firmware is BIOS (default) or UEFI (OVMF with the machine's own
	// variable store in Dir, kept across power cycles); NoROM (UEFI):
	// the NIC without iPXE's option ROM (machineQEMU).
	Firmware Firmware
	NoROM    bool
	// Logger: nil is slog.Default().
	Logger *slog.Logger
}

// RedfishMachine is a QEMU virtual machine (TCG) on a Network whose BMC
// is a Redfish service on 127.0.0.1 in the host's namespace (HTTP, Basic
// authentication), as sushy-tools' emulator is for libvirt machines: one
// ComputerSystem whose ComputerSystem.Reset starts QEMU in the lab
// namespace (On; its boot order from the boot override: Cd the CD-ROM,
// Pxe the network, Hdd the disk; a Once override is spent by that boot),
// stops it by PID (ForceOff; GracefulShutdown asks the guest through QMP
// system_powerdown first, for at most 30 s) or both (ForceRestart), and
// whose PowerState is whether QEMU runs; and a Manager with one CD
// virtual media device: InsertMedia downloads the image (bounded in size
// and time) into a local file, which goes into the running QEMU's empty
// ide-cd drive through QMP blockdev-change-medium and on the command
// line of the next start; EjectMedia empties it. Refusals are as strict
// as a real BMC's, with a Redfish error body: an unknown ResetType, a
// boot override value not in its AllowableValues, a property that is not
// writable, an InsertMedia into a full drive, a body over 64 KiB. The
// serial console of every boot is kept in Console.
type RedfishMachine struct {
	// URL is the BMC's address (http://127.0.0.1:port).
	URL                string
	Username, Password string
	// SystemID is the ComputerSystem's Id, UUID its UUID.
	SystemID, UUID string
	// MAC is the NIC's address; Tap its tap device.
	MAC, Tap string
	// Console is the serial console of every boot, in one transcript;
	// ConsoleLog a file with the same bytes.
	Console    *Console
	ConsoleLog string

	svc    *rfService
	hw     *qemuHardware
	srv    *http.Server
	ln     net.Listener
	con    *consoleRelay
	slot   *slot
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce
}

// StartRedfishMachine starts the machine's BMC, powered off, with an
// empty CD drive. It waits (bounded by ctx) for one of the machine-wide
// VM slots, held until Close. Without QEMU the error wraps
// ErrUnavailable.
func StartRedfishMachine(ctx context.Context, n *Network, o RedfishMachineOptions) (*RedfishMachine, error) {
	if err := checkMachine("machine", o.MAC, "Debian package qemu-system-x86", QEMUBinary); err != nil {
		return nil, err
	}
	if o.Dir == "" {
		return nil, errors.New("vmlab: RedfishMachineOptions.Dir is required")
	}
	o.Name = cmp.Or(o.Name, "vm")
	o.SystemID = cmp.Or(o.SystemID, "vm")
	o.Username = cmp.Or(o.Username, "admin")
	o.Password = cmp.Or(o.Password, "password")
	o.MemoryMB = cmp.Or(o.MemoryMB, 1024)
	o.CPUs = cmp.Or(o.CPUs, 1)
	log := cmp.Or(o.Logger, slog.Default())
	mac := strings.ReplaceAll(o.MAC, ":", "")
	m := &RedfishMachine{Username: o.Username, Password: o.Password, SystemID: o.SystemID, MAC: o.MAC,
		UUID: "a1b2c3d4-e5f6-4000-8000-" + mac}
	var bctx context.Context
	bctx, m.cancel = context.WithCancel(context.Background())
	ok := false
	defer closeUnless(&ok, m)
	var err error
	if m.Tap, err = n.AddTap(ctx); err != nil {
		return nil, err
	}
	mediaDir := filepath.Join(o.Dir, "media")
	if err := os.MkdirAll(mediaDir, 0o700); err != nil {
		return nil, err
	}
	if m.con, err = newConsoleRelay(o.Dir, nil); err != nil {
		return nil, err
	}
	m.Console, m.ConsoleLog = m.con.console, m.con.logPath
	m.hw = &qemuHardware{n: n, log: log, qmp: filepath.Join(o.Dir, "qmp.sock"), wg: &m.wg,
		q: machineQEMU{Name: o.Name, MemoryMB: o.MemoryMB, CPUs: o.CPUs, Console: m.con.addr(), Tap: m.Tap, MAC: o.MAC, Disks: o.Disks,
			Firmware: o.Firmware, Vars: filepath.Join(o.Dir, "OVMF_VARS.fd"), NoROM: o.NoROM}}
	switch o.Firmware {
	case "", BIOS:
	case UEFI:
		if err := newUEFIVars(m.hw.q.Vars, false); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("vmlab: firmware %q: want %q or %q", o.Firmware, BIOS, UEFI)
	}
	m.svc = newRFService(bctx, m.hw, rfServiceOptions{Name: o.Name, SystemID: o.SystemID, UUID: m.UUID,
		Username: o.Username, Password: o.Password, MediaDir: mediaDir, MaxMediaSize: o.MaxMediaSize,
		MediaFetchTimeout: o.MediaFetchTimeout, Logger: log, MAC: o.MAC, MemoryMB: o.MemoryMB, CPUs: o.CPUs})
	if m.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	m.URL = "http://" + m.ln.Addr().String()
	m.srv = &http.Server{Handler: m.svc, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		MaxHeaderBytes: 16 << 10, BaseContext: func(net.Listener) context.Context { return bctx }}
	m.wg.Add(2)
	go func() { // ends at Close (srv.Close)
		defer m.wg.Done()
		_ = m.srv.Serve(m.ln)
	}()
	go m.con.serve(&m.wg)
	if m.slot, err = acquireSlot(ctx, slotDir()); err != nil {
		return nil, err
	}
	ok = true
	return m, nil
}

// Powered reports whether QEMU runs.
func (m *RedfishMachine) Powered() bool { return m.hw.running() }

// SetFanFailed makes the BMC report a failed fan (the system's
// Status.HealthRollup Critical, as BMCs report a failed subsystem), or a
// repaired one (OK).
func (m *RedfishMachine) SetFanFailed(failed bool) { m.svc.setFanFailed(failed) }

// Starts returns when QEMU was started, each time.
func (m *RedfishMachine) Starts() []time.Time { return m.svc.startTimes() }

// Events returns what the BMC was asked to do, in order, each with its
// time ("15:04:05.000 reset On").
func (m *RedfishMachine) Events() []string { return m.svc.eventList() }

// Close stops QEMU (by PID), the BMC's server and downloads and the
// console, and frees the VM slot. It is idempotent.
func (m *RedfishMachine) Close() error {
	if !m.begin(nil) {
		return nil
	}
	var errs []error
	m.cancel()
	if m.svc != nil {
		m.svc.waitUpdates()
	}
	if m.srv != nil {
		errs = append(errs, m.srv.Close())
	} else if m.ln != nil {
		m.ln.Close()
	}
	if m.hw != nil {
		errs = append(errs, m.hw.close())
	}
	m.con.stop(&m.wg)
	m.slot.release()
	return errors.Join(errs...)
}

// qemuHardware is a Redfish BMC's QEMU: started in the lab's namespace
// with an empty ide-cd drive and a QMP socket, stopped by PID.
type qemuHardware struct {
	n   *Network
	log *slog.Logger
	q   machineQEMU
	qmp string
	wg  *sync.WaitGroup

	proc *Process // guarded by mu

	closeOnce
}

// rfCdDevice is the QEMU id of the CD drive's device.
const rfCdDevice = "cd0dev"

// bootOrders maps boot override targets to QEMU's -boot order.
var bootOrders = map[string]string{"Cd": "d", "Pxe": "n", "Hdd": "c"}

func (h *qemuHardware) running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runningLocked()
}

func (h *qemuHardware) runningLocked() bool { return h.proc.Running() }

func (h *qemuHardware) start(target, medium string) error {
	if err := h.lockOpen("machine closed"); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if h.runningLocked() {
		return nil
	}
	q := h.q
	q.Order = bootOrders[target]
	if q.Order == "" {
		q.Order = "cn" // no override: the disk, then the network
	}
	drive := "if=none,id=cd0,media=cdrom,readonly=on"
	if medium != "" {
		drive += ",format=raw,file=" + medium
	}
	os.Remove(h.qmp)
	args := append(machineQEMUArgs(q),
		"-drive", drive, "-device", "ide-cd,drive=cd0,id="+rfCdDevice+",bus=ide.1,unit=0"+q.bootIndex('d'),
		"-qmp", "unix:"+h.qmp+",server=on,wait=off")
	cmd := h.n.Command(QEMUBinary, args...)
	stderr := &boundedBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	p, err := h.n.Start("qemu "+q.Name, cmd)
	if err != nil {
		return err
	}
	h.proc = p
	h.log.Debug("vmlab: machine powered on", "machine", q.Name, "pid", p.PID(), "args", strings.Join(args, " "))
	h.wg.Add(1)
	go func() { // ends when QEMU exits
		defer h.wg.Done()
		<-p.Done()
		if p.err != nil && !strings.Contains(p.err.Error(), "signal") {
			h.log.Warn("vmlab: QEMU exited", "machine", q.Name, "err", p.err, "output", stderr.String())
		}
	}()
	return nil
}

func (h *qemuHardware) stop(graceful bool) error {
	h.mu.Lock()
	p := h.proc
	h.mu.Unlock()
	if p == nil {
		return nil
	}
	if graceful {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := qmpCommand(ctx, h.qmp, "system_powerdown", nil)
		cancel()
		if err == nil {
			select {
			case <-p.Done():
				return nil
			case <-time.After(rfGracefulBound):
			}
		}
	}
	// SIGTERM: QEMU flushes its disks and exits.
	return p.Stop(10 * time.Second)
}

func (h *qemuHardware) changeMedium(medium string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if medium == "" {
		return qmpCommand(ctx, h.qmp, "eject", map[string]any{"id": rfCdDevice, "force": true})
	}
	return qmpCommand(ctx, h.qmp, "blockdev-change-medium", map[string]any{"id": rfCdDevice, "filename": medium, "format": "raw"})
}

// close stops QEMU; a start after it is refused, a second close does
// nothing.
func (h *qemuHardware) close() error {
	var p *Process
	if !h.begin(func() { p = h.proc }) || p == nil {
		return nil
	}
	return p.Stop(5 * time.Second)
}

// qmpCommand runs one QMP command on the socket at path: the greeting,
// qmp_capabilities, the command; events are skipped, answers bounded.
func qmpCommand(ctx context.Context, path, command string, args map[string]any) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("vmlab: QMP: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	r := bufio.NewReaderSize(io.LimitReader(c, 1<<20), 64<<10)
	readAnswer := func(what string) error {
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return fmt.Errorf("vmlab: QMP %s: %w", what, err)
			}
			var msg struct {
				QMP    json.RawMessage `json:"QMP"`
				Return json.RawMessage `json:"return"`
				Error  *struct {
					Class, Desc string
				} `json:"error"`
			}
			if err := json.Unmarshal(line, &msg); err != nil {
				return fmt.Errorf("vmlab: QMP %s: %w", what, err)
			}
			switch {
			case msg.Error != nil:
				return fmt.Errorf("vmlab: QMP %s: %s: %s", what, msg.Error.Class, msg.Error.Desc)
			case msg.QMP != nil || msg.Return != nil:
				return nil
			}
		}
	}
	if err := readAnswer("greeting"); err != nil {
		return err
	}
	send := func(cmd string, a map[string]any) error {
		m := map[string]any{"execute": cmd}
		if a != nil {
			m["arguments"] = a
		}
		b, _ := json.Marshal(m)
		if _, err := c.Write(append(b, '\n')); err != nil {
			return fmt.Errorf("vmlab: QMP %s: %w", cmd, err)
		}
		return readAnswer(cmd)
	}
	if err := send("qmp_capabilities", nil); err != nil {
		return err
	}
	return send(command, args)
}
