package ipmitool

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/ipmisim"
	"github.com/anvilmetal/anvil/steps"
)

func fakeTask(f *fakeBMC, extra map[string]any) *driver.Task {
	di := map[string]any{"ipmi_address": "10.0.0.9", "ipmi_port": "6230", "ipmi_username": f.user, "ipmi_password": f.password}
	for k, v := range extra {
		di[k] = v
	}
	return &driver.Task{NodeUUID: "node-1", HardwareType: HardwareType, DriverInfo: di, DriverInternalInfo: map[string]any{}}
}

// A wrong password is a *driver.BMCAuthError naming the BMC's host:port
// and the user, at once: with the cipher suite negotiated (3, then 17)
// the old client reported the last suite's "invalid authentication
// algorithm", the cipher mismatch text, and retried nothing usefully.
func TestWrongPasswordIsAuthError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]any
		user  string
	}{
		{"negotiated suite", nil, "admin"},
		{"suite 3", map[string]any{"ipmi_cipher_suite": "3"}, "admin"},
		{"unknown user", map[string]any{"ipmi_username": "nobody"}, "nobody"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeBMC(t)
			d := NewDrivers(f.opts())
			tk := fakeTask(f, tc.extra)
			if tc.user == "admin" {
				tk.DriverInfo["ipmi_password"] = "wrong-pw"
			}
			_, err := d.Power().GetPowerState(context.Background(), tk)
			var ae *driver.BMCAuthError
			if !errors.As(err, &ae) || !errors.Is(err, driver.ErrBMCAuthentication) {
				t.Fatalf("want *driver.BMCAuthError, got %T %v", err, err)
			}
			if ae.Node != "node-1" || ae.Kind != driver.KindPower || ae.Impl != ImplIPMITool || ae.Address != "10.0.0.9:6230" || ae.Username != tc.user {
				t.Fatalf("fields %+v", ae)
			}
			if strings.Contains(err.Error(), "wrong-pw") || strings.Contains(err.Error(), f.password) || strings.Contains(err.Error(), "authentication algorithm") {
				t.Fatalf("error text %q", err)
			}
			if f.attempts != 1 {
				t.Fatalf("an authentication failure was tried %d times", f.attempts)
			}
			if len(f.ran()) != 0 {
				t.Fatalf("commands ran without a session: %q", f.ran())
			}
		})
	}
}

// A suite the BMC lacks is a cipher failure, not an authentication one;
// when negotiating, the next suite is tried and kept for the rest of the
// operation.
func TestCipherMismatch(t *testing.T) {
	f := newFakeBMC(t)
	d := NewDrivers(f.opts())
	_, err := d.Power().GetPowerState(context.Background(), fakeTask(f, map[string]any{"ipmi_cipher_suite": "17"}))
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Class != FailCipher || errors.Is(err, driver.ErrBMCAuthentication) || !strings.Contains(err.Error(), "cipher suite") {
		t.Fatalf("want a cipher CommandError, got %v", err)
	}
	f.suites = []string{"17"}
	f.attempts = 0
	c, err := New(Info{Address: "10.0.0.9", Username: "admin", Password: f.password, PrivLevel: "ADMINISTRATOR", ProtocolVersion: "2.0"}, f.opts())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PowerState(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PowerState(context.Background()); err != nil || f.attempts != 3 {
		t.Fatalf("want suite 3 refused once, then 17 twice: %d attempts, %v", f.attempts, err)
	}
}

// A BMC that never answers is tried again, each attempt spaced by the
// minimum command interval, until the retry timeout; the error is a
// *driver.BMCUnreachableError naming host:port, the attempts and the
// time spent, and the call ends within the retry timeout.
func TestUnreachableIsBoundedAndTyped(t *testing.T) {
	f := newFakeBMC(t)
	f.silent = true
	f.perWait = 30 * time.Millisecond // an attempt lasts 2 x -N 2 x 30 ms
	opts := f.opts()
	// Attempts start at 0, 200 and 400 ms; the third is stopped at 450 ms,
	// and the error still quotes what the earlier ones printed.
	opts.RetryTimeout, opts.MinCommandInterval = 450*time.Millisecond, 200*time.Millisecond
	d := NewDrivers(opts)
	start := time.Now()
	_, err := d.Power().GetPowerState(context.Background(), fakeTask(f, nil))
	took := time.Since(start)
	var ue *driver.BMCUnreachableError
	if !errors.As(err, &ue) || !errors.Is(err, driver.ErrBMCUnreachable) {
		t.Fatalf("want *driver.BMCUnreachableError, got %T %v", err, err)
	}
	if ue.Address != "10.0.0.9:6230" || ue.Attempts != f.attempts || ue.Attempts < 2 || ue.Attempts > 3 || !strings.Contains(err.Error(), "10.0.0.9:6230") ||
		!strings.Contains(ue.Detail, "Get Auth Capabilities error") {
		t.Fatalf("fields %+v after %d attempts", ue, f.attempts)
	}
	if took > opts.RetryTimeout+time.Second { // slack for a loaded machine
		t.Fatalf("took %v with a retry timeout of %v", took, opts.RetryTimeout)
	}
	// The caller's own deadline ends the call earlier, as a context error.
	f.attempts = 0
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = d.Power().GetPowerState(ctx, fakeTask(f, nil))
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrBMCUnreachable) || f.attempts != 1 {
		t.Fatalf("caller deadline: %v after %d attempts", err, f.attempts)
	}
}

