package ironicapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
)

// TestPathsWithoutVersion: Ironic's root controller serves a path whose
// first element is not a version as v1; Anvil's own bookmark links have
// that form, and ironic-tempest-plugin sends some requests so.
func TestPathsWithoutVersion(t *testing.T) {
	l := newLab(t)
	n := l.enroll(t, "unversioned", nil)
	st, _, body := do(t, "GET", l.srv.URL+"/nodes/unversioned", "1.78", "")
	if v := bodyMap(t, body); st != http.StatusOK || v["uuid"] != n.UUID {
		t.Fatalf("GET /nodes/unversioned = %d %s", st, body)
	}
	links, _ := bodyMap(t, body)["links"].([]any)
	var bookmark string
	for _, x := range links {
		if m, _ := x.(map[string]any); m["rel"] == "bookmark" {
			bookmark, _ = m["href"].(string)
		}
	}
	if bookmark != l.srv.URL+"/nodes/"+n.UUID {
		t.Fatalf("bookmark = %q", bookmark)
	}
	if st, _, body = do(t, "GET", bookmark, "1.78", ""); st != http.StatusOK || bodyMap(t, body)["uuid"] != n.UUID {
		t.Fatalf("GET bookmark = %d %s", st, body)
	}
	if st, _, body = do(t, "GET", l.srv.URL+"/nodes/detail?limit=1", "1.78", ""); st != http.StatusOK {
		t.Fatalf("GET /nodes/detail = %d %s", st, body)
	}
	// The root documents keep their own routes.
	if st, _, body = do(t, "GET", l.srv.URL+"/", "", ""); st != http.StatusOK || bodyMap(t, body)["versions"] == nil {
		t.Fatalf("GET / = %d %s", st, body)
	}
	st, _, body = do(t, "GET", l.srv.URL+"/nodes/nonexistent-node", "1.78", "")
	wantRaw(t, "unknown node without /v1", st, http.StatusNotFound, body, "nonexistent-node")
}

// TestLogicalDiskProperties: GET /v1/drivers/{driver}/raid/logical_disk_properties
// (1.12) lists the RAID schema's logical disk properties.
func TestLogicalDiskProperties(t *testing.T) {
	l := newLab(t)
	url := l.srv.URL + "/v1/drivers/fake-hardware/raid/logical_disk_properties"
	st, _, body := do(t, "GET", url, "1.11", "")
	wantRaw(t, "at 1.11", st, http.StatusNotFound, body, "")
	st, _, body = do(t, "GET", url, "1.12", "")
	v := bodyMap(t, body)
	if st != http.StatusOK || len(v) != 10 {
		t.Fatalf("logical disk properties = %d %s", st, body)
	}
	for _, k := range []string{"raid_level", "size_gb"} {
		if s, _ := v[k].(string); len(s) < len("Required.") || s[len(s)-len("Required."):] != "Required." {
			t.Errorf("%s = %q, want a description ending in Required.", k, v[k])
		}
	}
	if s, _ := v["controller"].(string); s[len(s)-len("Optional."):] != "Optional." {
		t.Errorf("controller = %q, want Optional.", s)
	}
	st, _, body = do(t, "GET", l.srv.URL+"/v1/drivers/nope/raid/logical_disk_properties", "1.12", "")
	wantRaw(t, "unknown driver", st, http.StatusNotFound, body, "nope")
}

// TestLegacyConsolePath: GET /v1/nodes/states/console/{node}, the form
// Ironic's routing still serves.
func TestLegacyConsolePath(t *testing.T) {
	l := newLab(t)
	n := l.enroll(t, "legacy-console", nil)
	st, _, body := do(t, "GET", l.srv.URL+"/v1/nodes/states/console/"+n.UUID, "1.1", "")
	if v := bodyMap(t, body); st != http.StatusOK || v["console_enabled"] != false {
		t.Fatalf("legacy console GET = %d %s", st, body)
	}
}

