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
