package vmlab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/internal/macaddr"
)

// Firmware is a VM's firmware.
type Firmware string

// Firmwares.
const (
	// BIOS is SeaBIOS (QEMU's default), with the NIC's iPXE option ROM.
	BIOS Firmware = "bios"
	// UEFI is OVMF (Debian package ovmf), with its own PXE and HTTP boot
	// over the NIC.
	UEFI Firmware = "uefi"
)

// OVMF's files in Debian's ovmf package: the code is read-only, the
// variable store is copied per VM.
const (
	OVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	OVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	// OVMFSecureCode is OVMF built for secure boot (SMM), and
	// OVMFSecureVars its variable store with Microsoft's keys enrolled
	// and secure boot on.
	OVMFSecureCode = "/usr/share/OVMF/OVMF_CODE_4M.ms.fd"
	OVMFSecureVars = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
)

// QEMUBinary is the QEMU that runs the VMs (Debian package
// qemu-system-x86).
const QEMUBinary = "qemu-system-x86_64"

// storedMAC reports whether s is a MAC address in its stored form, lower
// case with colons (Ironic's rule, internal/macaddr).
func storedMAC(s string) bool {
	mac, ok := macaddr.Parse(s)
	return ok && mac == s
}

// checkMachine is what every machine's start checks first: the programs
// it runs are on PATH (else an error wrapping ErrUnavailable names the
// missing one and packages, the Debian packages that provide them), and
// its MAC is in stored form (else an error naming the machine's kind,
// what).
func checkMachine(what, mac, packages string, programs ...string) error {
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%w: no %s (%s)", ErrUnavailable, p, packages)
		}
	}
	if !storedMAC(mac) {
		return fmt.Errorf("vmlab: %s MAC %q: want lower-case aa:bb:cc:dd:ee:ff", what, mac)
	}
	return nil
}

// VMOptions describe a virtual machine.
type VMOptions struct {
	// Name names the VM in logs and its files; default "vm".
	Name string
	// MAC is the NIC's address, lower case with colons (required: a
	// boot server knows machines by it).
	MAC string
	// MemoryMB defaults to 256 (enough for a busybox initramfs; an IPA
	// ramdisk needs 1024).
	MemoryMB int
	// CPUs defaults to 1: under TCG a second vCPU costs a host core.
	CPUs int
	// BootOrder is QEMU's -boot order; default "n" (network).
	BootOrder string
	// Firmware defaults to BIOS.
	Firmware Firmware
	// NICModel defaults to virtio-net-pci.
	NICModel string
	// ROMFile is the NIC's option ROM. Empty means QEMU's default, which
	// for virtio-net-pci is ipxe-qemu's /usr/lib/ipxe/qemu/efi-virtio.rom
	// (iPXE for both BIOS and UEFI). Naming a ROM explicitly, even that
	// same file, made SeaBIOS 1.16.2 under QEMU 7.2 skip the ROM on these
	// machines ("Booting from Hard Disk..." with no iPXE banner), so leave
	// it empty for BIOS. NoROM drops the ROM: under UEFI, OVMF's own
	// virtio-net driver and PXE then boot.
	ROMFile string
	NoROM   bool
	// SecureBoot (UEFI only) runs OVMFSecureCode with OVMFSecureVars on
	// a q35 machine with SMM: secure boot on, Microsoft's keys enrolled.
	SecureBoot bool
	// Kernel, Initrd and Append boot a kernel directly (QEMU -kernel),
	// skipping the network boot.
	Kernel, Initrd, Append string
	// Dir holds the VM's files (console log, firmware variables); empty
	// means a new temporary directory removed by Stop.
	Dir string
	// ExtraArgs are appended to QEMU's command line (disks, a BMC
	// device).
	ExtraArgs []string
}

