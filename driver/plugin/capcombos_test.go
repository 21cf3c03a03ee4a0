package plugin

import (
	"errors"
	"fmt"
	"testing"

	"github.com/anvilmetal/anvil/driver"
)

// TestManagementWithCapsHasExactlyTheAdvertisedCapabilities checks every
// combination of the generated capcombos.go: a type assertion answers yes
// for exactly the capabilities whose bit is set.
func TestManagementWithCapsHasExactlyTheAdvertisedCapabilities(t *testing.T) {
	m := managementProxy{&proxy{kind: driver.KindManagement, name: "x"}}
	checks := []func(driver.Interface) bool{
		func(i driver.Interface) bool { _, ok := i.(driver.BootModeManager); return ok },
		func(i driver.Interface) bool { _, ok := i.(driver.NMIInjector); return ok },
		func(i driver.Interface) bool { _, ok := i.(driver.IndicatorManager); return ok },
		func(i driver.Interface) bool { _, ok := i.(driver.SecureBootManager); return ok },
		func(i driver.Interface) bool { _, ok := i.(driver.SensorReader); return ok },
	}
	for mask := uint(0); mask < 1<<len(checks); mask++ {
		impl := managementWithCaps(m, mask)
		if _, ok := impl.(driver.ManagementInterface); !ok {
			t.Fatalf("mask %05b: not a management interface", mask)
		}
		if _, ok := impl.(driver.AvailabilityReporter); !ok {
			t.Fatalf("mask %05b: lost AvailabilityReporter", mask)
		}
		for bit, has := range checks {
			if want := mask&(1<<bit) != 0; has(impl) != want {
				t.Errorf("mask %05b: capability %d present=%v, want %v", mask, bit, has(impl), want)
			}
		}
	}
}

// TestUnavailableErrorCrossesTheWire encodes and decodes an unavailable
// error as the plugin and the host do.
func TestUnavailableErrorCrossesTheWire(t *testing.T) {
	cause := errors.New("ipmitool is not installed")
	err := decodeError("ipmi", encodeError(driver.NewUnavailableError(driver.KindPower, "ipmitool", cause)))
	var ue *driver.UnavailableError
	var remote *RemoteError
	if !errors.Is(err, driver.ErrUnavailable) || !errors.As(err, &ue) || !errors.As(err, &remote) {
		t.Fatalf("decoded %#v", err)
	}
	if ue.Kind != driver.KindPower || ue.Impl != "ipmitool" || ue.Reason != cause.Error() || remote.Plugin != "ipmi" {
		t.Errorf("decoded fields %+v (plugin %q)", ue, remote.Plugin)
	}
}

// TestBMCErrorsCrossTheWire checks that the BMC authentication,
// reachability and identity errors keep their type and fields through the
// plugin boundary, so a conductor branches on them as on built-in ones.
func TestBMCErrorsCrossTheWire(t *testing.T) {
	cases := []struct {
		in       error
		sentinel error
		check    func(error) bool
	}{
		{&driver.BMCAuthError{Node: "n1", Kind: driver.KindPower, Impl: "ipmitool", Address: "127.0.0.1:623", Username: "admin"},
			driver.ErrBMCAuthentication, func(err error) bool {
				var e *driver.BMCAuthError
				return errors.As(err, &e) && e.Address == "127.0.0.1:623" && e.Username == "admin"
			}},
		{&driver.BMCUnreachableError{Node: "n1", Kind: driver.KindPower, Impl: "ipmitool", Address: "127.0.0.1:1", Attempts: 3, Waited: "6s"},
			driver.ErrBMCUnreachable, func(err error) bool {
				var e *driver.BMCUnreachableError
				return errors.As(err, &e) && e.Attempts == 3 && e.Address == "127.0.0.1:1"
			}},
		{&driver.IdentityMismatchError{Node: "n1", Kind: driver.KindPower, Impl: "redfish", Address: "https://bmc", Recorded: "redfish-uuid:a", Reported: "redfish-uuid:b"},
			driver.ErrIdentityMismatch, func(err error) bool {
				var e *driver.IdentityMismatchError
				return errors.As(err, &e) && e.Recorded == "redfish-uuid:a" && e.Reported == "redfish-uuid:b"
			}},
	}
	for _, tc := range cases {
		err := decodeError("p", encodeError(fmt.Errorf("power: %w", tc.in)))
		if !errors.Is(err, tc.sentinel) || !tc.check(err) {
			t.Errorf("%T decoded as %#v", tc.in, err)
		}
	}
}
