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