// TestPatchVersionGating: a PATCH is refused (406) only when it names a
// field newer than the request, as Ironic checks it.
func TestPatchVersionGating(t *testing.T) {
	l := newLab(t)
	n := l.enroll(t, "gating", nil)
	p := l.port(t, n.UUID, "52:54:00:00:99:01", func(p *baremetal.Port) { p.PhysicalNetwork = "physnet1" })
	url := l.srv.URL + "/v1/ports/" + p.UUID
	st, _, body := do(t, "PATCH", url, "1.1", `[{"op":"add","path":"/extra/k","value":"v"},{"op":"replace","path":"/address","value":"52:54:00:00:99:02"}]`)
	if v := bodyMap(t, body); st != http.StatusOK || v["address"] != "52:54:00:00:99:02" {
		t.Fatalf("port PATCH of extra and address at 1.1 = %d %s", st, body)
	}
	st, _, body = do(t, "PATCH", url, "1.33", `[{"op":"replace","path":"/physical_network","value":"physnet2"}]`)
	wantRaw(t, "physical_network at 1.33", st, http.StatusNotAcceptable, body, "")
	st, _, body = do(t, "PATCH", url, "1.18", `[{"op":"replace","path":"/local_link_connection","value":{}}]`)
	wantRaw(t, "local_link_connection at 1.18", st, http.StatusNotAcceptable, body, "")

	// Port groups before 1.26: Ironic looks at the first operation only
	// for mode and properties.
	st, _, body = do(t, "POST", l.srv.URL+"/v1/portgroups", "1.23", `{"node_uuid":"`+n.UUID+`","address":"52:54:00:00:99:10"}`)
	if st != http.StatusCreated {
		t.Fatalf("portgroup create = %d %s", st, body)
	}
	pg := l.srv.URL + "/v1/portgroups/" + bodyMap(t, body)["uuid"].(string)
	st, _, body = do(t, "PATCH", pg, "1.23", `[{"op":"add","path":"/properties/a","value":"1"}]`)
	wantRaw(t, "properties first at 1.23", st, http.StatusNotAcceptable, body, "")
	st, _, body = do(t, "PATCH", pg, "1.23", `[{"op":"add","path":"/extra/a","value":"1"},{"op":"add","path":"/properties/a","value":"1"}]`)
	if st != http.StatusOK {
		t.Fatalf("properties second at 1.23 = %d %s", st, body)
	}
	st, _, body = do(t, "GET", pg, "1.26", "")
	if props, _ := bodyMap(t, body)["properties"].(map[string]any); st != http.StatusOK || props["a"] != "1" {
		t.Fatalf("portgroup after the quirk = %d %s", st, body)
	}

	// Traits below 1.37 are not routed, as in Ironic.
	st, _, body = do(t, "GET", l.srv.URL+"/v1/nodes/"+n.UUID+"/traits", "1.36", "")
	if st == http.StatusOK {
		t.Fatalf("traits at 1.36 = %d %s", st, body)
	}
}

// TestProtectedAndRetired: Ironic's update_node rules for protected and
// retired, and the 403 of the verbs that would destroy a protected
// node's instance.
func TestProtectedAndRetired(t *testing.T) {
	l := newLab(t)
	n := l.availableNode(t, "guarded", nil)
	url := l.srv.URL + "/v1/nodes/" + n.UUID
	st, _, body := do(t, "PATCH", url, "1.48", `[{"op":"replace","path":"/protected","value":true}]`)
	wantRaw(t, "protect an available node", st, http.StatusConflict, body, "can only be made protected in provision states 'active' or 'rescue'")
	st, _, body = do(t, "PATCH", url, "1.61", `[{"op":"replace","path":"/retired","value":true}]`)
	wantRaw(t, "retire an available node", st, http.StatusConflict, body, "can not have 'retired' set in provision state 'available'")

	l.deployed(t, n.UUID)
	st, _, body = do(t, "PATCH", url, "1.48", `[{"op":"replace","path":"/protected_reason","value":"why"}]`)
	wantRaw(t, "reason without protected", st, http.StatusBadRequest, body, "The protected_reason field can only be set when protected is True")
	st, _, body = do(t, "PATCH", url, "1.48", `[{"op":"replace","path":"/protected","value":true},{"op":"replace","path":"/protected_reason","value":"why"}]`)
	if v := bodyMap(t, body); st != http.StatusOK || v["protected"] != true || v["protected_reason"] != "why" {
		t.Fatalf("protect = %d %s", st, body)
	}
	for _, target := range []string{"deleted", "rebuild"} {
		st, _, body = do(t, "PUT", url+"/states/provision", "1.48", `{"target":"`+target+`"}`)
		wantRaw(t, target+" of a protected node", st, http.StatusForbidden, body, "")
	}
	if err := l.c.SetMaintenance(context.Background(), n.UUID, true, "test"); err != nil {
		t.Fatal(err)
	}
	st, _, body = do(t, "DELETE", url, "1.48", "")
	wantRaw(t, "delete of a protected node", st, http.StatusForbidden, body, "")
	st, _, body = do(t, "PATCH", url, "1.48", `[{"op":"replace","path":"/protected","value":false}]`)
	if v := bodyMap(t, body); st != http.StatusOK || v["protected"] != false || v["protected_reason"] != nil {
		t.Fatalf("unprotect = %d %s; want protected_reason cleared", st, body)
	}
	st, _, body = do(t, "PATCH", url, "1.61", `[{"op":"replace","path":"/retired","value":true},{"op":"replace","path":"/retired_reason","value":"old"}]`)
	if v := bodyMap(t, body); st != http.StatusOK || v["retired"] != true || v["retired_reason"] != "old" {
		t.Fatalf("retire an active node = %d %s", st, body)
	}
	st, _, body = do(t, "PATCH", url, "1.61", `[{"op":"replace","path":"/retired","value":false}]`)
	if v := bodyMap(t, body); st != http.StatusOK || v["retired_reason"] != nil {
		t.Fatalf("unretire = %d %s; want retired_reason cleared", st, body)
	}
}

