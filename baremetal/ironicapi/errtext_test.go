package ironicapi_test

import (
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/internal/testlog"
)

// TestFaultstringsReadAsIronic sends requests that fail in the
// conductor, the store and the drivers, and checks the faultstring is
// Ironic's wording, without the library's prefixes or wrapping, while
// the log keeps the wrapped error.
func TestFaultstringsReadAsIronic(t *testing.T) {
	var logs testlog.Buffer
	l := newLab(t, func(_ *conductor.Options, o *ironicapi.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	id := newNode(t, l, "faults", "")
	internal := regexp.MustCompile(`(?:^|[: ])(?:baremetal|conductor|driver|sqlstore|steps|plugin): |enroll node|update node|not stored\)`)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		want, logged             string
	}{
		{"unknown hardware type", "POST", "nodes", `{"driver":"nope"}`, 400,
			`No valid host was found. Reason: No conductor service registered which supports driver nope for conductor group "".`,
			`enroll node (unnamed, not stored): driver: hardware type \"nope\" not found`},
		{"unknown interface", "POST", "nodes", `{"driver":"fake-hardware","power_interface":"nope"}`, 400,
			"Could not find the following interface in the 'ironic.hardware.interfaces.power' entrypoint: nope. Valid interfaces are ['fake'].",
			`driver: power interface \"nope\" not found`},
		{"duplicate name", "POST", "nodes", `{"driver":"fake-hardware","name":"faults"}`, 409,
			"A node with name faults already exists.", `baremetal: node with name \"faults\" already exists`},
		{"driver change to an unknown type", "PATCH", "nodes/faults", `[{"op":"replace","path":"/driver","value":"nope"}]`, 400,
			`No valid host was found. Reason: No conductor service registered which supports driver nope for conductor group "".`,
			"update node " + id},
		{"interface change to an unknown one", "PATCH", "nodes/faults", `[{"op":"replace","path":"/deploy_interface","value":"nope"}]`, 400,
			"Could not find the following interface in the 'ironic.hardware.interfaces.deploy' entrypoint: nope. Valid interfaces are ['fake'].",
			"update node " + id},
		{"driver refusal", "PUT", "nodes/faults/management/boot_device", `{"boot_device":"floppy"}`, 400,
			"Invalid value for boot_device of node " + id + ": expected one of [pxe disk cdrom bios safe], got \"floppy\".",
			`management/fake: node ` + id},
		{"unsupported interface", "PUT", "nodes/faults/states/console", `{"enabled":true}`, 400,
			"The console interface no-console does not support validate (disabled or not implemented).",
			"set console mode of node " + id},
		{"unknown allocation candidate", "POST", "allocations", `{"resource_class":"x","candidate_nodes":["nope"]}`, 400,
			`Invalid value for field candidate_nodes of allocation: expected existing nodes (UUIDs or names); candidate 0, "nope", is not one.`,
			"baremetal: allocation: invalid candidate_nodes"},
		{"invalid state", "PUT", "nodes/faults/states/provision", `{"target":"active"}`, 400,
			`The requested action "active" can not be performed on node "` + id + `" while it is in state "enroll".`, ""},
		{"not found", "GET", "nodes/nope", "", 404, "Node nope could not be found.", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, body := do(t, tc.method, l.srv.URL+"/v1/"+tc.path, "1.95", tc.body)
			got := faultString(t, body)
			if st != tc.status || got != tc.want {
				t.Errorf("%d %q\nwant %d %q", st, got, tc.status, tc.want)
			}
			if internal.MatchString(got) {
				t.Errorf("faultstring %q carries internal text", got)
			}
			if tc.logged != "" && !strings.Contains(logs.String(), tc.logged) {
				t.Errorf("log lacks the wrapped error %q:\n%s", tc.logged, logs.String())
			}
		})
	}

	// Deleting an active node: Ironic's InvalidState text (409), its
	// valid states as Python prints the tuple.
	url := l.srv.URL + "/v1/nodes/faults"
	for _, target := range []string{"manage", "provide", "active"} {
		if st, _, body := do(t, "PUT", url+"/states/provision", "1.95", `{"target":"`+target+`"}`); st != 202 {
			t.Fatalf("%s: %d %s", target, st, body)
		}
		waitProvision(t, l, id, map[string]string{"manage": "manageable", "provide": "available", "active": "active"}[target])
	}
	st, _, body := do(t, "DELETE", url, "1.95", "")
	want := `Can not delete node "` + id + `" while it is in provision state "active". Valid provision states to perform deletion are: "('manageable', 'enroll', 'adopt failed', 'available')", or set the node into maintenance mode`
	if got := faultString(t, body); st != 409 || got != want {
		t.Errorf("delete active = %d %q\nwant 409 %q", st, got, want)
	}
}
