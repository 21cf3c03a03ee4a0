package ipmisim

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
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

// A BMC started with a Machine as its SOL device relays an activated
// SOL session both ways: what ipmitool's user types reaches the machine,
// what the machine prints reaches ipmitool's output.
func TestSOLReachesMachine(t *testing.T) {
	Require(t)
	m := NewMachine(t)
	b := Start(t, Options{SOL: m.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "ipmitool", "-I", "lanplus", "-C", "3", "-H", b.Addr, "-p", strconv.Itoa(b.Port), "-U", b.Username, "-E", "sol", "activate")
	cmd.Env = append(os.Environ(), "IPMITOOL_PASSWORD="+b.Password)
	ptmx, err := pty.Start(cmd) // sol activate needs a terminal
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = ptmx.Close()
	}()
	out := make(chan string, 64)
	go func() { // ends when ptmx is closed or ipmitool exits
		buf := make([]byte, 1024)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				out <- string(buf[:n])
			}
			if err != nil {
				close(out)
				return
			}
		}
	}()
	waitOut := func(want string) {
		t.Helper()
		var seen string
		for !strings.Contains(seen, want) {
			select {
			case s, ok := <-out:
				if !ok {
					t.Fatalf("ipmitool ended before %q; it printed %q", want, seen)
				}
				seen += s
			case <-ctx.Done():
				t.Fatalf("no %q from ipmitool; it printed %q", want, seen)
			}
		}
	}
	waitOut("[SOL Session operational")
	// ipmitool prints the banner before it puts its terminal in raw
	// mode: keys typed in between are cooked (the line discipline turns
	// "\r" into "\n" and holds the line). Type until the machine has
	// the raw bytes.
	for attempt := 0; ; attempt++ {
		if _, err := ptmx.Write([]byte("typed-by-user\r")); err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		err := m.WaitTyped(wctx, "typed-by-user\r")
		wcancel()
		if err == nil {
			break
		}
		if attempt == 5 {
			t.Fatalf("%v; the machine has %q", err, m.Typed())
		}
	}
	if err := m.Print(ctx, []byte("printed-by-machine\r\n")); err != nil {
		t.Fatal(err)
	}
	waitOut("printed-by-machine")
	_ = cmd.Process.Kill()
	for range out { // drain until the reader goroutine ends
	}
}