// VM is a running QEMU virtual machine on a Network.
type VM struct {
	Name string
	MAC  string
	// Tap is the VM's tap device in the namespace.
	Tap string
	// Console is the serial console (ttyS0).
	Console *Console
	// ConsoleLog is QEMU's own copy of the console output.
	ConsoleLog string
	// Started is when QEMU was started: stage times are measured from
	// it.
	Started time.Time
	// Args is QEMU's command line.
	Args []string

	proc    *Process
	stderr  *boundedBuffer
	slot    *slot
	conn    net.Conn
	dir     string
	tempDir bool
	stop    sync.Once
	stopErr error
}

// StartVM starts a QEMU VM inside n's namespace, its NIC on a new tap of
// the bridge, its serial console connected to the returned VM's Console.
// It uses TCG only: KVM guests hang on the virtual machines these tests
// run on. It first waits (bounded by ctx) for one of the machine-wide VM
// slots (ANVIL_VMLAB_SLOTS), held until Stop. The VM ends on its own when the guest powers off or reboots
// (-no-reboot); Stop (or n.Close) kills it by PID.
func StartVM(ctx context.Context, n *Network, opts VMOptions) (*VM, error) {
	if err := checkMachine("VM", opts.MAC, "Debian package qemu-system-x86", QEMUBinary); err != nil {
		return nil, err
	}
	opts.Name = cmp.Or(opts.Name, "vm")
	opts.MemoryMB = cmp.Or(opts.MemoryMB, 256)
	opts.CPUs = cmp.Or(opts.CPUs, 1)
	opts.BootOrder = cmp.Or(opts.BootOrder, "n")
	opts.Firmware = cmp.Or(opts.Firmware, BIOS)
	opts.NICModel = cmp.Or(opts.NICModel, "virtio-net-pci")
	vm := &VM{Name: opts.Name, MAC: opts.MAC, dir: opts.Dir}
	if vm.dir == "" {
		// Short: the console socket's path must fit a sockaddr_un.
		d, err := os.MkdirTemp("", "vmlab-")
		if err != nil {
			return nil, err
		}
		vm.dir, vm.tempDir = d, true
	}
	fail := func(err error) (*VM, error) {
		if vm.proc != nil {
			_ = vm.proc.Stop(2 * time.Second)
		}
		vm.slot.release()
		if vm.conn != nil {
			vm.conn.Close()
		}
		if vm.tempDir {
			os.RemoveAll(vm.dir)
		}
		return nil, err
	}
	tap, err := n.AddTap(ctx)
	if err != nil {
		return fail(err)
	}
	vm.Tap = tap

	// The harness listens and QEMU connects at start, so not a byte of
	// the console is lost (a QEMU server socket would drop what the
	// firmware prints before the harness connects, or block QEMU).
	sock := filepath.Join(vm.dir, "console.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return fail(fmt.Errorf("vmlab: console socket: %w", err))
	}
	defer ln.Close()
	vm.ConsoleLog = filepath.Join(vm.dir, "console.log")

	args := []string{
		"-name", opts.Name,
		"-accel", "tcg",
		"-machine", "pc,graphics=off", // graphics=off: SeaBIOS's sercon copies the text screen (iPXE) to ttyS0
		"-m", strconv.Itoa(opts.MemoryMB),
		"-smp", strconv.Itoa(opts.CPUs),
		"-nodefaults", "-display", "none", "-vga", "none",
		"-no-reboot",
		"-chardev", "socket,id=con0,path=" + sock + ",logfile=" + vm.ConsoleLog,
		"-serial", "chardev:con0",
		"-netdev", "tap,id=net0,ifname=" + tap + ",script=no,downscript=no",
	}
	nic := opts.NICModel + ",netdev=net0,mac=" + opts.MAC + ",bootindex=1"
	switch {
	case opts.NoROM:
		nic += ",romfile="
	case opts.ROMFile != "":
		nic += ",romfile=" + opts.ROMFile
	}
	args = append(args, "-device", nic)
	switch opts.Firmware {
	case BIOS:
	case UEFI:
		code, varsTemplate := OVMFCode, OVMFVars
		if opts.SecureBoot {
			code, varsTemplate = OVMFSecureCode, OVMFSecureVars
			// The secure boot build keeps its variables behind SMM.
			args[slices.Index(args, "pc,graphics=off")] = "q35,smm=on,graphics=off"
			args = append(args, "-global", "driver=cfi.pflash01,property=secure,value=on")
		}
		for _, f := range []string{code, varsTemplate} {
			if _, err := os.Stat(f); err != nil {
				return fail(fmt.Errorf("%w: %s (Debian package ovmf)", ErrUnavailable, f))
			}
		}
		vars := filepath.Join(vm.dir, "OVMF_VARS.fd")
		if err := copyFile(varsTemplate, vars); err != nil {
			return fail(err)
		}
		args = append(args,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+code,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars)
	default:
		return fail(fmt.Errorf("vmlab: firmware %q: want %q or %q", opts.Firmware, BIOS, UEFI))
	}
	if opts.Kernel != "" {
		args = append(args, "-kernel", opts.Kernel)
		if opts.Initrd != "" {
			args = append(args, "-initrd", opts.Initrd)
		}
		if opts.Append != "" {
			args = append(args, "-append", opts.Append)
		}
	} else {
		args = append(args, "-boot", "order="+opts.BootOrder)
	}
	args = append(args, opts.ExtraArgs...)
	vm.Args = append([]string{QEMUBinary}, args...)

	slot, err := acquireSlot(ctx, slotDir())
	if err != nil {
		return fail(err)
	}
	vm.slot = slot
	cmd := n.Command(QEMUBinary, args...)
	stderr := &boundedBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	vm.stderr = stderr
	vm.Started = time.Now()
	proc, err := n.Start("qemu "+opts.Name, cmd)
	if err != nil {
		return fail(err)
	}
	vm.proc = proc

	type accepted struct {
		c   net.Conn
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		acc <- accepted{c, err}
	}()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case a := <-acc:
		if a.err != nil {
			return fail(fmt.Errorf("vmlab: console: %w", a.err))
		}
		vm.conn = a.c
	case <-proc.Done():
		ln.Close()
		return fail(fmt.Errorf("vmlab: %s exited at start: %v: %s", QEMUBinary, proc.err, stderr.String()))
	case <-timer.C:
		ln.Close()
		return fail(fmt.Errorf("vmlab: %s did not connect its console in 30 s: %s", QEMUBinary, stderr.String()))
	case <-ctx.Done():
		ln.Close()
		return fail(ctx.Err())
	}
	vm.Console = newConsole(vm.conn)
	return vm, nil
}

