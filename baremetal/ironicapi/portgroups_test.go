package ironicapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/portgroups"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/ports"
)

func TestPortgroupsThroughGophercloud(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.26")
	n, err := nodes.Create(ctx, sc, nodes.CreateOpts{Name: "pg-node", Driver: "fake-hardware"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	other, err := nodes.Create(ctx, sc, nodes.CreateOpts{Name: "pg-other", Driver: "fake-hardware"}).Extract()
	if err != nil {
		t.Fatal(err)
	}

	g, err := portgroups.Create(ctx, sc, portgroups.CreateOpts{NodeUUID: "pg-node", Name: "bond0", Address: "52:54:00:AA:00:01",
		Properties: map[string]any{"miimon": 100}, Extra: map[string]string{"rack": "r1"}}).Extract()
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if g.NodeUUID != n.UUID || g.Address != "52:54:00:aa:00:01" || g.Mode != "active-backup" || !g.StandalonePortsSupported ||
		g.Properties["miimon"] != float64(100) || g.Extra["rack"] != "r1" || len(g.Links) != 2 || len(g.Ports) != 2 || g.CreatedAt.IsZero() {
		t.Fatalf("created portgroup = %+v; want the node's UUID, a lower-case MAC, Ironic's default mode, standalone ports, links", g)
	}
	for _, ident := range []string{g.UUID, "bond0"} {
		got, err := portgroups.Get(ctx, sc, ident).Extract()
		if err != nil || got.UUID != g.UUID || got.Name != "bond0" {
			t.Fatalf("Get(%s) = %+v, %v", ident, got, err)
		}
	}
	g2, err := portgroups.Create(ctx, sc, portgroups.CreateOpts{NodeUUID: other.UUID, Mode: "802.3ad"}).Extract()
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		opts portgroups.ListOpts
		want []string
	}{
		{"all", portgroups.ListOpts{}, []string{g.UUID, g2.UUID}},
		{"node filter by name", portgroups.ListOpts{Node: "pg-other"}, []string{g2.UUID}},
		{"address filter", portgroups.ListOpts{Address: "52:54:00:aa:00:01"}, []string{g.UUID}},
		{"detail", portgroups.ListOpts{Detail: true, Node: n.UUID}, []string{g.UUID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sc
			if tc.opts.Detail {
				c = l.client(t, "1.43") // ?detail is 1.43's
			}
			pages, err := portgroups.List(c, tc.opts).AllPages(ctx)
			if err != nil {
				t.Fatal(err)
			}
			list, err := portgroups.ExtractPortGroups(pages)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range list {
				got = append(got, x.UUID)
				if tc.opts.Detail != (x.NodeUUID != "") {
					t.Errorf("portgroup %s node_uuid %q with detail=%v", x.UUID, x.NodeUUID, tc.opts.Detail)
				}
			}
			if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
				t.Fatalf("List(%+v) = %v, want %v", tc.opts, got, tc.want)
			}
		})
	}

	// Raw requests: the shapes and codes gophercloud does not expose.
	base := l.srv.URL + "/v1/"
	status, _, body := do(t, "GET", base+"portgroups?detail=True", "1.42", "")
	wantRaw(t, "?detail at 1.42", status, http.StatusNotAcceptable, body, "")
	status, _, body = do(t, "GET", base+"portgroups", "1.22", "")
	wantRaw(t, "GET /v1/portgroups at 1.22", status, http.StatusNotFound, body, "")
	status, _, body = do(t, "GET", base+"portgroups", "1.24", "")
	if status != http.StatusOK || keys(bodyMap(t, body)["portgroups"].([]any)[0].(map[string]any)) != "address,links,name,uuid" {
		t.Fatalf("list at 1.24 = %d %s; want Ironic's default fields", status, body)
	}
	status, _, body = do(t, "GET", base+"portgroups/bond0", "1.24", "")
	if v := bodyMap(t, body); status != http.StatusOK || v["mode"] != nil || v["properties"] != nil {
		t.Fatalf("portgroup at 1.24 = %d %s; want mode and properties hidden before 1.26", status, body)
	}
	status, _, body = do(t, "GET", base+"portgroups/bond0?fields=uuid,mode", "1.26", "")
	if status != http.StatusOK || keys(bodyMap(t, body)) != "links,mode,uuid" {
		t.Fatalf("fields=uuid,mode = %d %s", status, body)
	}
	status, _, body = do(t, "GET", base+"nodes/pg-other/portgroups/detail", "1.26", "")
	if list := bodyMap(t, body)["portgroups"].([]any); status != http.StatusOK || len(list) != 1 || list[0].(map[string]any)["mode"] != "802.3ad" {
		t.Fatalf("node's portgroups = %d %s", status, body)
	}
	status, _, body = do(t, "POST", base+"portgroups", "1.26", `{"node_uuid":"`+other.UUID+`","address":"52:54:00:aa:00:01"}`)
	wantRaw(t, "duplicate MAC", status, http.StatusConflict, body, "A port or portgroup with MAC address 52:54:00:aa:00:01 already exists.")
	status, _, body = do(t, "POST", base+"portgroups", "1.26", `{"node_uuid":"`+other.UUID+`","name":"bond0"}`)
	wantRaw(t, "duplicate name", status, http.StatusConflict, body, "bond0")
	status, _, body = do(t, "POST", base+"portgroups", "1.26", `{"node_uuid":"`+other.UUID+`","wrong":1}`)
	wantRaw(t, "unknown field", status, http.StatusBadRequest, body, "wrong")
	status, _, body = do(t, "POST", base+"portgroups", "1.26", `{"node_uuid":"no-such-node"}`)
	wantRaw(t, "unknown node", status, http.StatusBadRequest, body, "no-such-node")
	status, _, body = do(t, "GET", base+"portgroups/bond9", "1.26", "")
	wantRaw(t, "unknown portgroup", status, http.StatusNotFound, body, "Portgroup bond9 could not be found.")

	// PATCH as Ironic applies it.
	status, _, body = do(t, "PATCH", base+"portgroups/bond0", "1.26",
		`[{"op":"replace","path":"/mode","value":"802.3ad"},{"op":"add","path":"/extra/slot","value":"4"},{"op":"add","path":"/standalone_ports_supported","value":"false"}]`)
	if v := bodyMap(t, body); status != http.StatusOK || v["mode"] != "802.3ad" || v["extra"].(map[string]any)["slot"] != "4" ||
		v["extra"].(map[string]any)["rack"] != "r1" || v["standalone_ports_supported"] != false {
		t.Fatalf("PATCH = %d %s", status, body)
	}
	status, _, body = do(t, "PATCH", base+"portgroups/bond0", "1.26", `[{"op":"add","path":"/internal_info/x","value":"y"}]`)
	wantRaw(t, "PATCH internal_info", status, http.StatusBadRequest, body, "internal attribute")

	// Ports join portgroups of their node through the ports API (1.24).
	port, err := ports.Create(ctx, l.client(t, "1.26"), ports.CreateOpts{NodeUUID: n.UUID, Address: "52:54:00:bb:00:01", PortGroupUUID: g.UUID}).Extract()
	if err != nil || port.PortGroupUUID != g.UUID {
		t.Fatalf("port in a portgroup = %+v, %v", port, err)
	}
	pages, err := ports.List(l.client(t, "1.26"), ports.ListOpts{PortGroup: "bond0", Fields: []string{"uuid", "portgroup_uuid"}}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := ports.ExtractPorts(pages); err != nil || len(list) != 1 || list[0].UUID != port.UUID || list[0].PortGroupUUID != g.UUID {
		t.Fatalf("ports of portgroup bond0 = %+v, %v", list, err)
	}
	status, _, body = do(t, "POST", base+"ports", "1.26", `{"node_uuid":"`+other.UUID+`","address":"52:54:00:bb:00:02","portgroup_uuid":"`+g.UUID+`"}`)
	wantRaw(t, "port in another node's portgroup", status, http.StatusBadRequest, body, "portgroup")

	// A portgroup with ports cannot be deleted (Ironic's PortgroupNotEmpty).
	status, _, body = do(t, "DELETE", base+"portgroups/"+g.UUID, "1.26", "")
	wantRaw(t, "DELETE non-empty", status, http.StatusBadRequest, body, "contains ports")
	status, _, body = do(t, "PATCH", base+"ports/"+port.UUID, "1.26", `[{"op":"remove","path":"/portgroup_uuid"}]`)
	if status != http.StatusOK || bodyMap(t, body)["portgroup_uuid"] != nil {
		t.Fatalf("PATCH remove portgroup_uuid = %d %s", status, body)
	}
	if err := portgroups.Delete(ctx, sc, g.UUID).ExtractErr(); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := portgroups.Get(ctx, sc, g.UUID).Extract(); err == nil {
		t.Fatal("Get after Delete succeeded")
	}
}
