package ironicapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// newNode creates a fake-hardware node named name through the API and
// returns its UUID.
func newNode(t *testing.T, l *lab, name, extra string) string {
	t.Helper()
	st, _, body := do(t, "POST", l.srv.URL+"/v1/nodes", "1.95", `{"name":"`+name+`","driver":"fake-hardware"`+extra+`}`)
	if st != 201 {
		t.Fatalf("create %s: %d %s", name, st, body)
	}
	var doc struct{ UUID string }
	_ = json.Unmarshal([]byte(body), &doc)
	return doc.UUID
}

// setState writes a provision state straight into the store, as a
// crashed or parked operation leaves a node.
func setState(t *testing.T, l *lab, ident string, state, target statemachine.State, edit func(n *baremetal.Node)) {
	t.Helper()
	ctx := context.Background()
	n, err := l.c.Store().GetNode(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	n.ProvisionState, n.TargetProvisionState = state, target
	if edit != nil {
		edit(n)
	}
	if err := l.c.Store().UpdateNode(ctx, n, ""); err != nil {
		t.Fatal(err)
	}
}

// waitState polls GET /v1/nodes/{id} through gophercloud, as Ironic's
// clients do, until the node reaches state with no target.
func waitState(t *testing.T, sc *gophercloud.ServiceClient, id, state string) *nodes.Node {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := nodes.Get(context.Background(), sc, id).Extract()
		if err != nil {
			t.Fatal(err)
		}
		// A failure state keeps the target it failed to reach.
		if n.ProvisionState == state && (n.TargetProvisionState == "" || strings.HasSuffix(state, "failed")) {
			return n
		}
		if strings.HasSuffix(n.ProvisionState, "failed") && !strings.HasSuffix(state, "failed") {
			t.Fatalf("node %s reached %s waiting for %s: %s", id, n.ProvisionState, state, n.LastError)
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still %s (target %s) waiting for %s", id, n.ProvisionState, n.TargetProvisionState, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestProvisionRefusals(t *testing.T) {
	l := newLab(t, func(co *conductor.Options, _ *ironicapi.Options) { co.MaxConcurrentDeploy = 1 })
	enroll := newNode(t, l, "p-enroll", "")
	manageable := newNode(t, l, "p-manageable", "")
	setState(t, l, manageable, statemachine.Manageable, "", nil)
	available := newNode(t, l, "p-available", "")
	setState(t, l, available, statemachine.Available, "", nil)
	active := newNode(t, l, "p-active", "")
	setState(t, l, active, statemachine.Active, "", nil)
	maint := newNode(t, l, "p-maint", "")
	setState(t, l, maint, statemachine.Available, "", func(n *baremetal.Node) { n.Maintenance = true })
	waiting := newNode(t, l, "p-waiting", "")
	setState(t, l, waiting, statemachine.DeployWait, statemachine.Active, nil)
	held := newNode(t, l, "p-held", "")
	setState(t, l, held, statemachine.DeployHold, statemachine.Active, nil)
	inspecting := newNode(t, l, "p-inspecting", "")
	setState(t, l, inspecting, statemachine.InspectWait, statemachine.Manageable, nil)
	locked := newNode(t, l, "p-locked", "")
	setState(t, l, locked, statemachine.Deploying, statemachine.Active, nil)
	if _, err := l.c.Store().ReserveNode(context.Background(), locked, "other-host"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, node, version, body string
		status                    int
		fault                     string
	}{
		{"unknown target", enroll, "1.89", `{"target":"fly"}`, 400,
			fmt.Sprintf(`The requested action "fly" can not be performed on node "%s" while it is in state "enroll".`, enroll)},
		{"target refused by the state", enroll, "1.89", `{"target":"provide"}`, 400,
			fmt.Sprintf(`The requested action "provide" can not be performed on node "%s" while it is in state "enroll".`, enroll)},
		{"manage needs 1.4", enroll, "1.3", `{"target":"manage"}`, 406, "Request not acceptable."},
		{"undeploy needs 1.73", active, "1.72", `{"target":"undeploy"}`, 406, "Request not acceptable."},
		{"locked node", locked, "1.89", `{"target":"manage"}`, 409, fmt.Sprintf("Node %s is locked by host other-host", locked)},
		{"deploy in maintenance", maint, "1.89", `{"target":"active"}`, 400,
			fmt.Sprintf("The provisioning operation can't be performed on node %s because it's in maintenance mode.", maint)},
		{"config drive object before 1.56", available, "1.55", `{"target":"active","configdrive":{"user_data":"x"}}`, 400,
			"Providing a JSON object for configdrive is only supported starting with API version 1.56"},
		{"vendor_data before 1.59", available, "1.58", `{"target":"active","configdrive":{"vendor_data":{}}}`, 400,
			"Providing vendor_data in configdrive is only supported starting with API version 1.59"},
		{"config drive of unknown keys", available, "1.89", `{"target":"active","configdrive":{"colour":{}}}`, 400, "Invalid configdrive format"},
		{"config drive not base64", available, "1.89", `{"target":"active","configdrive":"not*base64"}`, 400,
			"Invalid configdrive format: it is neither a JSON, nor a URL, nor a base64 string"},
		{"config drive with provide", manageable, "1.89", `{"target":"provide","configdrive":"aGk="}`, 400,
			"Adding a config drive is only supported when setting provision state to active, rebuild"},
		{"config drive with rebuild before 1.35", active, "1.34", `{"target":"rebuild","configdrive":"aGk="}`, 400,
			"Adding a config drive is only supported when setting provision state to active"},
		{"clean needs steps", manageable, "1.89", `{"target":"clean"}`, 400,
			`"clean_steps" is required when setting target provision state to clean`},
		{"clean steps with provide", manageable, "1.89", `{"target":"provide","clean_steps":[{"interface":"deploy","step":"erase_devices"}]}`, 400,
			`"clean_steps" is only valid when setting target provision state to clean`},
		{"invalid clean steps", manageable, "1.89", `{"target":"clean","clean_steps":[{"interface":"nope","step":"x"}]}`, 400, "clean_steps"},
		{"deploy steps before 1.69", available, "1.68", `{"target":"active","deploy_steps":[{"interface":"deploy","step":"x","args":{},"priority":1}]}`, 406,
			"Request not acceptable. The minimal required API version should be 1.69"},
		{"deploy steps with manage", available, "1.89", `{"target":"manage","deploy_steps":[{"interface":"deploy","step":"x","args":{},"priority":1}]}`, 400,
			`"deploy_steps" is only valid when setting target provision state to active or rebuild`},
		{"rescue password with deploy", available, "1.89", `{"target":"active","rescue_password":"pw"}`, 400,
			`"rescue_password" is only valid when setting target provision state to rescue`},
		{"rescue needs a password", active, "1.89", `{"target":"rescue","rescue_password":"  "}`, 400,
			`A non-empty "rescue_password" is required when setting target provision state to rescue`},
		{"a malformed rescue password is not echoed", active, "1.89", `{"target":"rescue","rescue_password":987654321}`, 400,
			"Invalid input for field/attribute rescue_password. Wrong type. Expected a string."},
		{"rescue needs 1.38", active, "1.37", `{"target":"rescue","rescue_password":"pw"}`, 406, "Request not acceptable."},
		{"disable_ramdisk with deploy", available, "1.89", `{"target":"active","disable_ramdisk":true}`, 400,
			"disable_ramdisk is supported only with manual cleaning or servicing"},
		{"disable_ramdisk with clean before 1.70", manageable, "1.69", `{"target":"clean","disable_ramdisk":true,"clean_steps":[{"interface":"deploy","step":"erase_devices"}]}`, 406,
			"disable_ramdisk is not acceptable in this API version"},
		{"service needs 1.87", active, "1.86", `{"target":"service","service_steps":[{"interface":"deploy","step":"x"}]}`, 406, "Request not acceptable."},
		{"service needs steps", active, "1.89", `{"target":"service"}`, 400,
			`"service_steps" is required when setting target provision state to service`},
		{"runbook before 1.92", manageable, "1.91", `{"target":"clean","runbook":"rb"}`, 406, "Request not acceptable."},
		{"unknown runbook", manageable, "1.92", `{"target":"clean","runbook":"rb"}`, 404, "Runbook rb could not be found."},
		{"abort wait call-back before 1.110", waiting, "1.109", `{"target":"abort"}`, 406, "Request not acceptable."},
		{"abort inspect wait before 1.41", inspecting, "1.40", `{"target":"abort"}`, 406, "Request not acceptable."},
		{"unhold before 1.85", held, "1.84", `{"target":"unhold"}`, 406, "Request not acceptable."},
		{"unhold where nothing is held", waiting, "1.85", `{"target":"unhold"}`, 400, "can not be performed"},
		{"no target", enroll, "1.89", `{"configdrive":null}`, 400, `Missing argument: "target"`},
		{"unknown key", enroll, "1.89", `{"target":"manage","colour":1}`, 400, `Unknown argument: "colour"`},
		{"target not a string", enroll, "1.89", `{"target":5}`, 400, "target"},
		{"unknown node", "nope", "1.89", `{"target":"manage"}`, 404, "Node nope could not be found."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := l.c.Store().GetNode(context.Background(), tc.node)
			st, _, body := do(t, "PUT", l.srv.URL+"/v1/nodes/"+tc.node+"/states/provision", tc.version, tc.body)
			if st != tc.status {
				t.Fatalf("status %d, want %d: %s", st, tc.status, body)
			}
			if f := faultString(t, body); !strings.Contains(f, tc.fault) {
				t.Fatalf("fault %q, want %q", f, tc.fault)
			}
			if before != nil {
				after, _ := l.c.Store().GetNode(context.Background(), tc.node)
				if after.Version != before.Version || after.Reservation != before.Reservation {
					t.Fatalf("a refused request changed the node (version %d → %d, reservation %q → %q)",
						before.Version, after.Version, before.Reservation, after.Reservation)
				}
			}
		})
	}
	// The concurrent deploy limit (1, and one node is deploying) is a 503
	// with Retry-After.
	st, hdr, body := do(t, "PUT", l.srv.URL+"/v1/nodes/p-available/states/provision", "1.89", `{"target":"active"}`)
	if st != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(faultString(t, body), "concurrent action limit") {
		t.Fatalf("deploy over the limit: %d %v %s", st, hdr, body)
	}
}

func TestNodeStatesDocument(t *testing.T) {
	l := newLab(t)
	id := newNode(t, l, "states-doc", "")
	setState(t, l, id, statemachine.InspectWait, statemachine.Manageable, func(n *baremetal.Node) { n.LastError = "boom" })
	cases := []struct {
		version string
		present []string
		absent  []string
		state   string
	}{
		{"1.11", []string{"console_enabled", "last_error", "power_state", "provision_state", "target_power_state", "target_provision_state", "provision_updated_at"},
			[]string{"raid_config", "boot_mode"}, "inspecting"},
		{"1.39", []string{"raid_config", "target_raid_config"}, []string{"boot_mode", "secure_boot"}, "inspect wait"},
		{"1.75", []string{"boot_mode", "secure_boot", "raid_config"}, nil, "inspect wait"},
	}
	for _, tc := range cases {
		t.Run(tc.version, func(t *testing.T) {
			st, _, body := do(t, "GET", l.srv.URL+"/v1/nodes/states-doc/states", tc.version, "")
			if st != 200 {
				t.Fatalf("%d %s", st, body)
			}
			var doc map[string]any
			_ = json.Unmarshal([]byte(body), &doc)
			for _, k := range tc.present {
				if _, ok := doc[k]; !ok {
					t.Errorf("%s missing", k)
				}
			}
			for _, k := range tc.absent {
				if _, ok := doc[k]; ok {
					t.Errorf("%s shown at %s", k, tc.version)
				}
			}
			if doc["provision_state"] != tc.state || doc["last_error"] != "boom" || doc["target_provision_state"] != "manageable" {
				t.Errorf("states %v", doc)
			}
		})
	}
}

func TestPowerAndConsole(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.89")
	id := newNode(t, l, "pw", "")
	guarded := newNode(t, l, "pw-guarded", `,"disable_power_off":true`)
	cleaning := newNode(t, l, "pw-cleaning", "")
	setState(t, l, cleaning, statemachine.CleanWait, statemachine.Available, nil)
	for _, target := range []nodes.TargetPowerState{nodes.PowerOn, nodes.PowerOff, nodes.Rebooting, nodes.SoftPowerOff} {
		r := nodes.ChangePowerState(ctx, sc, id, nodes.PowerStateOpts{Target: target, Timeout: 30})
		if r.Err != nil {
			t.Fatalf("%s: %v", target, r.Err)
		}
		if !strings.HasSuffix(r.Header.Get("Location"), "/v1/nodes/"+id+"/states") {
			t.Fatalf("Location %q", r.Header.Get("Location"))
		}
		want := map[nodes.TargetPowerState]string{nodes.PowerOn: "power on", nodes.PowerOff: "power off", nodes.Rebooting: "power on", nodes.SoftPowerOff: "power off"}[target]
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, err := nodes.Get(ctx, sc, id).Extract()
			if err != nil {
				t.Fatal(err)
			}
			if n.PowerState == want && n.TargetPowerState == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: power state %q target %q", target, n.PowerState, n.TargetPowerState)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cases := []struct {
		name, node, version, body string
		status                    int
		fault                     string
	}{
		{"soft power off needs 1.27", id, "1.26", `{"target":"soft power off"}`, 406, "Request not acceptable."},
		{"timeout needs 1.27", id, "1.26", `{"target":"power on","timeout":10}`, 406, "Request not acceptable."},
		{"zero timeout", id, "1.27", `{"target":"power on","timeout":0}`, 400, "timeout has to be positive integer"},
		{"timeout not a number", id, "1.27", `{"target":"power on","timeout":"soon"}`, 400, "timeout"},
		{"bad target", "pw", "1.89", `{"target":"power sideways"}`, 400, `The requested action "power sideways" can not be performed on node "pw" while it is in state "power off".`},
		{"cleaning node", cleaning, "1.89", `{"target":"power on"}`, 400, "while it is in state \"clean wait\""},
		{"disable_power_off", guarded, "1.95", `{"target":"power off"}`, 409, "Failed to set node power state to power off."},
		{"no target", id, "1.89", `{}`, 400, `Missing argument: "target"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, _, body := do(t, "PUT", l.srv.URL+"/v1/nodes/"+tc.node+"/states/power", tc.version, tc.body)
			if st != tc.status || !strings.Contains(faultString(t, body), tc.fault) {
				t.Fatalf("%d %s, want %d %q", st, body, tc.status, tc.fault)
			}
		})
	}
	// Console: disabled reads as Ironic's document; fake-hardware's only
	// enabled console interface is no-console, which cannot start one.
	st, _, body := do(t, "GET", l.srv.URL+"/v1/nodes/pw/states/console", "1.89", "")
	if st != 200 || body != `{"console_enabled":false,"console_info":null}` {
		t.Fatalf("console GET: %d %s", st, body)
	}
	st, _, body = do(t, "PUT", l.srv.URL+"/v1/nodes/pw/states/console", "1.89", `{"enabled":true}`)
	if st != 400 || !strings.Contains(faultString(t, body), "console") {
		t.Fatalf("console PUT on no-console: %d %s", st, body)
	}
	st, _, body = do(t, "PUT", l.srv.URL+"/v1/nodes/pw/states/console", "1.89", `{"enabled":"perhaps"}`)
	if st != 400 || !strings.Contains(faultString(t, body), "enabled") {
		t.Fatalf("console PUT bad value: %d %s", st, body)
	}
	st, _, body = do(t, "PUT", l.srv.URL+"/v1/nodes/pw/states/console", "1.89", `{}`)
	if st != 400 || !strings.Contains(faultString(t, body), `Missing argument: "enabled"`) {
		t.Fatalf("console PUT without enabled: %d %s", st, body)
	}
}

func TestProvisionBodyBound(t *testing.T) {
	l := newLab(t, func(_ *conductor.Options, ao *ironicapi.Options) {
		ao.MaxBodyBytes, ao.MaxProvisionBodyBytes = 1<<10, 64<<10
	})
	id := newNode(t, l, "bound", `,"instance_info":{"image_source":"http://192.0.2.10/i"}`)
	setState(t, l, id, statemachine.Available, "", nil)
	// A config drive over the general bound but under the provision
	// bound is accepted; over the provision bound it is a 413.
	noise := make([]byte, 3<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	body := `{"target":"active","configdrive":"` + gzipBase64(t, string(noise)) + `"}`
	if len(body) <= 1<<10 || len(body) >= 64<<10 {
		t.Fatalf("fixture body of %d bytes", len(body))
	}
	st, _, resp := do(t, "PUT", l.srv.URL+"/v1/nodes/bound/states/provision", "1.89", body)
	if st != 202 {
		t.Fatalf("provision body of %d bytes under MaxProvisionBodyBytes: %d %s", len(body), st, resp)
	}
	big := `{"target":"active","configdrive":"` + strings.Repeat("A", 64<<10) + `"}`
	st, _, resp = do(t, "PUT", l.srv.URL+"/v1/nodes/bound/states/provision", "1.89", big)
	if st != 413 || !strings.Contains(faultString(t, resp), "larger than") {
		t.Fatalf("provision body over the bound: %d %s", st, resp)
	}
	// Other routes keep the general bound.
	st, _, resp = do(t, "PATCH", l.srv.URL+"/v1/nodes/bound", "1.89", `[{"op":"add","path":"/extra/x","value":"`+strings.Repeat("x", 2<<10)+`"}]`)
	if st != 413 {
		t.Fatalf("patch over MaxBodyBytes: %d %s", st, resp)
	}
}
