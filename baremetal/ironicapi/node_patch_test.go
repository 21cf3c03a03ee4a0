package ironicapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/statemachine"
)

func TestNodePatchRules(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	st, _, body := do(t, "POST", l.srv.URL+"/v1/nodes", "1.89",
		`{"name":"pr","driver":"fake-hardware","maintenance_reason":"x","extra":{"a":1},"automated_clean":true}`)
	if st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	var defaults map[string]any
	_ = json.Unmarshal([]byte(body), &defaults)
	// An interface the registry no longer enables (as after a
	// configuration change): only ?reset_interfaces gets the node out.
	n, _ := l.c.Store().GetNode(ctx, "pr")
	n.ConsoleInterface = "retired-console"
	if err := l.c.Store().UpdateNode(ctx, n, ""); err != nil {
		t.Fatal(err)
	}
	url := l.srv.URL + "/v1/nodes/pr"
	cases := []struct {
		name, version, query, patch string
		status                      int
		check                       func(doc map[string]any) bool
		fault                       string
	}{
		{"reset_interfaces needs 1.45", "1.44", "?reset_interfaces=true", `[{"op":"replace","path":"/driver","value":"fake-hardware"}]`, 406, nil, "Request not acceptable."},
		{"reset_interfaces needs a driver change", "1.89", "?reset_interfaces=true", `[{"op":"replace","path":"/name","value":"pr"}]`, 400, nil,
			"The reset_interfaces parameter can only be used when changing the node's driver."},
		{"a driver change alone keeps the interfaces", "1.89", "",
			`[{"op":"replace","path":"/driver","value":"fake-hardware"},{"op":"add","path":"/extra/b","value":2}]`, 400, nil, "retired-console"},
		{"reset_interfaces keeps what the patch sets", "1.89", "?reset_interfaces=true",
			`[{"op":"replace","path":"/driver","value":"fake-hardware"},{"op":"replace","path":"/console_interface","value":"retired-console"}]`, 400, nil, "retired-console"},
		{"reset_interfaces resets the others", "1.89", "?reset_interfaces=True",
			`[{"op":"replace","path":"/driver","value":"fake-hardware"}]`, 200,
			func(d map[string]any) bool {
				return d["console_interface"] == defaults["console_interface"] && d["reservation"] == nil
			}, ""},
		{"removing a root string resets it", "1.89", "", `[{"op":"remove","path":"/maintenance_reason"}]`, 200,
			func(d map[string]any) bool { return d["maintenance_reason"] == nil }, ""},
		{"removing a root object empties it", "1.89", "", `[{"op":"remove","path":"/extra"}]`, 200,
			func(d map[string]any) bool { return len(d["extra"].(map[string]any)) == 0 }, ""},
		{"removing automated_clean unsets it", "1.89", "", `[{"op":"remove","path":"/automated_clean"}]`, 200,
			func(d map[string]any) bool { return d["automated_clean"] == nil }, ""},
		{"driver cannot be removed", "1.89", "", `[{"op":"remove","path":"/driver"}]`, 400, nil, "mandatory attribute"},
		{"traits are not patched", "1.89", "", `[{"op":"add","path":"/traits","value":["CUSTOM_A"]}]`, 400, nil,
			"Cannot update node traits via node patch."},
		{"a field newer than the version", "1.49", "", `[{"op":"replace","path":"/owner","value":"p"}]`, 406, nil, "Request not acceptable."},
		{"names need 1.5", "1.4", "", `[{"op":"replace","path":"/name","value":"pr2"}]`, 406, nil, "Request not acceptable."},
		{"an invalid name", "1.89", "", `[{"op":"replace","path":"/name","value":"a b"}]`, 400, nil, "Node pr: Cannot change name to invalid name 'a b'"},
		{"unknown interface", "1.89", "", `[{"op":"replace","path":"/power_interface","value":"ipmitool"}]`, 400, nil, "ipmitool"},
		{"description too long", "1.89", "", `[{"op":"replace","path":"/description","value":"` + strings.Repeat("d", 4097) + `"}]`, 400, nil,
			"Cannot update node with description exceeding 4096 characters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := l.c.Store().GetNode(ctx, "pr")
			st, _, body := do(t, "PATCH", url+tc.query, tc.version, tc.patch)
			if st != tc.status {
				t.Fatalf("status %d, want %d: %s", st, tc.status, body)
			}
			if st != 200 {
				if f := faultString(t, body); !strings.Contains(f, tc.fault) {
					t.Fatalf("fault %q, want %q", f, tc.fault)
				}
				after, _ := l.c.Store().GetNode(ctx, "pr")
				if after.Version != before.Version || after.Reservation != "" {
					t.Fatalf("a refused patch wrote or left a lock")
				}
				return
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(body), &doc); err != nil {
				t.Fatal(err)
			}
			if !tc.check(doc) {
				t.Fatalf("patched node %v", doc)
			}
		})
	}
}

func TestNodePatchInTransition(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	st, _, body := do(t, "POST", l.srv.URL+"/v1/nodes", "1.89", `{"name":"busy","driver":"fake-hardware","instance_uuid":"dddddddd-0000-4000-8000-000000000001"}`)
	if st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	// A node stuck deploying, as a crashed deploy leaves it.
	n, _ := l.c.Store().GetNode(ctx, "busy")
	n.ProvisionState, n.TargetProvisionState = statemachine.Deploying, statemachine.Active
	if err := l.c.Store().UpdateNode(ctx, n, ""); err != nil {
		t.Fatal(err)
	}
	removeInstance := `[{"op":"remove","path":"/instance_uuid"}]`
	st, _, body = do(t, "PATCH", l.srv.URL+"/v1/nodes/busy", "1.89", removeInstance)
	if st != 409 || faultString(t, body) != "Node busy can not be updated while a state transition is in progress." {
		t.Fatalf("patch in transition: %d %s", st, body)
	}
	// In maintenance, the lone instance_uuid removal goes through; any
	// other patch is still refused.
	if err := l.c.SetMaintenance(ctx, n.UUID, true, "stuck"); err != nil {
		t.Fatal(err)
	}
	st, _, body = do(t, "PATCH", l.srv.URL+"/v1/nodes/busy", "1.89", `[{"op":"remove","path":"/instance_uuid"},{"op":"add","path":"/extra/a","value":1}]`)
	if st != 409 {
		t.Fatalf("two-operation patch in maintenance: %d %s", st, body)
	}
	st, _, body = do(t, "PATCH", l.srv.URL+"/v1/nodes/busy", "1.89", removeInstance)
	if st != 200 || !strings.Contains(body, `"instance_uuid":null`) {
		t.Fatalf("instance_uuid removal in maintenance: %d %s", st, body)
	}
	got, _ := l.c.Store().GetNode(ctx, "busy")
	if got.InstanceUUID != "" || got.ProvisionState != statemachine.Deploying || got.Reservation != "" {
		t.Fatalf("after: %+v", got)
	}
}
