package ironicapi

import (
	"errors"
	"fmt"
	"regexp"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
)

// internalText matches what a client must never read in a faultstring:
// the library's package prefixes and its wrapping of verbs.
var internalText = regexp.MustCompile(`(?:^|[: ])(?:baremetal|conductor|driver|sqlstore|steps|plugin): |enroll node|update node|not stored\)`)

// TestPublicMessages maps representative library errors, wrapped as the
// conductor wraps them, to the status and faultstring Ironic gives the
// same condition, and checks the wrapped text stays for the log.
func TestPublicMessages(t *testing.T) {
	node := "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	wrap := func(verb string, err error) error { return fmt.Errorf("%s node %s: %w", verb, node, err) }
	for _, tc := range []struct {
		name   string
		err    error
		status int
		want   string
	}{
		{"unknown hardware type", fmt.Errorf("enroll node (unnamed, not stored): %w",
			&driver.HardwareTypeNotFoundError{Name: "nope", Enabled: []string{"fake-hardware"}}),
			400, `No valid host was found. Reason: No conductor service registered which supports driver nope for conductor group "".`},
		{"unknown interface", wrap("update", &driver.InterfaceNotFoundError{Kind: driver.KindPower, Name: "nope", Valid: []string{"fake", "ipmitool"}}),
			400, "Could not find the following interface in the 'ironic.hardware.interfaces.power' entrypoint: nope. Valid interfaces are ['fake', 'ipmitool']."},
		{"incompatible interface", wrap("update", &baremetal.InvalidFieldError{Kind: "node", Ident: node, Field: "power_interface",
			Expected: "x", Err: &driver.IncompatibleInterfaceError{HardwareType: "fake-hardware", Kind: driver.KindPower, Name: "redfish"}}),
			400, "power interface implementation 'redfish' is not supported by hardware type fake-hardware."},
		{"duplicate name", &baremetal.DuplicateError{Kind: "node", Field: "name", Value: "rack1"},
			409, "A node with name rack1 already exists."},
		{"duplicate MAC", &baremetal.DuplicateError{Kind: "port", Field: "address", Value: "52:54:00:12:34:56"},
			409, "A port with MAC address 52:54:00:12:34:56 already exists."},
		{"duplicate UUID", &baremetal.DuplicateError{Kind: "node", Field: "uuid", Value: node},
			409, "Node with UUID " + node + " already exists."},
		{"not found", wrap("power", &baremetal.NotFoundError{Kind: "deploy_template", Ident: "CUSTOM_X"}),
			404, "Deploy template CUSTOM_X could not be found."},
		{"invalid field", fmt.Errorf("allocate: %w", &baremetal.InvalidFieldError{Kind: "allocation", Field: "candidate_nodes",
			Expected: "existing nodes", Err: errors.New("sqlstore: no rows")}),
			400, "Invalid value for field candidate_nodes of allocation: expected existing nodes."},
		{"invalid driver argument", wrap("set boot device of", &driver.InvalidParameterError{Node: node, Kind: driver.KindManagement, Impl: "fake",
			Field: "args", Key: "boot_device", Expected: `one of [pxe disk], got "floppy"`}),
			400, "Invalid value for boot_device of node " + node + `: expected one of [pxe disk], got "floppy".`},
		{"missing driver_info", wrap("validate", &driver.MissingParameterError{Node: node, Kind: driver.KindPower, Impl: "ipmitool",
			Field: "driver_info", Missing: []string{"ipmi_address"}}),
			400, "Missing the following parameters in node " + node + "'s driver_info, required by its power interface ipmitool: ipmi_address."},
		{"unsupported", wrap("set console mode of", &driver.UnsupportedError{Node: node, Kind: driver.KindConsole, Impl: "no-console", Operation: "validate"}),
			400, "The console interface no-console of node " + node + " does not support validate (disabled or not implemented)."},
		{"verb refused", &conductor.VerbError{Verb: "clean", Node: node, State: "manageable", Reason: "conductor: the runbook has no traits"},
			400, `Cannot clean node ` + node + ` in state "manageable": the runbook has no traits.`},
		{"locked", wrap("power", &baremetal.NodeLockedError{Node: node, Holder: "c-1"}),
			409, "Node " + node + " is locked by host c-1, please retry after the current operation is completed."},
		{"lost update", wrap("update", &baremetal.ConflictError{Kind: "node", Ident: node, Expected: 3, Actual: 4}),
			409, "Node " + node + " was changed by another request; retry the request."},
		{"port group not empty", &baremetal.PortgroupNotEmptyError{Portgroup: "bond0"},
			400, "Cannot complete the requested action because portgroup bond0 contains ports."},
		{"concurrency limit", &conductor.ConcurrentActionLimitError{Node: node, Action: "provisioning", Limit: 1},
			503, "Unable to process request at this time. The concurrent action limit for provisioning has been reached. Please try again later."},
		{"no conductor", wrap("deploy", &conductor.NoConductorError{Node: node, HardwareType: "ipmi", Alive: []string{"c-1"}}),
			503, `No valid host was found. Reason: No conductor service registered which supports driver ipmi for conductor group "".`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := toError(tc.err)
			if e.Status != tc.status {
				t.Errorf("status %d, want %d", e.Status, tc.status)
			}
			if e.Message != tc.want {
				t.Errorf("faultstring\n %q\nwant\n %q", e.Message, tc.want)
			}
			if internalText.MatchString(e.Message) {
				t.Errorf("faultstring %q carries internal text", e.Message)
			}
			if e.detail != tc.err.Error() {
				t.Errorf("detail %q; want the wrapped error %q for the log", e.detail, tc.err.Error())
			}
		})
	}
}

// TestStripInternal removes package prefixes wherever a part starts.
func TestStripInternal(t *testing.T) {
	for in, want := range map[string]string{
		"baremetal: node x: driver: power/fake: boom": "node x: power/fake: boom",
		"conductor: not running: c-1":                 "not running: c-1",
		"a drivers: note":                             "a drivers: note",
	} {
		if got := stripInternal(in); got != want {
			t.Errorf("stripInternal(%q) = %q, want %q", in, got, want)
		}
	}
}