// PID is QEMU's process id.
func (vm *VM) PID() int { return vm.proc.PID() }

// Done is closed when QEMU has exited (the guest powered off, or Stop).
func (vm *VM) Done() <-chan struct{} { return vm.proc.Done() }

// Wait waits for QEMU to exit (the guest powering off ends it: -no-reboot)
// and returns its exit error.
func (vm *VM) Wait(ctx context.Context) error { return vm.proc.Wait(ctx) }

// Exited reports, once QEMU has exited, what it wrote to stdout and
// stderr and its exit error (nil for a clean exit); before, ok is false.
func (vm *VM) Exited() (output string, ok bool, err error) {
	select {
	case <-vm.proc.Done():
		return vm.stderr.String(), true, vm.proc.err
	default:
		return "", false, nil
	}
}

// Stop kills QEMU by PID if it still runs, closes the console and removes
// the VM's temporary directory. It is idempotent.
func (vm *VM) Stop() error {
	vm.stop.Do(func() {
		vm.stopErr = vm.proc.Stop(3 * time.Second)
		vm.slot.release()
		vm.conn.Close()
		<-vm.Console.done
		if vm.tempDir {
			if err := os.RemoveAll(vm.dir); err != nil {
				vm.stopErr = errors.Join(vm.stopErr, err)
			}
		}
	})
	return vm.stopErr
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// boundedBuffer keeps the first max bytes written to it (a process's
// stderr for error messages).
type boundedBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *boundedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
