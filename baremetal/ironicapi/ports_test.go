package ironicapi_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"
)

// enroll makes a fake-hardware node through the conductor.
func (l *lab) enroll(t *testing.T, name string, mutate func(*baremetal.Node)) *baremetal.Node {
	t.Helper()
	n := &baremetal.Node{Name: name, Driver: "fake-hardware"}
	if mutate != nil {
		mutate(n)
	}
	got, err := l.c.Enroll(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// port makes a port through the store.
func (l *lab) port(t *testing.T, node, mac string, mutate func(*baremetal.Port)) *baremetal.Port {
	t.Helper()
	p := &baremetal.Port{NodeUUID: node, Address: mac, PXEEnabled: true}
	if mutate != nil {
		mutate(p)
	}
	if err := l.c.Store().CreatePort(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func decodeJSON(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	return m
}

func TestPortsThroughGophercloud(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.101")
	n := l.enroll(t, "gc-node", nil)
	other := l.enroll(t, "gc-other", nil)

	created, err := ports.Create(ctx, sc, ports.CreateOpts{
		NodeUUID:            n.UUID,
		Address:             "52:54:00:AB:CD:01",
		LocalLinkConnection: map[string]any{"switch_id": "AA-BB-CC-DD-EE-FF", "port_id": "Gi0/1", "switch_info": "tor-1"},
		PhysicalNetwork:     "physnet1",
		Extra:               map[string]any{"rack": "r1"},
	}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if created.Address != "52:54:00:ab:cd:01" || !created.PXEEnabled || created.NodeUUID != n.UUID || created.UUID == "" ||
		created.LocalLinkConnection["switch_id"] != "aa:bb:cc:dd:ee:ff" || created.PhysicalNetwork != "physnet1" || created.Extra["rack"] != "r1" {
		t.Fatalf("created %+v: the MAC and switch_id are normalised, pxe_enabled defaults to true", created)
	}
	no := false
	second, err := ports.Create(ctx, sc, ports.CreateOpts{NodeUUID: other.UUID, Address: "52:54:00:ab:cd:02", PXEEnabled: &no}).Extract()
	if err != nil || second.PXEEnabled {
		t.Fatalf("second port %+v, %v", second, err)
	}

	got, err := ports.Get(ctx, sc, created.UUID).Extract()
	if err != nil || got.UUID != created.UUID || got.CreatedAt.IsZero() {
		t.Fatalf("get: %+v, %v", got, err)
	}
	list := func(opts ports.ListOpts, detail bool) []ports.Port {
		t.Helper()
		pager := ports.List(sc, opts)
		if detail {
			pager = ports.ListDetail(sc, opts)
		}
		pages, err := pager.AllPages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all, err := ports.ExtractPorts(pages)
		if err != nil {
			t.Fatal(err)
		}
		return all
	}
	all := list(ports.ListOpts{}, false)
	if len(all) != 2 || all[0].Address == "" || all[0].NodeUUID != "" {
		t.Fatalf("list without detail shows uuid and address only: %+v", all)
	}
	for _, tc := range []struct {
		name string
		opts ports.ListOpts
		want string
	}{
		{"node by name", ports.ListOpts{Node: "gc-other"}, second.UUID},
		{"node_uuid", ports.ListOpts{NodeUUID: n.UUID}, created.UUID},
		{"address", ports.ListOpts{Address: "52-54-00-AB-CD-02"}, second.UUID},
	} {
		got := list(tc.opts, true)
		if len(got) != 1 || got[0].UUID != tc.want || got[0].NodeUUID == "" {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
	// The baremetal-operator's getPorts: these fields, by address or by
	// node UUID (which wins when both are given, as in Ironic).
	bmo := []string{"node_uuid", "uuid", "address"}
	for _, opts := range []ports.ListOpts{
		{Fields: bmo, Address: "52:54:00:AB:CD:01"},
		{Fields: bmo, NodeUUID: n.UUID},
		{Fields: bmo, NodeUUID: n.UUID, Address: "52:54:00:ab:cd:02"},
	} {
		if got := list(opts, false); len(got) != 1 || got[0].NodeUUID != n.UUID || got[0].UUID != created.UUID || got[0].Address != created.Address || got[0].Extra != nil {
			t.Errorf("%+v: %+v", opts, got)
		}
	}
	if got := list(ports.ListOpts{Limit: 1}, true); len(got) != 2 {
		t.Errorf("paging one at a time through next links gave %d ports", len(got))
	}

	// PATCH through gophercloud: its remove operation sends a null value.
	updated, err := ports.Update(ctx, sc, created.UUID, ports.UpdateOpts{
		ports.UpdateOperation{Op: ports.AddOp, Path: "/extra/owner", Value: "ops"},
		ports.UpdateOperation{Op: ports.RemoveOp, Path: "/extra/rack"},
		ports.UpdateOperation{Op: ports.ReplaceOp, Path: "/pxe_enabled", Value: false},
		ports.UpdateOperation{Op: ports.ReplaceOp, Path: "/node_uuid", Value: other.UUID},
	}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if updated.Extra["owner"] != "ops" || updated.Extra["rack"] != nil || updated.PXEEnabled || updated.NodeUUID != other.UUID {
		t.Fatalf("patched %+v", updated)
	}
	stored, _ := l.c.Store().GetPort(ctx, created.UUID)
	if stored.NodeUUID != other.UUID || stored.PXEEnabled {
		t.Fatalf("stored %+v", stored)
	}
	if err := ports.Delete(ctx, sc, created.UUID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := ports.Get(ctx, sc, created.UUID).Extract(); err == nil {
		t.Fatal("port still there after delete")
	}
	for _, uuid := range []string{n.UUID, other.UUID} {
		if node, _ := l.c.Store().GetNode(ctx, uuid); node.Reservation != "" {
			t.Fatalf("node %s left locked by %s", uuid, node.Reservation)
		}
	}
}

func TestPortCreateRefusals(t *testing.T) {
	l := newLab(t)
	n := l.enroll(t, "node-1", nil)
	l.port(t, n.UUID, "52:54:00:00:00:01", nil)
	body := func(extra string) string {
		return `{"node_uuid":"` + n.UUID + `","address":"52:54:00:00:00:09"` + extra + `}`
	}
	cases := []struct {
		name, version, body string
		status              int
		fault               string
	}{
		{"duplicate MAC", "1.89", `{"node_uuid":"` + n.UUID + `","address":"52:54:00:00:00:01"}`, 409, "A port with MAC address 52:54:00:00:00:01 already exists."},
		{"duplicate MAC in another case", "1.89", `{"node_uuid":"` + n.UUID + `","address":"52-54-00-00-00-01"}`, 409, "A port with MAC address 52:54:00:00:00:01 already exists."},
		{"bad MAC", "1.89", `{"node_uuid":"` + n.UUID + `","address":"52:54:00:00:00"}`, 400, "Expected valid MAC address for address: 52:54:00:00:00"},
		{"no address", "1.89", `{"node_uuid":"` + n.UUID + `"}`, 400, "'address' is a required property"},
		{"no node", "1.89", `{"address":"52:54:00:00:00:09"}`, 400, "is not valid under any of the given schemas"},
		{"unknown node", "1.89", `{"node_uuid":"11111111-2222-4333-8444-555555555555","address":"52:54:00:00:00:09"}`, 400, "Node 11111111-2222-4333-8444-555555555555 could not be found."},
		{"node_uuid not a UUID", "1.89", `{"node_uuid":"node-1","address":"52:54:00:00:00:09"}`, 400, "Expected UUID for node_uuid: node-1"},
		{"node_ident before 1.94", "1.93", `{"node_ident":"node-1","address":"52:54:00:00:00:09"}`, 406, ""},
		{"both node fields", "1.94", `{"node_ident":"node-1","node_uuid":"` + n.UUID + `","address":"52:54:00:00:00:09"}`, 400, "is valid under each of"},
		{"unknown field", "1.89", body(`,"colour":"red"`), 400, "Additional properties are not allowed ('colour' was unexpected)"},
		{"read-only field", "1.89", body(`,"internal_info":{}`), 400, "('internal_info' was unexpected)"},
		{"name before 1.88", "1.87", body(`,"name":"eth0"`), 406, ""},
		{"pxe_enabled before 1.19", "1.18", body(`,"pxe_enabled":true`), 406, ""},
		{"physical_network before 1.34", "1.33", body(`,"physical_network":"p"`), 406, ""},
		{"is_smartnic before 1.53", "1.52", body(`,"is_smartnic":true`), 406, ""},
		{"category before 1.101", "1.100", body(`,"category":"x"`), 406, ""},
		{"network_type before 1.64", "1.63", body(`,"local_link_connection":{"network_type":"unmanaged"}`), 406, ""},
		{"smart NIC without hostname", "1.89", body(`,"is_smartnic":true,"local_link_connection":{"port_id":"p1","switch_id":"aa:bb:cc:dd:ee:ff"}`), 400, "Smart NIC port must have port_id and hostname in local_link_connection"},
		{"link without switch", "1.89", body(`,"local_link_connection":{"port_id":"p1"}`), 400, "is not valid under any of the given schemas"},
		{"link with an unknown key", "1.89", body(`,"local_link_connection":{"port_id":"p1","switch_id":"aa:bb:cc:dd:ee:ff","vlan":"1"}`), 400, "('vlan' was unexpected)"},
		{"bad switch_id", "1.89", body(`,"local_link_connection":{"port_id":"p1","switch_id":"tor-1"}`), 400, "Expected a MAC address or OpenFlow datapath ID but received tor-1."},
		{"empty physical network", "1.89", body(`,"physical_network":""`), 400, "A non-empty value is required when setting physical_network"},
		{"physical network too long", "1.89", body(`,"physical_network":"` + strings.Repeat("p", 65) + `"`), 400, "is too long"},
		{"bad pxe_enabled", "1.89", body(`,"pxe_enabled":"maybe"`), 400, "Invalid pxe_enabled"},
		{"unknown portgroup", "1.89", body(`,"portgroup_uuid":"11111111-2222-4333-8444-555555555555"`), 400, "Portgroup 11111111-2222-4333-8444-555555555555 could not be found."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, _, resp := do(t, "POST", l.srv.URL+"/v1/ports", tc.version, tc.body)
			if st != tc.status {
				t.Fatalf("status %d, want %d: %s", st, tc.status, resp)
			}
			if f := faultString(t, resp); !strings.Contains(f, tc.fault) {
				t.Fatalf("fault %q, want %q", f, tc.fault)
			}
		})
	}
	ps, _ := l.c.Store().ListPorts(context.Background(), n.UUID)
	if len(ps) != 1 {
		t.Fatalf("refused creates wrote ports: %d", len(ps))
	}

	// Accepted forms: node_ident by name from 1.94, a datapath switch ID,
	// string booleans, every newer field at the newest version.
	st, hdr, resp := do(t, "POST", l.srv.URL+"/v1/ports", "1.101",
		`{"node_ident":"node-1","address":"52:54:00:00:00:0A","pxe_enabled":"false","is_smartnic":"yes","name":"eth1","description":"d","vendor":"v","category":"c",`+
			`"local_link_connection":{"port_id":"p1","hostname":"dpu-1","switch_id":"0x000000000000ABCD"}}`)
	if st != 201 {
		t.Fatalf("create: %d %s", st, resp)
	}
	p := decodeJSON(t, resp)
	llc, _ := p["local_link_connection"].(map[string]any)
	if p["node_uuid"] != n.UUID || p["pxe_enabled"] != false || p["is_smartnic"] != true || p["name"] != "eth1" || p["category"] != "c" ||
		llc["switch_id"] != "0x000000000000abcd" || p["portgroup_uuid"] != nil {
		t.Fatalf("created %s", resp)
	}
	if loc := hdr.Get("Location"); loc != l.srv.URL+"/v1/ports/"+p["uuid"].(string) {
		t.Fatalf("Location %q", loc)
	}
	st, _, resp = do(t, "POST", l.srv.URL+"/v1/ports", "1.101", `{"node_uuid":"`+n.UUID+`","address":"52:54:00:00:00:0b","name":"eth1"}`)
	if st != 409 || faultString(t, resp) != "A port with name eth1 already exists." {
		t.Fatalf("duplicate name: %d %s", st, resp)
	}
}

func TestPortFieldsPerVersion(t *testing.T) {
	l := newLab(t)
	n := l.enroll(t, "node-1", nil)
	p := l.port(t, n.UUID, "52:54:00:00:00:01", func(p *baremetal.Port) {
		p.Name = "eth0"
		p.LocalLinkConnection = map[string]any{"port_id": "p1", "vtep-logical-switch": "ls", "vtep-physical-switch": "ps"}
	})
	cases := []struct {
		version string
		has     []string
		hasNot  []string
	}{
		{"", []string{"uuid", "address", "node_uuid", "extra", "links", "created_at"}, []string{"internal_info", "pxe_enabled", "local_link_connection", "name"}},
		{"1.18", []string{"internal_info"}, []string{"pxe_enabled", "local_link_connection"}},
		{"1.19", []string{"pxe_enabled", "local_link_connection"}, []string{"portgroup_uuid", "physical_network"}},
		{"1.34", []string{"portgroup_uuid", "physical_network"}, []string{"is_smartnic"}},
		{"1.53", []string{"is_smartnic"}, []string{"name"}},
		{"1.88", []string{"name"}, []string{"description"}},
		{"1.100", []string{"description", "vendor"}, []string{"category"}},
		{"1.101", []string{"category"}, nil},
	}
	for _, tc := range cases {
		st, _, body := do(t, "GET", l.srv.URL+"/v1/ports/"+p.UUID, tc.version, "")
		if st != 200 {
			t.Fatalf("%s: %d %s", tc.version, st, body)
		}
		m := decodeJSON(t, body)
		for _, f := range tc.has {
			if _, ok := m[f]; !ok {
				t.Errorf("version %q lacks %s", tc.version, f)
			}
		}
		for _, f := range tc.hasNot {
			if _, ok := m[f]; ok {
				t.Errorf("version %q shows %s", tc.version, f)
			}
		}
	}
	// An OVN VTEP link shows only between 1.90 and 1.104.
	for v, want := range map[string]int{"1.89": 0, "1.90": 3, "1.104": 3, "1.105": 0} {
		_, _, body := do(t, "GET", l.srv.URL+"/v1/ports/"+p.UUID, v, "")
		if llc := decodeJSON(t, body)["local_link_connection"].(map[string]any); len(llc) != want {
			t.Errorf("%s: local_link_connection %v", v, llc)
		}
	}
	// By name from 1.88 and by MAC address, as Ironic's Port.get.
	for _, ident := range []string{"eth0", "52-54-00-00-00-01", strings.ToUpper(p.UUID)} {
		st, _, body := do(t, "GET", l.srv.URL+"/v1/ports/"+ident+"?fields=uuid,name", "1.88", "")
		if m := decodeJSON(t, body); st != 200 || m["uuid"] != p.UUID || len(m) != 3 {
			t.Errorf("GET %s: %d %s", ident, st, body)
		}
	}
	for _, tc := range []struct {
		path, version string
		status        int
	}{
		{"/v1/ports/" + p.UUID + "?fields=uuid", "1.7", 406},
		{"/v1/ports/" + p.UUID + "?fields=name", "1.87", 406},
		{"/v1/ports/" + p.UUID + "?fields=colour", "1.88", 400},
		{"/v1/ports/nobody", "1.88", 404},
		{"/v1/ports/a:b", "1.88", 400},
	} {
		if st, _, body := do(t, "GET", l.srv.URL+tc.path, tc.version, ""); st != tc.status {
			t.Errorf("GET %s at %s: %d, want %d: %s", tc.path, tc.version, st, tc.status, body)
		}
	}
}

func TestPortListFiltersAndPages(t *testing.T) {
	l := newLab(t)
	a := l.enroll(t, "node-a", func(n *baremetal.Node) { n.ConductorGroup = "rack-1"; n.Shard = "s1" })
	b := l.enroll(t, "node-b", nil)
	pa1 := l.port(t, a.UUID, "52:54:00:00:00:03", nil)
	pa2 := l.port(t, a.UUID, "52:54:00:00:00:01", nil)
	pb1 := l.port(t, b.UUID, "52:54:00:00:00:02", func(p *baremetal.Port) { p.Description = "the uplink" })
	list := func(path, version string) (int, []string, string, string) {
		t.Helper()
		st, _, body := do(t, "GET", l.srv.URL+path, version, "")
		if st != 200 {
			return st, nil, "", faultString(t, body)
		}
		var out struct {
			Ports []map[string]any `json:"ports"`
			Next  string           `json:"next"`
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range out.Ports {
			ids = append(ids, p["uuid"].(string))
		}
		return st, ids, out.Next, ""
	}
	join := func(ps ...*baremetal.Port) string {
		var s []string
		for _, p := range ps {
			s = append(s, p.UUID)
		}
		return strings.Join(s, ",")
	}
	cases := []struct {
		name, path, version string
		status              int
		want                string
	}{
		{"all", "/v1/ports", "1.1", 200, join(pa1, pa2, pb1)},
		{"under a node", "/v1/nodes/node-a/ports", "1.5", 200, join(pa1, pa2)},
		{"under a node, detail", "/v1/nodes/" + b.UUID + "/ports/detail", "1.1", 200, join(pb1)},
		{"under a node by name before 1.5", "/v1/nodes/node-a/ports", "1.4", 404, ""},
		{"under an unknown node", "/v1/nodes/" + "11111111-2222-4333-8444-555555555555" + "/ports", "1.1", 404, ""},
		{"by address", "/v1/ports/detail?address=52:54:00:00:00:02", "1.1", 200, join(pb1)},
		{"by a bad address", "/v1/ports?address=zz", "1.1", 400, ""},
		{"node wins over address, as Ironic", "/v1/ports?node=node-a&address=52:54:00:00:00:02", "1.5", 200, join(pa1, pa2)},
		{"sorted by address", "/v1/ports?sort_key=address", "1.1", 200, join(pa2, pb1, pa1)},
		{"sorted by address, descending", "/v1/ports?sort_key=address&sort_dir=desc", "1.1", 200, join(pa1, pb1, pa2)},
		{"bad sort direction", "/v1/ports?sort_dir=up", "1.1", 400, ""},
		{"unsortable key", "/v1/ports?sort_key=extra", "1.1", 400, ""},
		{"sort key newer than the version", "/v1/ports?sort_key=name", "1.87", 406, ""},
		{"shard", "/v1/ports?shard=s1", "1.82", 200, join(pa1, pa2)},
		{"shard before 1.82", "/v1/ports?shard=s1", "1.81", 406, ""},
		{"conductor group", "/v1/ports?conductor_groups=RACK-1", "1.99", 200, join(pa1, pa2)},
		{"conductor group before 1.99", "/v1/ports?conductor_groups=rack-1", "1.98", 406, ""},
		{"conductor group with a node", "/v1/ports?conductor_groups=rack-1&node=node-a", "1.99", 400, ""},
		{"node and shard together", "/v1/ports?node=node-a&shard=s1", "1.82", 403, ""},
		{"unknown portgroup", "/v1/ports?portgroup=pg-1", "1.24", 404, ""},
		{"portgroup before 1.24", "/v1/ports?portgroup=pg-1", "1.23", 406, ""},
		{"description contains", "/v1/ports?description_contains=UPLINK", "1.97", 200, join(pb1)},
		{"too many shards", "/v1/ports?shard=" + strings.Repeat("s,", 101), "1.82", 400, ""},
		{"zero limit", "/v1/ports?limit=0", "1.1", 400, ""},
		{"unknown marker", "/v1/ports?marker=11111111-2222-4333-8444-555555555555", "1.1", 404, ""},
		{"marker not a UUID", "/v1/ports?marker=x", "1.1", 400, ""},
		{"detail query", "/v1/ports?detail=True", "1.43", 200, join(pa1, pa2, pb1)},
		{"detail query before 1.43", "/v1/ports?detail=True", "1.42", 400, ""},
		{"detail with fields", "/v1/ports?detail=True&fields=uuid", "1.43", 400, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, ids, _, fault := list(tc.path, tc.version)
			if st != tc.status {
				t.Fatalf("status %d, want %d (%s)", st, tc.status, fault)
			}
			if st == 200 && strings.Join(ids, ",") != tc.want {
				t.Fatalf("ports %v, want %s", ids, tc.want)
			}
			if st != 200 && fault == "" {
				t.Fatal("an error without a faultstring")
			}
		})
	}
	// Paging keeps the filters and the order.
	_, ids, next, _ := list("/v1/nodes/node-a/ports?limit=1&sort_key=address", "1.5")
	if len(ids) != 1 || ids[0] != pa2.UUID || next == "" {
		t.Fatalf("first page %v next %q", ids, next)
	}
	u, _ := url.Parse(next)
	if u.Path != "/v1/nodes/"+a.UUID+"/ports" || u.Query().Get("sort_key") != "address" || u.Query().Get("marker") != pa2.UUID {
		t.Fatalf("next link %s", next)
	}
	_, ids, _, _ = list(u.RequestURI(), "1.5")
	if len(ids) != 1 || ids[0] != pa1.UUID {
		t.Fatalf("second page %v", ids)
	}
	// Detail shows every field; the default listing uuid, address, links.
	_, _, body := do(t, "GET", l.srv.URL+"/v1/ports", "1.101", "")
	if m := decodeJSON(t, body)["ports"].([]any)[0].(map[string]any); len(m) != 3 {
		t.Fatalf("default listing fields %v", m)
	}
	_, _, body = do(t, "GET", l.srv.URL+"/v1/ports/detail", "1.101", "")
	if m := decodeJSON(t, body)["ports"].([]any)[0].(map[string]any); len(m) != 17 {
		t.Fatalf("detail fields %d: %v", len(m), m)
	}
}

func TestPortPatchAndDeleteRules(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	n := l.enroll(t, "node-1", func(n *baremetal.Node) { no := false; n.AutomatedClean = &no })
	owned := l.enroll(t, "owned", func(n *baremetal.Node) { n.Owner = "project-x" })
	p := l.port(t, n.UUID, "52:54:00:00:00:01", nil)
	l.port(t, owned.UUID, "52:54:00:00:00:02", nil)
	patch := func(version, body string) (int, string) {
		t.Helper()
		st, _, resp := do(t, "PATCH", l.srv.URL+"/v1/ports/"+p.UUID, version, body)
		return st, resp
	}
	refusals := []struct {
		name, version, body string
		status              int
		fault               string
	}{
		{"read-only field", "1.89", `[{"op":"replace","path":"/internal_info","value":{}}]`, 400, "Cannot patch /internal_info. Only the following can be updated: address, extra,"},
		{"uuid", "1.89", `[{"op":"replace","path":"/uuid","value":"11111111-2222-4333-8444-555555555555"}]`, 400, "Cannot patch /uuid."},
		{"duplicate MAC", "1.89", `[{"op":"replace","path":"/address","value":"52:54:00:00:00:02"}]`, 409, "A port with MAC address 52:54:00:00:00:02 already exists."},
		{"bad MAC", "1.89", `[{"op":"replace","path":"/address","value":"nope"}]`, 400, "Expected valid MAC address for address: nope"},
		{"move to an unknown node", "1.89", `[{"op":"replace","path":"/node_uuid","value":"11111111-2222-4333-8444-555555555555"}]`, 400, "Unable to apply the requested node_uuid '11111111-2222-4333-8444-555555555555'. Requested value was invalid."},
		{"move to another owner's node", "1.89", `[{"op":"replace","path":"/node_uuid","value":"` + owned.UUID + `"}]`, 400, "Requested value was invalid."},
		{"physical_network before 1.34", "1.33", `[{"op":"replace","path":"/physical_network","value":"p"}]`, 406, ""},
		{"network_type before 1.64", "1.63", `[{"op":"add","path":"/local_link_connection/network_type","value":"unmanaged"}]`, 406, ""},
		{"empty physical network", "1.89", `[{"op":"replace","path":"/physical_network","value":""}]`, 400, "A non-empty value is required when setting physical_network"},
		{"smart NIC first, its link later", "1.89", `[{"op":"replace","path":"/is_smartnic","value":true}]`, 200, ""},
		{"new root attribute", "1.89", `[{"op":"add","path":"/node_ident","value":"owned"}]`, 400, "Adding a new attribute (/node_ident)"},
	}
	for _, tc := range refusals {
		st, resp := patch(tc.version, tc.body)
		if st != tc.status || (st != 200 && !strings.Contains(faultString(t, resp), tc.fault)) {
			t.Errorf("%s: %d %s", tc.name, st, resp)
		}
		if st == 200 {
			p, _ = l.c.Store().GetPort(ctx, p.UUID)
		}
	}
	// A node busy with an operation: its lock is taken, the PATCH is 409.
	if _, err := l.c.Store().ReserveNode(ctx, n.UUID, "other-conductor"); err != nil {
		t.Fatal(err)
	}
	st, hdr, resp := do(t, "PATCH", l.srv.URL+"/v1/ports/"+p.UUID, "1.89", `[{"op":"add","path":"/extra/a","value":1}]`)
	if st != 409 || hdr.Get("Retry-After") == "" || !strings.Contains(faultString(t, resp), "other-conductor") {
		t.Fatalf("locked node: %d %v %s", st, hdr, resp)
	}
	if err := l.c.Store().ReleaseNode(ctx, n.UUID, "other-conductor"); err != nil {
		t.Fatal(err)
	}
	stored, _ := l.c.Store().GetPort(ctx, p.UUID)
	if stored.Version != p.Version {
		t.Fatalf("a refused patch wrote the port (version %d → %d)", p.Version, stored.Version)
	}

	// Connectivity fields change only in enroll, inspecting, inspect
	// wait, manageable or in maintenance; the address not with an instance.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := l.c.Manage(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.WaitFor(wctx, n.UUID, statemachine.Manageable); err != nil {
		t.Fatal(err)
	}
	if err := l.c.Provide(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.WaitFor(wctx, n.UUID, statemachine.Available); err != nil {
		t.Fatal(err)
	}
	st, resp = patch("1.89", `[{"op":"replace","path":"/pxe_enabled","value":false}]`)
	if st != 409 || !strings.Contains(faultString(t, resp), "can not have any connectivity attributes") || !strings.Contains(faultString(t, resp), "The current state is available.") {
		t.Fatalf("pxe_enabled on an available node: %d %s", st, resp)
	}
	if st, resp = patch("1.89", `[{"op":"add","path":"/extra/ok","value":true}]`); st != 200 {
		t.Fatalf("extra on an available node: %d %s", st, resp)
	}
	if _, err := l.c.Update(ctx, n.UUID, func(n *baremetal.Node) error {
		n.InstanceUUID = "99999999-2222-4333-8444-555555555555"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st, resp = patch("1.89", `[{"op":"replace","path":"/address","value":"52:54:00:00:00:09"}]`)
	if st != 409 || !strings.Contains(faultString(t, resp), "Cannot update hardware address for port "+p.UUID) {
		t.Fatalf("address with an instance: %d %s", st, resp)
	}
	if err := l.c.SetMaintenance(ctx, n.UUID, true, "recabling"); err != nil {
		t.Fatal(err)
	}
	st, resp = patch("1.89", `[{"op":"replace","path":"/address","value":"52:54:00:00:00:09"},{"op":"replace","path":"/pxe_enabled","value":false}]`)
	if m := decodeJSON(t, resp); st != 200 || m["address"] != "52:54:00:00:00:09" || m["pxe_enabled"] != false {
		t.Fatalf("maintenance allows both: %d %s", st, resp)
	}
	if err := l.c.SetMaintenance(ctx, n.UUID, false, ""); err != nil {
		t.Fatal(err)
	}

	// A port bound to a VIF is deleted only in maintenance.
	stored, _ = l.c.Store().GetPort(ctx, p.UUID)
	stored.InternalInfo = map[string]any{"tenant_vif_port_id": "vif-1"}
	if err := l.c.Store().UpdatePort(ctx, stored); err != nil {
		t.Fatal(err)
	}
	st, _, resp = do(t, "DELETE", l.srv.URL+"/v1/ports/"+p.UUID, "1.89", "")
	if st != 409 || faultString(t, resp) != "Cannot delete the port "+p.UUID+" as it is bound to VIF vif-1 for use." {
		t.Fatalf("delete with a VIF: %d %s", st, resp)
	}
	if st, _, resp = do(t, "DELETE", l.srv.URL+"/v1/ports/eth0", "1.89", ""); st != 400 {
		t.Fatalf("delete by name: %d %s", st, resp)
	}
	if err := l.c.SetMaintenance(ctx, n.UUID, true, "decommission"); err != nil {
		t.Fatal(err)
	}
	if st, _, resp = do(t, "DELETE", l.srv.URL+"/v1/ports/"+p.UUID, "1.89", ""); st != 204 || resp != "" {
		t.Fatalf("delete in maintenance: %d %s", st, resp)
	}
	if st, _, _ = do(t, "DELETE", l.srv.URL+"/v1/ports/"+p.UUID, "1.89", ""); st != 404 {
		t.Fatalf("delete twice: %d", st)
	}
	if node, _ := l.c.Store().GetNode(ctx, n.UUID); node.Reservation != "" {
		t.Fatalf("node left locked by %s", node.Reservation)
	}
}

func TestPortsInPortgroups(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	a := l.enroll(t, "node-a", nil)
	b := l.enroll(t, "node-b", nil)
	bond := &baremetal.Portgroup{NodeUUID: a.UUID, Name: "bond0"}
	other := &baremetal.Portgroup{NodeUUID: b.UUID, Name: "bond1", StandalonePortsSupported: true}
	for _, g := range []*baremetal.Portgroup{bond, other} {
		if err := l.c.Store().Portgroups().Create(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	create := func(version, body string) (int, map[string]any, string) {
		t.Helper()
		st, _, resp := do(t, "POST", l.srv.URL+"/v1/ports", version, body)
		if st != 201 {
			return st, nil, faultString(t, resp)
		}
		return st, decodeJSON(t, resp), ""
	}
	st, p, fault := create("1.24", `{"node_uuid":"`+a.UUID+`","address":"52:54:00:00:00:01","portgroup_uuid":"`+bond.UUID+`"}`)
	if st != 201 || p["portgroup_uuid"] != bond.UUID {
		t.Fatalf("member port: %d %v %s", st, p, fault)
	}
	for _, tc := range []struct {
		name, body string
		status     int
		fault      string
	}{
		{"pxe_enabled in a portgroup without standalone ports", `{"node_uuid":"` + a.UUID + `","address":"52:54:00:00:00:02","pxe_enabled":true,"portgroup_uuid":"` + bond.UUID + `"}`,
			409, "Port group " + bond.UUID + " doesn't support standalone ports."},
		{"another node's portgroup", `{"node_uuid":"` + a.UUID + `","address":"52:54:00:00:00:02","portgroup_uuid":"` + other.UUID + `"}`,
			400, "Port can not be added to a portgroup belonging to a different node."},
	} {
		if st, _, fault := create("1.24", tc.body); st != tc.status || !strings.Contains(fault, tc.fault) {
			t.Errorf("%s: %d %s", tc.name, st, fault)
		}
	}
	uuid := p["uuid"].(string)
	for _, tc := range []struct {
		path, version string
		status        int
		want          int
	}{
		{"/v1/ports?portgroup=bond0", "1.24", 200, 1},
		{"/v1/ports?portgroup=" + other.UUID, "1.24", 200, 0},
		{"/v1/portgroups/bond0/ports", "1.24", 200, 1},
		{"/v1/portgroups/" + bond.UUID + "/ports/detail", "1.24", 200, 1},
		{"/v1/portgroups/bond0/ports", "1.23", 404, 0},
		{"/v1/portgroups/nobody/ports", "1.24", 404, 0},
	} {
		st, _, body := do(t, "GET", l.srv.URL+tc.path, tc.version, "")
		if st != tc.status {
			t.Errorf("%s at %s: %d, want %d: %s", tc.path, tc.version, st, tc.status, body)
			continue
		}
		if st == 200 {
			list := decodeJSON(t, body)["ports"].([]any)
			if len(list) != tc.want || (tc.want == 1 && list[0].(map[string]any)["uuid"] != uuid) {
				t.Errorf("%s: %v", tc.path, list)
			}
		}
	}
	st, _, resp := do(t, "PATCH", l.srv.URL+"/v1/ports/"+uuid, "1.102", `[{"op":"add","path":"/physical_network","value":"p2"}]`)
	if st != 400 || faultString(t, resp) != "physical_network cannot be changed while the port belongs to a portgroup." {
		t.Fatalf("physical_network in a portgroup: %d %s", st, resp)
	}
	st, _, resp = do(t, "PATCH", l.srv.URL+"/v1/ports/"+uuid, "1.102", `[{"op":"remove","path":"/portgroup_uuid"},{"op":"add","path":"/physical_network","value":"p2"}]`)
	if m := decodeJSON(t, resp); st != 200 || m["portgroup_uuid"] != nil || m["physical_network"] != "p2" {
		t.Fatalf("leave the portgroup: %d %s", st, resp)
	}
	if got, _ := l.c.Store().GetPort(ctx, uuid); got.PortgroupUUID != "" {
		t.Fatalf("stored portgroup %q", got.PortgroupUUID)
	}
}