// A busy BMC is retried and then succeeds.
func TestBusyIsRetried(t *testing.T) {
	f := newFakeBMC(t)
	f.busy = 2
	d := NewDrivers(f.opts())
	if st, err := d.Power().GetPowerState(context.Background(), fakeTask(f, map[string]any{"ipmi_cipher_suite": "3"})); err != nil || st != driver.PowerOff {
		t.Fatalf("%q %v", st, err)
	}
	if f.attempts != 3 { // two busy, then the GUID and the power status in one session
		t.Fatalf("%d attempts", f.attempts)
	}
}

// Power, boot device, NMI and step actions, and the power read, check the
// system GUID first: the first contact records it, and when the BMC at
// the node's address later reports another GUID the action is refused
// with a *driver.IdentityMismatchError naming both, before any command
// reaches the other machine.
func TestIdentityCheckedBeforeActions(t *testing.T) {
	ctx := context.Background()
	f := newFakeBMC(t)
	d := NewDrivers(f.opts())
	tk := fakeTask(f, nil)
	if _, err := d.Power().GetPowerState(ctx, tk); err != nil {
		t.Fatal(err)
	}
	const first = "ipmi-guid:a1b2c3d4-e5f6-0000-0000-000000004222"
	if got := tk.DriverInternalInfo[driver.IdentityKey]; got != first {
		t.Fatalf("recorded %v", got)
	}
	if err := d.Power().SetPowerState(ctx, tk, driver.PowerOn, time.Second); err != nil || !f.power {
		t.Fatalf("power on the recorded machine: %v", err)
	}
	if n := strings.Count(strings.Join(f.ran(), "\n"), "raw 0x06 0x37"); n != 2 {
		t.Fatalf("want one GUID read per operation (2), got %d in %q", n, f.ran())
	}

	f.guid = mustHex("0000000000000000000000000000beef") // another machine now answers at the address
	actions := map[string]func() error{
		"power off":   func() error { return d.Power().SetPowerState(ctx, tk, driver.PowerOff, time.Second) },
		"reboot":      func() error { return d.Power().Reboot(ctx, tk, time.Second) },
		"power read":  func() error { _, err := d.Power().GetPowerState(ctx, tk); return err },
		"boot device": func() error { return d.Management().SetBootDevice(ctx, tk, driver.BootPXE, false) },
		"nmi":         func() error { return d.Management().InjectNMI(ctx, tk) },
		"send_raw": func() error {
			_, err := d.Vendor().Call(ctx, tk, "send_raw", "POST", map[string]any{"raw_bytes": "0x00 0x02 0x00"})
			return err
		},
		"bmc_reset": func() error { _, err := d.Vendor().Call(ctx, tk, "bmc_reset", "POST", nil); return err },
		"step": func() error {
			_, err := d.Management().ExecuteStep(ctx, tk, steps.Clean, steps.Step{Interface: "management", Name: "clear_system_event_log"})
			return err
		},
	}
	for name, act := range actions {
		before := len(f.ran())
		err := act()
		var mm *driver.IdentityMismatchError
		if !errors.As(err, &mm) || mm.Recorded != first || mm.Reported != "ipmi-guid:00000000-0000-0000-0000-00000000beef" || mm.Address != "10.0.0.9:6230" || mm.Node != "node-1" {
			t.Fatalf("%s: want an IdentityMismatchError, got %v", name, err)
		}
		want := []string{"raw 0x06 0x37"}
		if name == "power read" { // one session reads both; a read changes nothing
			want = append(want, "power status")
		}
		if got := f.ran()[before:]; !slices.Equal(got, want) {
			t.Fatalf("%s: commands sent to the other machine: %q", name, got)
		}
	}
	if !f.power {
		t.Fatal("the other machine was powered off")
	}
	if got := tk.DriverInternalInfo[driver.IdentityKey]; got != first {
		t.Fatalf("a mismatch must not overwrite the record: %v", got)
	}
	// A deliberate change: the conductor clears the record, the next
	// contact records the new machine.
	delete(tk.DriverInternalInfo, driver.IdentityKey)
	if err := d.Management().SetBootDevice(ctx, tk, driver.BootPXE, false); err != nil {
		t.Fatal(err)
	}
}

