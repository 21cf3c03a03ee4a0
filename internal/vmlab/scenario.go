package vmlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
)

// EnvQEMU un-skips the tests that boot QEMU virtual machines (set it to
// 1); they also skip, with one line, where root, ip, QEMU or a Debian
// package they need is missing.
const EnvQEMU = "ANVIL_TEST_QEMU"

// EnvTranscript, set to 1, makes RunNetbootScenario log the whole console
// transcript of a boot that passed (a failed one always logs its end).
const EnvTranscript = "ANVIL_VMLAB_TRANSCRIPT"

// NewTestNetwork returns a Network for t, deleted when t ends. It skips t
// with one line unless ANVIL_TEST_QEMU=1 and the machine can make one.
func NewTestNetwork(t testing.TB) *Network {
	t.Helper()
	return NewTestNetworkWith(t, NetworkOptions{})
}

// NewTestNetworkWith is NewTestNetwork with options.
func NewTestNetworkWith(t testing.TB, opts NetworkOptions) *Network {
	t.Helper()
	if os.Getenv(EnvQEMU) != "1" {
		t.Skip(EnvQEMU + "=1 not set: QEMU virtual-machine test skipped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := NewNetwork(ctx, opts)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// BootSetup is what a boot server under test is given: where to listen,
// the one machine to boot and what to boot it with.
type BootSetup struct {
	Network *Network
	// Interface is the bridge in the namespace (BridgeName); ServerAddr
	// is its address; PoolStart..PoolEnd is the range to hand out.
	Interface            string
	ServerAddr           netip.Addr
	PoolStart, PoolEnd   netip.Addr
	Node                 string
	MAC                  string // lower case, colon separated
	Firmware             Firmware
	Kernel, Initrd       string // local files to serve
	Params               []string
	Observer             stage.Observer // the server reports each stage it served here
	Dir                  string         // scratch directory, removed after the test
	Logger               *slog.Logger
	KernelSize, InitSize int64
}

// BootServer starts a boot server for s (its sockets opened through
// s.Network.Do, its processes through s.Network.Start), returns once it
// serves, and returns the function that stops it. An error wrapping
// ErrUnavailable (a Debian package missing) skips the scenario. The server must hand
// the machine, when it asks, iPXE and then a script that boots s.Kernel
// with s.Initrd and s.Params.
type BootServer func(ctx context.Context, s BootSetup) (stop func() error, err error)

// Scenario is one network boot of one VM.
type Scenario struct {
	Firmware Firmware
	// MAC defaults to 52:54:00:a0:00:01.
	MAC string
	// NoROM boots with the firmware's own PXE (UEFI: OVMF's) instead of
	// the NIC's iPXE ROM, so the boot goes through TFTP.
	NoROM bool
	// NoPXE (UEFI, with NoROM) turns OVMF's PXE off, IPv4 and IPv6
	// (QEMU fw_cfg opt/org.tianocore/IPv4PXESupport and
	// IPv6PXESupport "n"), so that OVMF boots the NIC by UEFI HTTP
	// boot: a boot server that answers PXE too would otherwise be
	// booted over TFTP first.
	NoPXE bool
	// SecureBoot (UEFI) boots OVMF with secure boot on (VMOptions.SecureBoot).
	SecureBoot bool
	// Expect are stages the boot server must have recorded, in this
	// order (others may come between).
	Expect []stage.Stage
	// Timeout bounds the boot up to the marker; default 5 minutes (TCG).
	Timeout time.Duration
	// FailOn are console texts that end the boot as failed at once;
	// nil means DefaultFailOn().
	FailOn []string
	// Disk, when set, is a raw disk image attached to the VM (IDE) but
	// not in its boot order (-boot strict=on): the firmware does not
	// fall back to it when the network boot fails, so only a boot
	// server's "boot from local disk" (iPXE sanboot) reaches it.
	// LocalDiskImage writes one.
	Disk string
	// DiskBootable puts Disk in the boot order after the NIC (no
	// strict): for a boot loader whose "local boot" returns to the
	// firmware to boot the next device (pxelinux's LOCALBOOT 0).
	DiskBootable bool
	// MemoryMB is the VM's memory; zero is StartVM's default (256).
	// GRUB loading the kernel over TFTP needs 512.
	MemoryMB int
	// Until, when set, is the console text that ends a boot that passes
	// in place of the marker (LocalDiskMarker for a local-disk boot):
	// the kernel command line is then not checked, and the marker
	// initramfs printing its marker fails the scenario.
	Until string
}

// DefaultFailOn returns the firmware's and kernel's words for a boot that
// will not reach the marker.
func DefaultFailOn() []string {
	return []string{
		"No more network devices",           // iPXE tried every NIC
		"Could not boot",                    // iPXE's boot command failed
		"No bootable device",                // SeaBIOS ran out of boot devices
		"failed to load Boot",               // OVMF's boot manager
		"you need to load the kernel first", // GRUB's boot without a kernel
		"Kernel panic",
	}
}

// Milestone is something seen during a boot, at a time since QEMU started.
type Milestone struct {
	After time.Duration
	// Source is "console" or "server".
	Source string
	What   string
	// Record is the server's record of a "server" milestone.
	Record *stage.Record
}

// Result is what a scenario saw.
type Result struct {
	Marker     Line
	Cmdline    string
	Records    []stage.Record
	Milestones []Milestone
	// Boot is from QEMU's start to the marker; Total includes building
	// the images and starting the server.
	Boot, Total time.Duration
}

// SecureBootLine is what Linux prints when the firmware booted it with
// secure boot on.
const SecureBootLine = "secureboot: Secure boot enabled"

// consoleMilestones are console lines worth a time, by first occurrence.
// A milestone with atStart is timed at the start of its line.
var consoleMilestones = []struct {
	substr, what string
	atStart      bool
}{
	{"SeaBIOS (version", "SeaBIOS started", false},
	{"BdsDxe:", "OVMF boot manager", false},
	{">>Start PXE over IPv4", "OVMF PXE started", false},
	{"iPXE initialising devices", "iPXE started", false},
	{"Configuring (net0", "iPXE DHCP started", true},
	{"Configuring (net0", "iPXE network configured (DHCP and IPv6)", false},
	{"Linux version", "kernel started", false},
	{SecureBootLine, "kernel: secure boot enabled", false},
	{"Unpacking initramfs", "initramfs unpacking", false},
	{"Run /init as init process", "/init started", false},
	{MarkerPrefix, "marker printed", false},
	{LocalDiskMarker, "local disk booted", false},
	{"reboot: Power down", "guest powered off", false},
}

// RunNetbootScenario boots one VM over the network from the boot server
// serve starts, on n, and checks that the marker initramfs printed its
// marker with the kernel command line the server was given, and that the
// server recorded sc.Expect in order. It logs every stage's time and fails
// t with the console transcript and the records when the boot does not
// finish. It skips t (one line) when the kernel or busybox is missing.
func RunNetbootScenario(t testing.TB, n *Network, sc Scenario, serve BootServer) Result {
	t.Helper()
	began := time.Now()
	if sc.Firmware == "" {
		sc.Firmware = BIOS
	}
	if sc.MAC == "" {
		sc.MAC = "52:54:00:a0:00:01"
	}
	if sc.Timeout == 0 {
		sc.Timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), sc.Timeout+3*time.Minute)
	defer cancel()

	cache, err := DefaultCache()
	if err != nil {
		t.Fatal(err)
	}
	kernel, err := DebianKernel(ctx, cache)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	initrd, err := MarkerInitramfs(cache, "")
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("images ready in %.1fs: kernel %s %s, initramfs %s", time.Since(began).Seconds(), kernel.Package, kernel.Version, initrd)

	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	marker := "vmlab-" + hex.EncodeToString(rnd[:])
	var (
		recMu   sync.Mutex
		records []stage.Record
	)
	setup := BootSetup{
		Network:    n,
		Interface:  BridgeName,
		ServerAddr: n.ServerAddr(),
		PoolStart:  netip.MustParseAddr(PoolStart),
		PoolEnd:    netip.MustParseAddr(PoolEnd),
		Node:       "vm0",
		MAC:        sc.MAC,
		Firmware:   sc.Firmware,
		Kernel:     kernel.Path,
		Initrd:     initrd,
		// panic=1 with QEMU's -no-reboot turns a kernel panic into QEMU
		// exiting, so a broken image fails the test at once.
		Params: []string{"console=ttyS0,115200", "panic=1", "edd=off", "anvil.marker=" + marker},
		Observer: stage.ObserverFunc(func(r stage.Record) {
			if r.At.IsZero() {
				r.At = time.Now()
			}
			recMu.Lock()
			records = append(records, r)
			recMu.Unlock()
		}),
		Dir:    t.TempDir(),
		Logger: slog.Default(),
	}
	for _, f := range []struct {
		path string
		size *int64
	}{{kernel.Path, &setup.KernelSize}, {initrd, &setup.InitSize}} {
		st, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		*f.size = st.Size()
	}
	stop, err := serve(ctx, setup)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatalf("boot server: %v", err)
	}
	stopped := false
	stopServer := func() {
		if !stopped {
			stopped = true
			if err := stop(); err != nil {
				t.Errorf("stopping the boot server: %v", err)
			}
		}
	}
	defer stopServer()

	vmOpts := VMOptions{Name: "vm0", MAC: sc.MAC, Firmware: sc.Firmware, NoROM: sc.NoROM, MemoryMB: sc.MemoryMB, SecureBoot: sc.SecureBoot}
	if sc.NoPXE {
		vmOpts.ExtraArgs = append(vmOpts.ExtraArgs,
			"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=n",
			"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n")
	}
	if sc.Disk != "" {
		disk := "ide-hd,drive=disk0"
		if sc.DiskBootable {
			disk += ",bootindex=2"
		} else {
			vmOpts.BootOrder = "n,strict=on"
		}
		vmOpts.ExtraArgs = append(vmOpts.ExtraArgs, "-drive", "file="+sc.Disk+",format=raw,if=none,id=disk0", "-device", disk)
	}
	vm, err := StartVM(ctx, n, vmOpts)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := vm.Stop(); err != nil {
			t.Errorf("stopping the VM: %v", err)
		}
	}()
	snapshot := func() []stage.Record {
		recMu.Lock()
		defer recMu.Unlock()
		return append([]stage.Record(nil), records...)
	}
	failf := func(format string, args ...any) {
		t.Helper()
		var b strings.Builder
		fmt.Fprintf(&b, format, args...)
		fmt.Fprintf(&b, "\nQEMU: %s\n", strings.Join(vm.Args, " "))
		select { // a console that ended is QEMU exiting: let it be reaped
		case <-vm.Console.done:
			select {
			case <-vm.Done():
			case <-time.After(3 * time.Second):
			}
		default:
		}
		if out, ok, err := vm.Exited(); ok {
			fmt.Fprintf(&b, "QEMU exited (%v) after %.1fs: %q\n", err, time.Since(vm.Started).Seconds(), out)
		}
		b.WriteString("boot server records:\n")
		for _, r := range snapshot() {
			fmt.Fprintf(&b, "  %7.2fs %s\n", r.At.Sub(vm.Started).Seconds(), r.Phrase())
		}
		fmt.Fprintf(&b, "console (last 60 lines):\n%s", vm.Console.Transcript(vm.Started, 60))
		t.Fatal(b.String())
	}

	bootCtx, bootCancel := context.WithTimeout(ctx, sc.Timeout)
	defer bootCancel()
	res := Result{}
	if sc.FailOn == nil {
		sc.FailOn = DefaultFailOn()
	}
	if sc.Until != "" {
		line, which, err := vm.Console.WaitForAny(bootCtx, append([]string{sc.Until, MarkerPrefix + " "}, sc.FailOn...)...)
		if err != nil {
			failf("no %q: %v", sc.Until, err)
		}
		switch which {
		case 0:
		case 1:
			failf("the marker initramfs booted at %.1fs, want %q", line.At.Sub(vm.Started).Seconds(), sc.Until)
		default:
			failf("the boot failed at %.1fs: %q", line.At.Sub(vm.Started).Seconds(), line.Text)
		}
		res.Marker = line
		res.Boot = line.At.Sub(vm.Started)
	} else {
		line, which, err := vm.Console.WaitForAny(bootCtx, append([]string{MarkerPrefix + " "}, sc.FailOn...)...)
		if err != nil {
			failf("no marker: %v", err)
		}
		if which != 0 {
			failf("the boot failed at %.1fs: %q", line.At.Sub(vm.Started).Seconds(), line.Text)
		}
		res.Marker = line
		res.Boot = res.Marker.At.Sub(vm.Started)
		if got := strings.TrimSpace(strings.TrimPrefix(res.Marker.Text[strings.Index(res.Marker.Text, MarkerPrefix):], MarkerPrefix)); got != marker {
			failf("marker line %q: want marker %q", res.Marker.Text, marker)
		}
		cmdline, err := vm.Console.WaitFor(bootCtx, CmdlinePrefix+" ")
		if err != nil {
			failf("no command line: %v", err)
		}
		res.Cmdline = strings.TrimSpace(cmdline.Text[strings.Index(cmdline.Text, CmdlinePrefix)+len(CmdlinePrefix):])
		words := strings.Fields(res.Cmdline)
		for _, p := range setup.Params {
			if !containsString(words, p) {
				failf("kernel command line %q lacks %q", res.Cmdline, p)
			}
		}
		offCtx, offCancel := context.WithTimeout(ctx, time.Minute)
		defer offCancel()
		if err := vm.Wait(offCtx); err != nil && offCtx.Err() != nil {
			failf("the guest did not power off: %v", err)
		}
	}
	stopServer()
	res.Records = snapshot()
	if missing := missingInOrder(res.Records, sc.Expect); missing != "" {
		failf("the boot server did not record %s (in order %v)", missing, sc.Expect)
	}
	for _, r := range res.Records {
		if r.Stage == stage.Kernel && r.Bytes != 0 && r.Bytes != setup.KernelSize {
			failf("kernel record says %d bytes; the kernel has %d", r.Bytes, setup.KernelSize)
		}
		if r.Stage == stage.Ramdisk && r.Bytes != 0 && r.Bytes != setup.InitSize {
			failf("ramdisk record says %d bytes; the initramfs has %d", r.Bytes, setup.InitSize)
		}
	}
	res.Milestones = milestones(vm, res.Records)
	res.Total = time.Since(began)
	for _, m := range res.Milestones {
		t.Logf("%+8.2fs  %-7s  %s", m.After.Seconds(), m.Source, m.What)
	}
	end := "marker"
	if sc.Until != "" {
		end = fmt.Sprintf("%q", sc.Until)
	}
	t.Logf("boot to %s %.1fs; scenario %.1fs", end, res.Boot.Seconds(), res.Total.Seconds())
	if os.Getenv(EnvTranscript) == "1" {
		t.Logf("console:\n%s", vm.Console.Transcript(vm.Started, 0))
	}
	return res
}

func milestones(vm *VM, records []stage.Record) []Milestone {
	var ms []Milestone
	for _, c := range consoleMilestones {
		if l, ok := vm.Console.Find(c.substr); ok {
			at := l.At
			if c.atStart {
				at = l.Start
			}
			ms = append(ms, Milestone{After: at.Sub(vm.Started), Source: "console", What: c.what})
		}
	}
	for i := range records {
		r := &records[i]
		ms = append(ms, Milestone{After: r.At.Sub(vm.Started), Source: "server", What: r.Phrase(), Record: r})
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].After < ms[j].After })
	return ms
}

// missingInOrder returns the first of want that records do not contain
// after the previous one, or "".
func missingInOrder(records []stage.Record, want []stage.Stage) string {
	i := 0
	for _, w := range want {
		for i < len(records) && records[i].Stage != w {
			i++
		}
		if i == len(records) {
			return fmt.Sprintf("%q", w)
		}
		i++
	}
	return ""
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