// TestPortgroupPhysnetConsistency: the ports of a port group share one
// physical network (Ironic's validate_port_physnet), on create and on
// update.
func TestPortgroupPhysnetConsistency(t *testing.T) {
	l := newLab(t)
	n := l.enroll(t, "physnets", nil)
	base := l.srv.URL + "/v1/"
	st, _, body := do(t, "POST", base+"portgroups", "1.34", `{"node_uuid":"`+n.UUID+`","address":"52:54:00:00:98:00"}`)
	if st != http.StatusCreated {
		t.Fatalf("portgroup = %d %s", st, body)
	}
	pg := bodyMap(t, body)["uuid"].(string)
	st, _, body = do(t, "POST", base+"ports", "1.34", `{"node_uuid":"`+n.UUID+`","address":"52:54:00:00:98:01","portgroup_uuid":"`+pg+`","physical_network":"physnet1"}`)
	if st != http.StatusCreated {
		t.Fatalf("first member = %d %s", st, body)
	}
	st, _, body = do(t, "POST", base+"ports", "1.34", `{"node_uuid":"`+n.UUID+`","address":"52:54:00:00:98:02","portgroup_uuid":"`+pg+`","physical_network":"physnet2"}`)
	wantRaw(t, "member on another physnet", st, http.StatusConflict, body, "cannot become a member of port group "+pg+" which has ports in physical network physnet1")
	st, _, body = do(t, "POST", base+"ports", "1.34", `{"node_uuid":"`+n.UUID+`","address":"52:54:00:00:98:03","physical_network":"physnet2"}`)
	if st != http.StatusCreated {
		t.Fatalf("standalone port = %d %s", st, body)
	}
	p2 := bodyMap(t, body)["uuid"].(string)
	st, _, body = do(t, "PATCH", base+"ports/"+p2, "1.34", `[{"op":"replace","path":"/portgroup_uuid","value":"`+pg+`"}]`)
	wantRaw(t, "move into the group", st, http.StatusConflict, body, "physical network physnet1")
	st, _, body = do(t, "PATCH", base+"ports/"+p2, "1.34", `[{"op":"replace","path":"/portgroup_uuid","value":"`+pg+`"},{"op":"replace","path":"/physical_network","value":"physnet1"}]`)
	if st != http.StatusOK {
		t.Fatalf("move into the group on its physnet = %d %s", st, body)
	}
}