// A BMC without Get System GUID reports no identity: actions go ahead and
// nothing is recorded. Session failures on the GUID read are not taken
// for "unsupported".
func TestIdentityUnsupported(t *testing.T) {
	ctx := context.Background()
	f := newFakeBMC(t)
	f.guid = nil
	d := NewDrivers(f.opts())
	tk := fakeTask(f, nil)
	if st, err := d.Power().GetPowerState(ctx, tk); err != nil || st != driver.PowerOff {
		t.Fatalf("power read: %q %v", st, err)
	}
	if err := d.Power().SetPowerState(ctx, tk, driver.PowerOn, time.Second); err != nil || !f.power {
		t.Fatalf("power on: %v", err)
	}
	if _, ok := tk.DriverInternalInfo[driver.IdentityKey]; ok {
		t.Fatalf("recorded %v", tk.DriverInternalInfo)
	}
	f.guid = make([]byte, 16) // an all-zero GUID says nothing either
	if _, err := d.Power().GetPowerState(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if _, ok := tk.DriverInternalInfo[driver.IdentityKey]; ok {
		t.Fatalf("recorded %v", tk.DriverInternalInfo)
	}
	tk.DriverInfo["ipmi_password"] = "nope"
	if _, err := d.Power().GetPowerState(ctx, tk); !errors.Is(err, driver.ErrBMCAuthentication) {
		t.Fatalf("want the authentication failure, got %v", err)
	}
}

// closedUDPPort returns a loopback UDP port with nothing listening.
func closedUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	c.Close()
	return port
}

