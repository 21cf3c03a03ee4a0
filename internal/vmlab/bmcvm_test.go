package vmlab

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBMCMachinePowerAndBootDevice drives a BMCMachine through its BMC
// with ipmitool, as the ipmi hardware type does: the boot device set
// over IPMI chooses what QEMU boots at the next power on (the disk's
// boot sector prints LocalDiskMarker on the console), power status
// follows QEMU, power off ends it, power reset restarts it with the
// boot device set meanwhile, and the in-band BMC device is there.
func TestBMCMachinePowerAndBootDevice(t *testing.T) {
	n := NewTestNetwork(t)
	for _, b := range []string{IPMISimBinary, "ipmitool"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skip(b + " not installed (Debian packages openipmi, ipmitool): BMC machine test skipped")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "vmbmc-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	disk := filepath.Join(dir, "disk.raw")
	if err := LocalDiskImage(disk); err != nil {
		t.Fatal(err)
	}
	m, err := StartBMCMachine(ctx, n, BMCMachineOptions{Name: "bmcvm", MAC: "52:54:00:a0:00:21", MemoryMB: 128,
		Disks: []Disk{{Path: disk, Serial: "anvil-test"}}, Dir: dir, Password: "s3cret-pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ipmi := func(args ...string) string {
		t.Helper()
		out, err := m.IPMITool(ctx, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ipmitool %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := ipmi("power", "status"); got != "Chassis Power is off" {
		t.Fatalf("power status %q at start", got)
	}
	// The LAN channel has the BMC's address and a MAC, which the agent's
	// inventory reads in band (bmc_address, bmc_mac).
	lan := ipmi("lan", "print", "1")
	for _, want := range []string{"IP Address              : " + m.Addr, "MAC Address             : 52:54:00:a0:00:a1"} {
		if !strings.Contains(lan, want) {
			t.Errorf("lan print 1 lacks %q:\n%s", want, lan)
		}
	}
	ipmi("chassis", "bootdev", "disk")
	ipmi("power", "on")
	if got := ipmi("power", "status"); got != "Chassis Power is on" || !m.Powered() {
		t.Fatalf("power status %q after power on (QEMU running: %v)", got, m.Powered())
	}
	if _, err := m.Console.WaitFor(ctx, LocalDiskMarker); err != nil {
		t.Fatalf("the disk did not boot: %v\n%s", err, m.Console.Transcript(m.Starts()[0], 30))
	}
	// A reset after "bootdev pxe" restarts QEMU booting the network
	// (nothing answers there: iPXE starts).
	ipmi("chassis", "bootdev", "pxe")
	ipmi("power", "reset")
	if got := len(m.Starts()); got != 2 {
		t.Fatalf("%d QEMU starts after a reset, want 2", got)
	}
	if _, err := m.Console.WaitForAfter(ctx, m.Starts()[1], "iPXE"); err != nil {
		t.Fatalf("no network boot after the reset: %v\n%s", err, m.Console.Transcript(m.Starts()[0], 30))
	}
	ipmi("power", "off")
	if got := ipmi("power", "status"); got != "Chassis Power is off" || m.Powered() {
		t.Fatalf("power status %q after power off (QEMU running: %v)", got, m.Powered())
	}
	for _, want := range []string{"boot default", "power 1", "boot pxe", "reset 1", "power 0"} {
		found := false
		for _, e := range m.Events() {
			found = found || strings.HasSuffix(e, " "+want)
		}
		if !found {
			t.Errorf("BMC events %v lack %q", m.Events(), want)
		}
	}
}

// machineQEMUArgs: SeaBIOS gets QEMU's -boot order; OVMF, which reads
// only bootindex, gets the order as the devices' bootindex (the kinds
// the order leaves out after it, the first disk only), both pflash
// drives with the machine's own variable store, the NIC without its
// ROM when NoROM, and PXE off through fw_cfg when NoPXE.
func TestMachineQEMUArgsFirmware(t *testing.T) {
	base := machineQEMU{Name: "m", MemoryMB: 64, CPUs: 1, Console: "/c", Tap: "t0", MAC: "52:54:00:00:00:01",
		Disks: []Disk{{Path: "/d0", Serial: "s0"}, {Path: "/d1"}}}
	find := func(args []string, prefix string) []string {
		var out []string
		for _, a := range args {
			if strings.HasPrefix(a, prefix) {
				out = append(out, a)
			}
		}
		return out
	}
	bios := base
	bios.Order = "n"
	args := strings.Join(machineQEMUArgs(bios), " ")
	if !strings.Contains(args, "-boot order=n") || strings.Contains(args, "bootindex") || strings.Contains(args, "pflash") {
		t.Fatalf("BIOS machine args: %s", args)
	}
	for _, tc := range []struct {
		order          string
		nic, disk0     string
		noROM, noPXE   bool
		wantROM, wantF bool
	}{
		{order: "n", nic: "bootindex=0", disk0: "bootindex=1"},
		{order: "c", nic: "bootindex=2", disk0: "bootindex=0", noROM: true, wantROM: true},
		{order: "cn", nic: "bootindex=1", disk0: "bootindex=0", noPXE: true, wantF: true},
		{order: "d", nic: "bootindex=2", disk0: "bootindex=1"},
	} {
		q := base
		q.Firmware, q.Vars, q.Order, q.NoROM, q.NoPXE = UEFI, "/vars.fd", tc.order, tc.noROM, tc.noPXE
		a := machineQEMUArgs(q)
		joined := strings.Join(a, " ")
		nic := find(a, "virtio-net-pci,")
		disks := find(a, "virtio-blk-pci,")
		if len(nic) != 1 || !strings.HasSuffix(strings.TrimSuffix(nic[0], ",romfile="), ","+tc.nic) {
			t.Errorf("order %q: NIC %q, want %s", tc.order, nic, tc.nic)
		}
		if len(disks) != 2 || !strings.HasSuffix(disks[0], ","+tc.disk0) || strings.Contains(disks[1], "bootindex") {
			t.Errorf("order %q: disks %q, want the first with %s and the second without", tc.order, disks, tc.disk0)
		}
		if got := strings.HasSuffix(nic[0], ",romfile="); got != tc.wantROM {
			t.Errorf("order %q: NIC ROM dropped %v, want %v", tc.order, got, tc.wantROM)
		}
		if got := strings.Contains(joined, "IPv4PXESupport,string=n"); got != tc.wantF {
			t.Errorf("order %q: PXE off %v, want %v", tc.order, got, tc.wantF)
		}
		if strings.Contains(joined, "-boot ") || !strings.Contains(joined, "if=pflash,format=raw,unit=0,readonly=on,file="+OVMFCode) ||
			!strings.Contains(joined, "if=pflash,format=raw,unit=1,file=/vars.fd") || !strings.Contains(joined, "-machine pc,graphics=off") ||
			strings.Contains(joined, "smm") || strings.Contains(joined, "secure") {
			t.Errorf("order %q: UEFI machine args: %s", tc.order, joined)
		}
	}
	// Secure boot: OVMF's secure boot build, on a q35 machine with SMM
	// and its flash secure (the variables behind SMM).
	sb := base
	sb.Firmware, sb.Vars, sb.Order, sb.NoROM, sb.SecureBoot = UEFI, "/vars.fd", "n", true, true
	joined := strings.Join(machineQEMUArgs(sb), " ")
	for _, want := range []string{"-machine q35,smm=on,graphics=off", "-global driver=cfi.pflash01,property=secure,value=on",
		"if=pflash,format=raw,unit=0,readonly=on,file=" + OVMFSecureCode, "if=pflash,format=raw,unit=1,file=/vars.fd"} {
		if !strings.Contains(joined, want) {
			t.Errorf("secure boot machine args lack %q: %s", want, joined)
		}
	}
	if strings.Contains(joined, "file="+OVMFCode+" ") || strings.Contains(joined, "-machine pc,") {
		t.Errorf("secure boot machine args name the plain OVMF or the pc machine: %s", joined)
	}
}