// TestVIFs: /v1/nodes/{node}/vifs (1.28) with the noop network
// interface, recorded in internal_info.tenant_vif_port_id by Ironic's
// free-port rule.
func TestVIFs(t *testing.T) {
	l := newLab(t)
	n := l.enroll(t, "vifs", func(n *baremetal.Node) { n.NetworkInterface = "noop" })
	noPXE := l.port(t, n.UUID, "52:54:00:00:97:01", func(p *baremetal.Port) { p.PXEEnabled = false })
	pxe := l.port(t, n.UUID, "52:54:00:00:97:02", nil)
	base := l.srv.URL + "/v1/nodes/vifs/vifs"
	st, _, body := do(t, "GET", base, "1.27", "")
	wantRaw(t, "vifs at 1.27", st, http.StatusNotFound, body, "")
	st, _, body = do(t, "POST", base, "1.28", `{}`)
	wantRaw(t, "attach without id", st, http.StatusBadRequest, body, "id")

	portVIF := func(uuid string) string {
		p, err := l.c.Store().GetPort(context.Background(), uuid)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := p.InternalInfo["tenant_vif_port_id"].(string)
		return s
	}
	if st, _, body = do(t, "POST", base, "1.28", `{"id":"vif-a"}`); st != http.StatusNoContent {
		t.Fatalf("attach vif-a = %d %s", st, body)
	}
	if portVIF(pxe.UUID) != "vif-a" || portVIF(noPXE.UUID) != "" {
		t.Fatalf("vif-a on pxe %q, no-pxe %q; want the PXE-enabled port first", portVIF(pxe.UUID), portVIF(noPXE.UUID))
	}
	st, _, body = do(t, "POST", base, "1.28", `{"id":"vif-a"}`)
	wantRaw(t, "attach twice", st, http.StatusConflict, body, "already attached to Ironic Port "+pxe.UUID)
	if st, _, body = do(t, "POST", base, "1.28", `{"id":"vif-b"}`); st != http.StatusNoContent || portVIF(noPXE.UUID) != "vif-b" {
		t.Fatalf("attach vif-b = %d %s", st, body)
	}
	st, _, body = do(t, "POST", base, "1.28", `{"id":"vif-c"}`)
	wantRaw(t, "no free port", st, http.StatusBadRequest, body, "not enough free physical ports")
	st, _, body = do(t, "GET", base, "1.28", "")
	if v := bodyMap(t, body); st != http.StatusOK || len(v["vifs"].([]any)) != 2 {
		t.Fatalf("list = %d %s", st, body)
	}
	if st, _, body = do(t, "DELETE", base+"/vif-a", "1.28", ""); st != http.StatusNoContent || portVIF(pxe.UUID) != "" {
		t.Fatalf("detach vif-a = %d %s", st, body)
	}
	st, _, body = do(t, "DELETE", base+"/vif-a", "1.28", "")
	wantRaw(t, "detach twice", st, http.StatusBadRequest, body, "because it is not attached to it")

	// A port group with ports is preferred to its ports and to free ports.
	st, _, body = do(t, "POST", l.srv.URL+"/v1/portgroups", "1.28", `{"node_uuid":"`+n.UUID+`","address":"52:54:00:00:97:10"}`)
	if st != http.StatusCreated {
		t.Fatalf("portgroup = %d %s", st, body)
	}
	pg := bodyMap(t, body)["uuid"].(string)
	l.port(t, n.UUID, "52:54:00:00:97:11", func(p *baremetal.Port) { p.PortgroupUUID = pg })
	if st, _, body = do(t, "POST", base, "1.28", `{"id":"vif-g"}`); st != http.StatusNoContent {
		t.Fatalf("attach vif-g = %d %s", st, body)
	}
	g, err := l.c.Store().Portgroups().Get(context.Background(), pg)
	if err != nil || g.InternalInfo["tenant_vif_port_id"] != "vif-g" {
		t.Fatalf("port group internal_info = %v, %v; want vif-g", g.InternalInfo, err)
	}

	// Other network interfaces (neutron, ...) need Neutron: a node
	// stored with one (its interface no longer enabled here) is refused.
	other := l.enroll(t, "vifs-neutron", nil)
	other.NetworkInterface = "neutron"
	if err := l.c.Store().UpdateNode(context.Background(), other, ""); err != nil {
		t.Fatal(err)
	}
	st, _, body = do(t, "POST", l.srv.URL+"/v1/nodes/"+other.UUID+"/vifs", "1.28", `{"id":"vif-x"}`)
	wantRaw(t, "neutron network interface", st, http.StatusBadRequest, body, "noop and flat")
}

// TestManualCleanUnknownStep: a manual clean with a step no interface
// offers is accepted (202) and fails in the worker, as Ironic's does.
func TestManualCleanUnknownStep(t *testing.T) {
	l := newLab(t)
	n := l.enroll(t, "clean-unknown", nil)
	url := l.srv.URL + "/v1/nodes/" + n.UUID
	if st, _, body := do(t, "PUT", url+"/states/provision", "1.15", `{"target":"manage"}`); st != http.StatusAccepted {
		t.Fatalf("manage = %d %s", st, body)
	}
	waitStoredState(t, l, n.UUID, "manageable")
	st, _, body := do(t, "PUT", url+"/states/provision", "1.15", `{"target":"clean","clean_steps":[{"interface":"bios","step":"no_such_step"}]}`)
	if st != http.StatusAccepted {
		t.Fatalf("clean = %d %s; want 202", st, body)
	}
	got := waitStoredState(t, l, n.UUID, "clean failed")
	if !strings.Contains(got.LastError, "no_such_step") {
		t.Fatalf("last_error = %q", got.LastError)
	}
}