// Against ipmi_sim: a wrong password is a BMCAuthError at once (well under
// the retry timeout, here Ironic's default 60 s), a closed port a
// BMCUnreachableError naming 127.0.0.1:port within the retry timeout (3 s
// here), and two simulators, standing for a re-cabled BMC address, have
// different GUIDs, so an action on the second is refused.
func TestErrorsAgainstSimulator(t *testing.T) {
	ipmisim.Require(t)
	b := ipmisim.Start(t, ipmisim.Options{})
	ctx := context.Background()
	t.Run("wrong password", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			extra map[string]any
			bound time.Duration
		}{
			{"suite 3", map[string]any{"ipmi_cipher_suite": "3"}, 2 * time.Second},
			{"negotiated suite", map[string]any{"ipmi_cipher_suite": ""}, 2 * time.Second}, // 3, then 17
			// ipmi_sim drops an IPMI 1.5 Activate Session with a wrong
			// auth code: one attempt waits out ipmitool's -N 2.
			{"IPMI 1.5", map[string]any{"ipmi_cipher_suite": "", "ipmi_protocol_version": "1.5"}, 5 * time.Second},
		} {
			d := NewDrivers(Options{})
			tk := simTask(b)
			tk.DriverInfo["ipmi_password"] = "hunter2wrong"
			for k, v := range tc.extra {
				tk.DriverInfo[k] = v
			}
			start := time.Now()
			_, err := d.Power().GetPowerState(ctx, tk)
			took := time.Since(start)
			var ae *driver.BMCAuthError
			if !errors.As(err, &ae) || ae.Address != "127.0.0.1:"+strconv.Itoa(b.Port) || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("%s: want a BMCAuthError, got %T %v", tc.name, err, err)
			}
			if took > tc.bound {
				t.Fatalf("%s: an authentication failure took %v (the retry timeout is 60 s)", tc.name, took)
			}
			t.Logf("%s: %v in %v", tc.name, err, took)
		}
	})
	t.Run("unsupported cipher suite", func(t *testing.T) {
		// ipmi_sim lacks suite 17: a cipher failure, not an authentication
		// one, whatever the password, and not retried.
		for _, pw := range []string{b.Password, "hunter2wrong"} {
			d := NewDrivers(Options{})
			tk := simTask(b)
			tk.DriverInfo["ipmi_cipher_suite"] = "17"
			tk.DriverInfo["ipmi_password"] = pw
			start := time.Now()
			_, err := d.Power().GetPowerState(ctx, tk)
			var ce *CommandError
			if !errors.As(err, &ce) || ce.Class != FailCipher || ce.Attempts != 1 || errors.Is(err, driver.ErrBMCAuthentication) ||
				!strings.Contains(err.Error(), "invalid authentication algorithm") || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("want a cipher CommandError, got %v", err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("a cipher mismatch took %v", took)
			}
		}
	})
	t.Run("closed port", func(t *testing.T) {
		const retry = 3 * time.Second
		d := NewDrivers(Options{RetryTimeout: retry, MinCommandInterval: time.Second})
		tk := simTask(b)
		port := closedUDPPort(t)
		tk.DriverInfo["ipmi_port"] = strconv.Itoa(port)
		start := time.Now()
		err := d.Power().SetPowerState(ctx, tk, driver.PowerOn, 10*time.Second)
		took := time.Since(start)
		var ue *driver.BMCUnreachableError
		if !errors.As(err, &ue) || ue.Address != "127.0.0.1:"+strconv.Itoa(port) || !strings.Contains(err.Error(), "127.0.0.1:"+strconv.Itoa(port)) {
			t.Fatalf("want a BMCUnreachableError naming the port, got %T %v", err, err)
		}
		if took > retry+time.Second || took < retry-time.Second {
			t.Fatalf("took %v with a retry timeout of %v", took, retry)
		}
		t.Logf("%v in %v", err, took)
	})
	t.Run("identity over each session kind", func(t *testing.T) {
		want := ""
		for _, extra := range []map[string]any{
			{"ipmi_cipher_suite": "3"}, {"ipmi_cipher_suite": ""}, {"ipmi_protocol_version": "1.5", "ipmi_cipher_suite": ""}, {"ipmi_priv_level": "OPERATOR"},
		} {
			d := NewDrivers(Options{})
			tk := simTask(b)
			for k, v := range extra {
				tk.DriverInfo[k] = v
			}
			if st, err := d.Power().GetPowerState(ctx, tk); err != nil || st == driver.PowerError {
				t.Fatalf("%v: %q %v", extra, st, err)
			}
			got, _ := tk.DriverInternalInfo[driver.IdentityKey].(string)
			if want == "" {
				want = got
			}
			if got != want || !strings.HasPrefix(got, "ipmi-guid:a1b2c3d4-e5f6-0000-0000-") {
				t.Fatalf("%v: recorded %q, want %q", extra, got, want)
			}
		}
	})
	t.Run("another machine", func(t *testing.T) {
		other := ipmisim.Start(t, ipmisim.Options{})
		d := NewDrivers(Options{PollInterval: 50 * time.Millisecond})
		tk := simTask(b)
		tk.DriverInternalInfo = map[string]any{}
		if _, err := d.Power().GetPowerState(ctx, tk); err != nil {
			t.Fatal(err)
		}
		recorded, _ := tk.DriverInternalInfo[driver.IdentityKey].(string)
		if !strings.HasPrefix(recorded, "ipmi-guid:a1b2c3d4-e5f6-") {
			t.Fatalf("recorded %q", recorded)
		}
		tk.DriverInfo["ipmi_port"] = strconv.Itoa(other.Port) // the node's address now reaches another BMC
		err := d.Power().SetPowerState(ctx, tk, driver.PowerOn, 10*time.Second)
		var mm *driver.IdentityMismatchError
		if !errors.As(err, &mm) || mm.Recorded != recorded || mm.Reported == recorded {
			t.Fatalf("want an IdentityMismatchError, got %v", err)
		}
		if other.Power() || len(other.Events()) != 0 {
			t.Fatalf("the other machine was acted on: power %v, events %v", other.Power(), other.Events())
		}
		t.Log(err)
	})
}
