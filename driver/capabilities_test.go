package driver_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/fake"
)

// needsTool is an implementation whose prerequisite is missing.
type needsTool struct {
	*fake.Power
	missing error
}

func (n needsTool) Unavailable() error {
	return driver.NewUnavailableError(driver.KindPower, "needs-tool", n.missing)
}

func TestAvailability(t *testing.T) {
	if err := driver.Available(fake.NewPower(fake.Config{})); err != nil {
		t.Fatalf("fake power without the capability: %v", err)
	}
	if err := driver.Available(needsTool{Power: fake.NewPower(fake.Config{})}); err != nil {
		t.Fatalf("nothing missing: %v", err)
	}
	cause := fmt.Errorf("anvil-tool is not installed: %w", exec.ErrNotFound)
	err := driver.Available(needsTool{Power: fake.NewPower(fake.Config{}), missing: cause})
	var ue *driver.UnavailableError
	if !errors.Is(err, driver.ErrUnavailable) || !errors.As(err, &ue) || ue.Kind != driver.KindPower || ue.Impl != "needs-tool" {
		t.Fatalf("Available = %#v", err)
	}
	if !errors.Is(err, exec.ErrNotFound) || !strings.Contains(err.Error(), "power/needs-tool: unavailable on this host: ") || !strings.Contains(err.Error(), "anvil-tool") {
		t.Errorf("error %q does not keep its cause", err)
	}
	if again := driver.NewUnavailableError(driver.KindPower, "needs-tool", err); again != err {
		t.Errorf("re-wrapping the same implementation's error changed it: %v", again)
	}
}

func TestFakeManagementCapabilities(t *testing.T) {
	var m driver.ManagementInterface = fake.NewManagement(fake.Config{})
	ctx := context.Background()
	task := &driver.Task{NodeUUID: "11111111-2222-3333-4444-555555555555"}
	ind := m.(driver.IndicatorManager)
	if s, err := ind.GetIndicatorState(ctx, task); err != nil || s != driver.IndicatorOff {
		t.Fatalf("default indicator %q %v", s, err)
	}
	for _, s := range []driver.IndicatorState{driver.IndicatorOn, driver.IndicatorBlinking, driver.IndicatorOff} {
		if err := ind.SetIndicatorState(ctx, task, s); err != nil {
			t.Fatal(err)
		}
		if got, _ := ind.GetIndicatorState(ctx, task); got != s {
			t.Errorf("indicator %q, want %q", got, s)
		}
	}
	if driver.IndicatorUnknown.Valid() {
		t.Error("unknown is not a settable indicator state")
	}
	nmi := m.(driver.NMIInjector)
	for range 2 {
		if err := nmi.InjectNMI(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	if n := task.DriverInternalInfo[fake.NMICountKey]; n != float64(2) {
		t.Errorf("nmi count %v", n)
	}
	task.DriverInfo = map[string]any{fake.FailKey: "management.inject_nmi"}
	if err := nmi.InjectNMI(ctx, task); !errors.Is(err, driver.ErrInjectedFailure) {
		t.Errorf("injected failure: %v", err)
	}
	sb := m.(driver.SecureBootManager)
	if on, err := sb.GetSecureBootState(ctx, task); err != nil || on {
		t.Fatalf("default secure boot %v %v", on, err)
	}
	if err := sb.SetSecureBootState(ctx, task, true); err != nil {
		t.Fatal(err)
	}
	if on, _ := sb.GetSecureBootState(ctx, task); !on {
		t.Error("secure boot not recorded")
	}
	r, err := m.(driver.SensorReader).Sensors(ctx, task)
	if err != nil || len(r) != 2 || r[1].Type != driver.SensorFan || *r[1].Value != 4200 {
		t.Errorf("sensors %+v %v", r, err)
	}
}

// TestFakeVirtualMedia walks the fake management's virtual media through
// attach, replace, partial and full detach, and its refusals.
func TestFakeVirtualMedia(t *testing.T) {
	m := fake.NewManagement(fake.Config{})
	vm, ok := driver.As[driver.VirtualMediaManager](m)
	if !ok {
		t.Fatal("the fake management is no VirtualMediaManager")
	}
	ctx := context.Background()
	task := &driver.Task{NodeUUID: "11111111-2222-3333-4444-555555555555"}
	inserted := func() map[string]string {
		t.Helper()
		list, err := vm.VirtualMedia(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 3 {
			t.Fatalf("devices %+v, want CD, USB stick and floppy", list)
		}
		out := map[string]string{}
		for _, d := range list {
			if d.Inserted != (d.Image != "") {
				t.Errorf("device %v: inserted %v with image %q", d.MediaTypes, d.Inserted, d.Image)
			}
			if d.Inserted {
				out[d.MediaTypes[0]] = d.Image
			}
		}
		return out
	}
	type step struct {
		name    string
		attach  driver.VirtualMediaDevice
		url     string
		detach  []driver.VirtualMediaDevice
		wantErr error
		want    map[string]string
	}
	for _, s := range []step{
		{name: "empty at first", want: map[string]string{}},
		{name: "attach cd", attach: driver.VirtualMediaCDROM, url: "http://192.0.2.1/a.iso", want: map[string]string{"CD": "http://192.0.2.1/a.iso"}},
		{name: "replace cd", attach: driver.VirtualMediaCDROM, url: "http://192.0.2.1/b.iso", want: map[string]string{"CD": "http://192.0.2.1/b.iso"}},
		{name: "attach disk", attach: driver.VirtualMediaDisk, url: "http://192.0.2.1/c.img", want: map[string]string{"CD": "http://192.0.2.1/b.iso", "USBStick": "http://192.0.2.1/c.img"}},
		{name: "unknown device", attach: "tape", url: "http://192.0.2.1/d.iso", wantErr: driver.ErrInvalidParameter, want: map[string]string{"CD": "http://192.0.2.1/b.iso", "USBStick": "http://192.0.2.1/c.img"}},
		{name: "no url", attach: driver.VirtualMediaFloppy, wantErr: driver.ErrMissingParameter, want: map[string]string{"CD": "http://192.0.2.1/b.iso", "USBStick": "http://192.0.2.1/c.img"}},
		{name: "detach cd", detach: []driver.VirtualMediaDevice{driver.VirtualMediaCDROM}, want: map[string]string{"USBStick": "http://192.0.2.1/c.img"}},
		{name: "detach unknown", detach: []driver.VirtualMediaDevice{"tape"}, wantErr: driver.ErrInvalidParameter, want: map[string]string{"USBStick": "http://192.0.2.1/c.img"}},
		{name: "detach all", detach: []driver.VirtualMediaDevice{}, want: map[string]string{}},
	} {
		var err error
		switch {
		case s.attach != "" || s.url != "":
			err = vm.AttachVirtualMedia(ctx, task, s.attach, s.url)
		case s.detach != nil:
			err = vm.DetachVirtualMedia(ctx, task, s.detach)
		}
		if !errors.Is(err, s.wantErr) || (err == nil) != (s.wantErr == nil) {
			t.Errorf("%s: error %v, want %v", s.name, err, s.wantErr)
		}
		if got := inserted(); fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Errorf("%s: inserted %v, want %v", s.name, got, s.want)
		}
	}
	task.DriverInfo = map[string]any{fake.FailKey: "management.attach_virtual_media"}
	if err := vm.AttachVirtualMedia(ctx, task, driver.VirtualMediaCDROM, "http://192.0.2.1/a.iso"); !errors.Is(err, driver.ErrInjectedFailure) {
		t.Errorf("injected failure: %v", err)
	}
}