// waitStoredState polls node uuid in the store until its provision state is want.
func waitStoredState(t *testing.T, l *lab, uuid, want string) *baremetal.Node {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := l.c.Store().GetNode(context.Background(), uuid)
		if err != nil {
			t.Fatal(err)
		}
		if string(n.ProvisionState) == want && n.Reservation == "" {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s in %s (last_error %q), want %s", uuid, n.ProvisionState, n.LastError, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitStoredUnreserved waits until node uuid has no reservation (work a
// worker does after the API answered is over) and returns it.
func waitStoredUnreserved(t *testing.T, l *lab, uuid string) *baremetal.Node {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := l.c.Store().GetNode(context.Background(), uuid)
		if err != nil {
			t.Fatal(err)
		}
		if n.Reservation == "" {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still reserved by %q", uuid, n.Reservation)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestVirtualMediaAttachAsync: the attach answers 204 after validating
// the management interface; the driver's failure lands in last_error.
func TestVirtualMediaAttachAsync(t *testing.T) {
	l := newLab(t)
	n := l.enroll(t, "vmedia-fails", func(n *baremetal.Node) {
		n.DriverInfo = map[string]any{"fake_fail": "management.attach_virtual_media"}
	})
	st, _, body := do(t, "POST", l.srv.URL+"/v1/nodes/"+n.UUID+"/vmedia", "1.89", `{"device_type":"cdrom","image_url":"http://192.0.2.10/boot.iso","image_download_source":"http"}`)
	if st != http.StatusNoContent {
		t.Fatalf("attach = %d %s; want 204", st, body)
	}
	got := waitStoredUnreserved(t, l, n.UUID)
	for deadline := time.Now().Add(30 * time.Second); got.LastError == "" && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		got = waitStoredUnreserved(t, l, n.UUID)
	}
	if !strings.Contains(got.LastError, "Could not attach device cdrom to node "+n.UUID) {
		t.Fatalf("last_error = %q", got.LastError)
	}
}

// TestVIFsOnFlat: the flat network interface, enabled beside noop as
// Ironic enables them by default (enabled_network_interfaces =
// flat,noop), records a VIF on a port by Ironic's free-port rule, and
// validates without Neutron.
func TestVIFsOnFlat(t *testing.T) {
	l := newLabWith(t, driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindNetwork: {driver.Flat, driver.Noop}}})
	st, _, body := do(t, "POST", l.srv.URL+"/v1/nodes", "1.31", `{"name":"flat","driver":"fake-hardware","network_interface":"flat"}`)
	if st != http.StatusCreated || bodyMap(t, body)["network_interface"] != "flat" {
		t.Fatalf("create with flat = %d %s", st, body)
	}
	id := bodyMap(t, body)["uuid"].(string)
	noPXE := l.port(t, id, "52:54:00:00:98:01", func(p *baremetal.Port) { p.PXEEnabled = false })
	pxe := l.port(t, id, "52:54:00:00:98:02", nil)
	base := l.srv.URL + "/v1/nodes/flat/vifs"
	if st, _, body := do(t, "POST", base, "1.28", `{"id":"vif-1"}`); st != http.StatusNoContent {
		t.Fatalf("attach = %d %s", st, body)
	}
	for _, tc := range []struct {
		port *baremetal.Port
		want string
	}{{pxe, "vif-1"}, {noPXE, ""}} {
		p, err := l.c.Store().GetPort(context.Background(), tc.port.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := p.InternalInfo["tenant_vif_port_id"].(string); got != tc.want {
			t.Errorf("port %s tenant_vif_port_id %q, want %q (the PXE-enabled port first)", p.Address, got, tc.want)
		}
	}
	st, _, body = do(t, "GET", base, "1.28", "")
	if vifs := bodyMap(t, body)["vifs"].([]any); st != http.StatusOK || len(vifs) != 1 || vifs[0].(map[string]any)["id"] != "vif-1" {
		t.Fatalf("list = %d %s", st, body)
	}
	st, _, body = do(t, "GET", l.srv.URL+"/v1/nodes/flat/validate", "1.31", "")
	if nw := bodyMap(t, body)["network"].(map[string]any); st != http.StatusOK || nw["result"] != true {
		t.Fatalf("validate = %d %s; want the flat network valid", st, body)
	}
	if st, _, body := do(t, "DELETE", base+"/vif-1", "1.28", ""); st != http.StatusNoContent {
		t.Fatalf("detach = %d %s", st, body)
	}
	// A node enrolled without naming one gets noop here: Anvil's
	// fake-hardware lists noop before flat (Ironic's lists flat first).
	other := l.enroll(t, "default-net", nil)
	if other.NetworkInterface != driver.Noop {
		t.Errorf("default network interface %q, want noop", other.NetworkInterface)
	}
}
