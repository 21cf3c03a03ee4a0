package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	pb "github.com/anvilmetal/anvil/driver/plugin/internal/proto"
	"github.com/anvilmetal/anvil/steps"
)

// TestProxyHasExactlyTheAdvertisedCapabilities builds a proxy of every
// kind for every combination of advertised capabilities at both accepted
// protocol versions and checks that driver.As answers yes for exactly the
// capabilities that were advertised, are allowed for the kind and are
// carried by the negotiated version. The expectations are written out
// here, apart from the capability table they check.
func TestProxyHasExactlyTheAdvertisedCapabilities(t *testing.T) {
	type check struct {
		name  string
		kind  driver.Kind // "" for any kind
		since int
		has   func(driver.Interface) bool
	}
	checks := []check{
		{"step_runner", "", 1, func(i driver.Interface) bool {
			// Every proxy is a StepRunner by its type; one whose plugin did
			// not advertise the capability refuses every step without a call.
			r, _ := driver.As[driver.StepRunner](i)
			_, err := r.ExecuteStep(context.Background(), &driver.Task{}, steps.Clean, steps.Step{Name: "s"})
			return !errors.Is(err, driver.ErrStepNotFound)
		}},
		{"step_preparer", driver.KindDeploy, 2, func(i driver.Interface) bool { _, ok := driver.As[driver.StepPreparer](i); return ok }},
		{"boot_mode", driver.KindManagement, 2, func(i driver.Interface) bool { _, ok := driver.As[driver.BootModeManager](i); return ok }},
		{"nmi", driver.KindManagement, 3, func(i driver.Interface) bool { _, ok := driver.As[driver.NMIInjector](i); return ok }},
		{"indicator", driver.KindManagement, 3, func(i driver.Interface) bool { _, ok := driver.As[driver.IndicatorManager](i); return ok }},
		{"secure_boot", driver.KindManagement, 3, func(i driver.Interface) bool { _, ok := driver.As[driver.SecureBootManager](i); return ok }},
		{"sensors", driver.KindManagement, 3, func(i driver.Interface) bool { _, ok := driver.As[driver.SensorReader](i); return ok }},
		{"virtual_media", driver.KindManagement, 3, func(i driver.Interface) bool {
			_, ok := driver.As[driver.VirtualMediaManager](i)
			return ok
		}},
		{"health", driver.KindManagement, 3, func(i driver.Interface) bool { _, ok := driver.As[driver.HealthReader](i); return ok }},
	}
	var table []string
	for _, c := range capabilities() {
		table = append(table, c.name)
	}
	var names []string
	for _, c := range checks {
		names = append(names, c.name)
	}
	if !slices.Equal(table, names) {
		t.Fatalf("capability table %v, this test checks %v: add the new capability's expectation here", table, names)
	}
	p := newTestPlugin(&recordingClient{})
	for _, kind := range driver.Kinds() {
		for _, version := range HostProtocolVersions() {
			for mask := range 1 << len(checks) {
				var list []string
				for bit, c := range checks {
					if mask&(1<<bit) != 0 {
						list = append(list, c.name)
					}
				}
				impl, err := p.newProxy(&pb.Implementation{Kind: string(kind), Name: "x", Capabilities: list}, version)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := driver.As[driver.AvailabilityReporter](impl); !ok {
					t.Fatalf("%s %v v%d: lost AvailabilityReporter", kind, list, version)
				}
				if _, ok := driver.As[driver.StepRunner](impl); !ok {
					t.Fatalf("%s %v v%d: lost StepRunner", kind, list, version)
				}
				for bit, c := range checks {
					want := mask&(1<<bit) != 0 && (c.kind == "" || c.kind == kind) && c.since <= version
					if got := c.has(impl); got != want {
						t.Errorf("%s advertising %v at v%d: %s present=%v, want %v", kind, list, version, c.name, got, want)
					}
				}
			}
		}
	}
}

