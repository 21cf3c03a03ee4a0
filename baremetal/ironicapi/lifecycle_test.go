package ironicapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/statemachine"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// TestLifecycleFakeHardware drives one node through its whole life with
// gophercloud, polling GET as Ironic's clients do: create, manage,
// provide (automated cleaning), deploy with a config drive built from
// an object, undeploy, delete.
func TestLifecycleFakeHardware(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.89")
	n, err := nodes.Create(ctx, sc, nodes.CreateOpts{Name: "life", Driver: "fake-hardware",
		Properties: map[string]any{"cpu_arch": "x86_64"}}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	step := func(target nodes.TargetProvisionState, opts nodes.ProvisionStateOpts, want string) *nodes.Node {
		t.Helper()
		opts.Target = target
		r := nodes.ChangeProvisionState(ctx, sc, n.UUID, opts)
		if r.Err != nil {
			t.Fatalf("%s: %v", target, r.Err)
		}
		if loc := r.Header.Get("Location"); !strings.HasSuffix(loc, "/v1/nodes/"+n.UUID+"/states") {
			t.Fatalf("%s: Location %q", target, loc)
		}
		return waitState(t, sc, n.UUID, want)
	}
	step(nodes.TargetManage, nodes.ProvisionStateOpts{}, "manageable")
	step(nodes.TargetProvide, nodes.ProvisionStateOpts{}, "available")
	if _, err := nodes.Update(ctx, sc, n.UUID, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_source", Value: "http://192.0.2.10/image.qcow2"},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_uuid", Value: "eeeeeeee-0000-4000-8000-000000000001"},
	}).Extract(); err != nil {
		t.Fatal(err)
	}
	active := step(nodes.TargetActive, nodes.ProvisionStateOpts{ConfigDrive: nodes.ConfigDrive{
		MetaData: map[string]any{"hostname": "life"},
		UserData: "#cloud-config\n",
	}}, "active")
	if active.InstanceUUID != "eeeeeeee-0000-4000-8000-000000000001" {
		t.Fatalf("active node %+v", active)
	}
	stored, _ := l.c.Store().GetNode(ctx, n.UUID)
	if cd, _ := stored.InstanceInfo["configdrive"].(string); cd == "" {
		t.Fatalf("no config drive recorded: %v", stored.InstanceInfo)
	}
	step(nodes.TargetDeleted, nodes.ProvisionStateOpts{}, "available")
	gone, _ := nodes.Get(ctx, sc, n.UUID).Extract()
	if gone.InstanceUUID != "" || len(gone.InstanceInfo) != 0 {
		t.Fatalf("undeployed node keeps its instance: %+v", gone)
	}
	if err := nodes.Delete(ctx, sc, n.UUID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.Get(ctx, sc, n.UUID).Extract(); err == nil {
		t.Fatal("node still there after delete")
	}
}

// TestEveryProvisionVerb sends each remaining verb through gophercloud
// (or raw HTTP for the 1.73 aliases, which gophercloud does not name) and
// checks where the node lands.
func TestEveryProvisionVerb(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.89")
	latest := l.client(t, "1.110")
	type verbCase struct {
		name  string
		from  statemachine.State
		send  func(id string) error
		want  string
		check func(t *testing.T, n *nodes.Node)
	}
	gc := func(c *gophercloud.ServiceClient, opts nodes.ProvisionStateOpts) func(id string) error {
		return func(id string) error { return nodes.ChangeProvisionState(ctx, c, id, opts).Err }
	}
	raw := func(version, body string) func(id string) error {
		return func(id string) error {
			st, _, resp := do(t, "PUT", l.srv.URL+"/v1/nodes/"+id+"/states/provision", version, body)
			if st != 202 {
				t.Errorf("%s: %d %s", body, st, resp)
			}
			return nil
		}
	}
	c89, c110 := sc, latest
	cases := []verbCase{
		{"inspect", statemachine.Manageable, gc(c89, nodes.ProvisionStateOpts{Target: nodes.TargetInspect}), "manageable",
			func(t *testing.T, n *nodes.Node) {
				if n.InspectionFinishedAt == nil {
					t.Errorf("inspection_finished_at not set")
				}
			}},
		{"clean with steps", statemachine.Manageable, gc(c89, nodes.ProvisionStateOpts{Target: nodes.TargetClean,
			CleanSteps: []nodes.CleanStep{{Interface: nodes.InterfaceBIOS, Step: "factory_reset"}}}), "manageable", nil},
		{"adopt", statemachine.Manageable, gc(c89, nodes.ProvisionStateOpts{Target: nodes.TargetAdopt}), "active", nil},
		{"deploy alias", statemachine.Available, raw("1.73", `{"target":"deploy"}`), "active", nil},
		{"an empty config drive object is none", statemachine.Available, raw("1.1", `{"target":"active","configdrive":{}}`), "active", nil},
		{"an empty config drive string is none", statemachine.Available, raw("1.89", `{"target":"active","configdrive":""}`), "active", nil},
		{"rebuild with a config drive", statemachine.Active, gc(c89, nodes.ProvisionStateOpts{Target: nodes.TargetRebuild,
			ConfigDrive: gzipBase64(t, "not really an ISO image")}), "active", nil},
		{"undeploy alias", statemachine.Active, raw("1.73", `{"target":"undeploy"}`), "available", nil},
		{"rescue", statemachine.Active, gc(c89, nodes.ProvisionStateOpts{Target: nodes.TargetRescue, RescuePassword: "s3cret"}), "rescue", nil},
		{"service", statemachine.Active, gc(c89, nodes.ProvisionStateOpts{Target: nodes.TargetService,
			ServiceSteps: []nodes.ServiceStep{{Interface: nodes.InterfaceFirmware, Step: "update",
				Args: map[string]any{"settings": []any{map[string]any{"component": "bmc", "url": "http://192.0.2.10/fw-2.bin"}}}}}}), "active", nil},
		{"abort clean wait", statemachine.CleanWait, gc(c89, nodes.ProvisionStateOpts{Target: nodes.TargetAbort}), "clean failed", nil},
		{"abort wait call-back at 1.110", statemachine.DeployWait, gc(c110, nodes.ProvisionStateOpts{Target: nodes.TargetAbort}), "deploy failed", nil},
		{"unhold service hold", statemachine.ServiceHold, gc(c89, nodes.ProvisionStateOpts{Target: nodes.TargetUnhold}), "", nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := newNode(t, l, "verb-"+string(rune('a'+i)), `,"instance_info":{"image_source":"http://192.0.2.10/i"}`)
			target := statemachine.State("")
			switch tc.from {
			case statemachine.CleanWait:
				target = statemachine.Available
			case statemachine.DeployWait:
				target = statemachine.Active
			case statemachine.ServiceHold:
				target = statemachine.Active
			}
			setState(t, l, id, tc.from, target, nil)
			if err := tc.send(id); err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				// Unhold of a service hold resumes servicing, which ends
				// in active or service failed (no steps were recorded).
				n, _ := l.c.Store().GetNode(ctx, id)
				if n.ProvisionState == statemachine.ServiceHold {
					t.Fatalf("still in service hold")
				}
				return
			}
			n := waitState(t, sc, id, tc.want)
			if tc.check != nil {
				tc.check(t, n)
			}
		})
	}
	// Unrescue from rescue.
	id := newNode(t, l, "verb-unrescue", "")
	setState(t, l, id, statemachine.Rescue, "", nil)
	if err := nodes.ChangeProvisionState(ctx, sc, id, nodes.ProvisionStateOpts{Target: nodes.TargetUnrescue}).Err; err != nil {
		t.Fatal(err)
	}
	waitState(t, sc, id, "active")
}

// gzipBase64 is data gzipped and base64-encoded, the string form of a
// config drive.
func gzipBase64(t *testing.T, data string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}
