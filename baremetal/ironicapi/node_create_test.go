package ironicapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/statemachine"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

func TestNodeCreateEveryField(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	// gophercloud's CreateOpts lacks instance_info, lessee, description
	// and shard: the full document goes raw, and is read back through
	// gophercloud.
	st, _, resp := do(t, "POST", l.srv.URL+"/v1/nodes", "1.95", `{
		"uuid": "3a1f1d4e-1111-4a2b-9c3d-000000000001", "name": "ns~host-full", "driver": "fake-hardware",
		"boot_interface": "fake", "console_interface": "no-console", "deploy_interface": "fake",
		"inspect_interface": "fake", "management_interface": "fake", "network_interface": "noop",
		"power_interface": "fake", "raid_interface": "fake", "rescue_interface": "fake",
		"storage_interface": "noop", "vendor_interface": "fake", "bios_interface": "fake",
		"firmware_interface": "fake",
		"driver_info": {"fake_password": "hidden", "deploy_kernel": "http://192.0.2.1/k"},
		"properties": {"cpu_arch": "x86_64"}, "instance_info": {"image_source": "http://192.0.2.1/img"},
		"extra": {"rack": "r1"}, "resource_class": "baremetal-gold", "conductor_group": "Rack-B",
		"automated_clean": "false", "owner": "proj-a", "lessee": "proj-b",
		"description": "a node with every field", "shard": "s1", "network_data": {"links": []},
		"disable_power_off": false, "protected": false, "retired": false, "maintenance": false,
		"chassis_uuid": null, "instance_name": null, "parent_node": null
	}`)
	if st != 201 {
		t.Fatalf("create: %d %s", st, resp)
	}
	n, err := nodes.Get(ctx, l.client(t, "1.95"), "ns~host-full").Extract()
	if err != nil {
		t.Fatal(err)
	}
	if n.UUID != "3a1f1d4e-1111-4a2b-9c3d-000000000001" || n.Name != "ns~host-full" || n.ProvisionState != "enroll" ||
		n.BIOSInterface != "fake" || n.ConsoleInterface != "no-console" || n.ResourceClass != "baremetal-gold" ||
		n.ConductorGroup != "rack-b" || n.AutomatedClean == nil || *n.AutomatedClean || n.Owner != "proj-a" ||
		n.Lessee != "proj-b" || n.Shard != "s1" || n.Description != "a node with every field" || n.Extra["rack"] != "r1" ||
		n.InstanceInfo["image_source"] != "http://192.0.2.1/img" || n.DriverInfo["fake_password"] != "******" {
		t.Fatalf("created %+v", n)
	}
	stored, err := l.c.Store().GetNode(ctx, n.UUID)
	if err != nil || stored.DriverInfo["fake_password"] != "hidden" || stored.NetworkData == nil {
		t.Fatalf("stored %+v %v", stored, err)
	}
}

func TestNodeCreateVersions(t *testing.T) {
	l := newLab(t)
	cases := []struct {
		name, version, body string
		status              int
		state               any // provision_state in the answer
		fault               string
	}{
		{"1.1 creates available, shown as null", "", `{"driver":"fake-hardware"}`, 201, nil, ""},
		{"1.10 creates available", "1.10", `{"driver":"fake-hardware","name":"host-110"}`, 201, "available", ""},
		{"1.11 creates enroll", "1.11", `{"driver":"fake-hardware","name":"host-111"}`, 201, "enroll", ""},
		{"names need 1.5", "1.4", `{"driver":"fake-hardware","name":"x"}`, 406, nil, "Request not acceptable."},
		{"null name is fine before 1.5", "1.4", `{"driver":"fake-hardware","name":null}`, 201, "available", ""},
		{"tilde needs 1.10", "1.9", `{"driver":"fake-hardware","name":"ns~host"}`, 400, nil, "Cannot create node with invalid name 'ns~host'"},
		{"upper case needs 1.10", "1.9", `{"driver":"fake-hardware","name":"Host"}`, 400, nil, "invalid name 'Host'"},
		{"hostname before 1.10", "1.9", `{"driver":"fake-hardware","name":"host-1.example"}`, 201, "available", ""},
		{"unreserved from 1.10", "1.10", `{"driver":"fake-hardware","name":"NS~host_1.x"}`, 201, "available", ""},
		{"slash refused", "1.89", `{"driver":"fake-hardware","name":"a/b"}`, 400, nil, "invalid name 'a/b'"},
		{"uuid-like name refused", "1.89", `{"driver":"fake-hardware","name":"3a1f1d4e-1111-4a2b-9c3d-000000000009"}`, 400, nil, "invalid name"},
		{"reserved word", "1.89", `{"driver":"fake-hardware","name":"detail"}`, 400, nil, "The word \"detail\" is reserved"},
		{"field newer than version", "1.49", `{"driver":"fake-hardware","owner":"p"}`, 406, nil, "Request not acceptable."},
		{"newer field null is fine", "1.49", `{"driver":"fake-hardware","owner":null}`, 201, "enroll", ""},
		{"empty conductor_group before 1.46", "1.45", `{"driver":"fake-hardware","conductor_group":""}`, 201, "enroll", ""},
		{"conductor_group before 1.46", "1.45", `{"driver":"fake-hardware","conductor_group":"g"}`, 406, nil, "Request not acceptable."},
		{"read-only field", "1.89", `{"driver":"fake-hardware","provision_state":"active"}`, 400, nil, "provision_state"},
		{"unknown field", "1.89", `{"driver":"fake-hardware","colour":"red"}`, 400, nil, "colour"},
		{"unknown driver", "1.89", `{"driver":"no-such-hw"}`, 400, nil, "no-such-hw"},
		{"bad interface", "1.89", `{"driver":"fake-hardware","power_interface":"ipmitool"}`, 400, nil, "ipmitool"},
		{"bad uuid", "1.89", `{"driver":"fake-hardware","uuid":"123"}`, 400, nil, "uuid"},
		{"duplicate name", "1.89", `{"driver":"fake-hardware","name":"host-111"}`, 409, nil, "host-111"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, hdr, body := do(t, "POST", l.srv.URL+"/v1/nodes", tc.version, tc.body)
			if st != tc.status {
				t.Fatalf("status %d, want %d: %s", st, tc.status, body)
			}
			if st != 201 {
				if f := faultString(t, body); !strings.Contains(f, tc.fault) {
					t.Fatalf("fault %q, want %q", f, tc.fault)
				}
				return
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(body), &doc); err != nil {
				t.Fatal(err)
			}
			if doc["provision_state"] != tc.state {
				t.Fatalf("provision_state %v, want %v", doc["provision_state"], tc.state)
			}
			if !strings.HasSuffix(hdr.Get("Location"), "/v1/nodes/"+doc["uuid"].(string)) {
				t.Fatalf("Location %q", hdr.Get("Location"))
			}
			stored, err := l.c.Store().GetNode(context.Background(), doc["uuid"].(string))
			if err != nil {
				t.Fatal(err)
			}
			want := statemachine.Enroll
			if tc.state != "enroll" {
				want = statemachine.Available
			}
			if stored.ProvisionState != want {
				t.Fatalf("stored state %q, want %q", stored.ProvisionState, want)
			}
		})
	}
}