// TestProxyCapabilitiesCallTheirOperation checks that each capability a
// proxy provides sends its own operation and arguments.
func TestProxyCapabilitiesCallTheirOperation(t *testing.T) {
	all := []string{"step_preparer", "boot_mode", "nmi", "indicator", "secure_boot", "sensors", "virtual_media", "health"}
	ctx := context.Background()
	cases := []struct {
		kind driver.Kind
		op   string
		args string
		call func(driver.Interface) error
	}{
		{driver.KindDeploy, opPrepareSteps, `{"step_kind":"clean"}`, func(i driver.Interface) error {
			c, _ := driver.As[driver.StepPreparer](i)
			_, err := c.PrepareSteps(ctx, &driver.Task{}, steps.Clean)
			return err
		}},
		{driver.KindDeploy, opTearDownSteps, `{"step_kind":"service"}`, func(i driver.Interface) error {
			c, _ := driver.As[driver.StepPreparer](i)
			return c.TearDownSteps(ctx, &driver.Task{}, steps.Service)
		}},
		{driver.KindManagement, opSetBootMode, `{"mode":"uefi"}`, func(i driver.Interface) error {
			c, _ := driver.As[driver.BootModeManager](i)
			return c.SetBootMode(ctx, &driver.Task{}, driver.BootModeUEFI)
		}},
		{driver.KindManagement, opInjectNMI, ``, func(i driver.Interface) error {
			c, _ := driver.As[driver.NMIInjector](i)
			return c.InjectNMI(ctx, &driver.Task{})
		}},
		{driver.KindManagement, opSetIndicatorState, `{"indicator":"blinking"}`, func(i driver.Interface) error {
			c, _ := driver.As[driver.IndicatorManager](i)
			return c.SetIndicatorState(ctx, &driver.Task{}, driver.IndicatorBlinking)
		}},
		{driver.KindManagement, opSetSecureBootState, `{"enabled":true}`, func(i driver.Interface) error {
			c, _ := driver.As[driver.SecureBootManager](i)
			return c.SetSecureBootState(ctx, &driver.Task{}, true)
		}},
		{driver.KindManagement, opGetSensorsData, ``, func(i driver.Interface) error {
			c, _ := driver.As[driver.SensorReader](i)
			_, err := c.Sensors(ctx, &driver.Task{})
			return err
		}},
		{driver.KindManagement, opAttachVirtualMedia, `{"vmedia_device":"cdrom","image_url":"http://192.0.2.1/a.iso"}`, func(i driver.Interface) error {
			c, _ := driver.As[driver.VirtualMediaManager](i)
			return c.AttachVirtualMedia(ctx, &driver.Task{}, driver.VirtualMediaCDROM, "http://192.0.2.1/a.iso")
		}},
		{driver.KindManagement, opDetachVirtualMedia, `{"vmedia_devices":["disk","floppy"]}`, func(i driver.Interface) error {
			c, _ := driver.As[driver.VirtualMediaManager](i)
			return c.DetachVirtualMedia(ctx, &driver.Task{}, []driver.VirtualMediaDevice{driver.VirtualMediaDisk, driver.VirtualMediaFloppy})
		}},
		{driver.KindManagement, opGetVirtualMedia, ``, func(i driver.Interface) error {
			c, _ := driver.As[driver.VirtualMediaManager](i)
			_, err := c.VirtualMedia(ctx, &driver.Task{})
			return err
		}},
		{driver.KindManagement, opGetNodeHealth, ``, func(i driver.Interface) error {
			c, _ := driver.As[driver.HealthReader](i)
			_, err := c.Health(ctx, &driver.Task{})
			return err
		}},
	}
	for _, tc := range cases {
		rec := &recordingClient{}
		impl, err := newTestPlugin(rec).newProxy(&pb.Implementation{Kind: string(tc.kind), Name: "x", Capabilities: all}, ProtocolVersion)
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.call(impl); err != nil {
			t.Fatalf("%s: %v", tc.op, err)
		}
		if len(rec.reqs) != 1 || rec.reqs[0].Operation != tc.op || string(rec.reqs[0].ArgsJson) != tc.args || rec.reqs[0].Kind != string(tc.kind) {
			t.Errorf("%s sent %v", tc.op, rec.reqs)
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
