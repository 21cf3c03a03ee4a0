package ipmisim

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func ipmitool(t *testing.T, b *BMC, args ...string) string {
	t.Helper()
	cmd := exec.Command("ipmitool", append([]string{"-I", "lanplus", "-C", "3", "-H", b.Addr, "-p", strconv.Itoa(b.Port), "-U", b.Username, "-E"}, args...)...)
	cmd.Env = append(os.Environ(), "IPMITOOL_PASSWORD="+b.Password)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ipmitool %v: %v: %s", args, err, out)
	}
	return string(out)
}

func TestSimulatorRecordsChassisControl(t *testing.T) {
	Require(t)
	b := Start(t, Options{})
	if b.Power() {
		t.Fatal("new BMC should start powered off")
	}
	if out := ipmitool(t, b, "power", "status"); !strings.Contains(out, "off") {
		t.Fatalf("status: %s", out)
	}
	ipmitool(t, b, "power", "on")
	ipmitool(t, b, "chassis", "bootdev", "pxe")
	if !b.Power() || b.Boot() != "pxe" {
		t.Fatalf("power=%v boot=%s", b.Power(), b.Boot())
	}
	ipmitool(t, b, "power", "reset")
	if b.Resets() != 1 {
		t.Fatalf("resets=%d", b.Resets())
	}
	if err := b.SetPower(false); err != nil {
		t.Fatal(err)
	}
	if out := ipmitool(t, b, "power", "status"); !strings.Contains(out, "off") {
		t.Fatalf("out-of-band power change not visible: %s", out)
	}
	if ev := b.Events(); !slices.Contains(ev, "power 1") || !slices.Contains(ev, "boot pxe") {
		t.Fatalf("events %v", ev)
	}
	// Two simulators side by side keep separate state.
	b2 := Start(t, Options{PoweredOn: true, Username: "root", Password: "calvin"})
	if b2.Port == b.Port || !b2.Power() || b.Power() {
		t.Fatalf("ports %d/%d", b.Port, b2.Port)
	}
	if out := ipmitool(t, b2, "power", "status"); !strings.Contains(out, "on") {
		t.Fatalf("second BMC: %s", out)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRequireSkipsWithoutEnv(t *testing.T) {
	if os.Getenv(EnvVar) == "1" {
		t.Skip("simulator enabled; the skip path is exercised without " + EnvVar)
	}
	ran := false
	t.Run("inner", func(t *testing.T) {
		defer func() { ran = true }()
		Require(t)
		t.Fatal("Require must skip without the environment variable")
	})
	if !ran {
		t.Fatal("inner test did not run")
	}
}
