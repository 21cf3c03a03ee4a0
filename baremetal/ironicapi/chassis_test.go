package ironicapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// chassisDoc is a chassis as Ironic's API shows it.
type chassisDoc struct {
	UUID        string         `json:"uuid"`
	Description *string        `json:"description"`
	Extra       map[string]any `json:"extra"`
	CreatedAt   string         `json:"created_at"`
	UpdatedAt   *string        `json:"updated_at"`
	Links       []struct {
		Href string `json:"href"`
		Rel  string `json:"rel"`
	} `json:"links"`
	Nodes [][]struct {
		Href string `json:"href"`
		Rel  string `json:"rel"`
	} `json:"nodes"`
}

// nodeInChassis creates a node with a chassis through gophercloud: its
// CreateOpts has no chassis_uuid, so the body is extended as a
// gophercloud user does with their own CreateOptsBuilder.
type nodeInChassis struct {
	nodes.CreateOpts
	chassis string
}

func (o nodeInChassis) ToNodeCreateMap() (map[string]any, error) {
	m, err := o.CreateOpts.ToNodeCreateMap()
	if err == nil {
		m["chassis_uuid"] = o.chassis
	}
	return m, err
}

// Chassis CRUD and a node's chassis driven by gophercloud, as an
// operator's Go tool would: the raw service client for /v1/chassis
// (gophercloud has no chassis package) and the nodes package for the
// rest.
func TestChassisThroughGophercloud(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.25")
	var ch chassisDoc
	if _, err := sc.Post(ctx, sc.ServiceURL("chassis"), map[string]any{"description": "rack 1", "extra": map[string]any{"row": "b"}}, &ch, nil); err != nil {
		t.Fatalf("create chassis: %v", err)
	}
	if ch.UUID == "" || ch.Description == nil || *ch.Description != "rack 1" || ch.Extra["row"] != "b" || ch.CreatedAt == "" || ch.UpdatedAt != nil {
		t.Fatalf("created chassis = %+v", ch)
	}
	if len(ch.Links) != 2 || ch.Links[0].Href != l.srv.URL+"/v1/chassis/"+ch.UUID || ch.Links[1].Href != l.srv.URL+"/chassis/"+ch.UUID ||
		len(ch.Nodes) != 1 || len(ch.Nodes[0]) != 2 || ch.Nodes[0][0].Href != l.srv.URL+"/v1/chassis/"+ch.UUID+"/nodes" || ch.Nodes[0][1].Rel != "bookmark" {
		t.Fatalf("chassis links = %+v, nodes = %+v", ch.Links, ch.Nodes)
	}

	n, err := nodes.Create(ctx, sc, nodeInChassis{nodes.CreateOpts{Driver: "fake-hardware", Name: "in-rack"}, ch.UUID}).Extract()
	if err != nil || n.ChassisUUID != ch.UUID {
		t.Fatalf("create node in the chassis = %+v, %v", n, err)
	}
	other, err := nodes.Create(ctx, sc, nodes.CreateOpts{Driver: "fake-hardware", Name: "elsewhere"}).Extract()
	if err != nil || other.ChassisUUID != "" {
		t.Fatalf("create node without chassis = %+v, %v", other, err)
	}
	pages, err := nodes.List(sc, nodes.ListOpts{ChassisUUID: ch.UUID}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := nodes.ExtractNodes(pages); err != nil || len(list) != 1 || list[0].UUID != n.UUID {
		t.Fatalf("nodes of the chassis = %+v, %v", list, err)
	}
	var listed struct {
		Nodes []map[string]any `json:"nodes"`
	}
	if _, err := sc.Get(ctx, sc.ServiceURL("chassis", ch.UUID, "nodes"), &listed, nil); err != nil || len(listed.Nodes) != 1 || listed.Nodes[0]["uuid"] != n.UUID {
		t.Fatalf("GET chassis/{uuid}/nodes = %+v, %v", listed, err)
	}

	// A chassis with nodes is not deleted: Ironic's ChassisNotEmpty.
	_, err = sc.Delete(ctx, sc.ServiceURL("chassis", ch.UUID), nil)
	if !gophercloud.ResponseCodeIs(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "contains nodes") {
		t.Fatalf("delete chassis with a node = %v, want 400 ChassisNotEmpty", err)
	}

	var patched chassisDoc
	if _, err := sc.Patch(ctx, sc.ServiceURL("chassis", ch.UUID), []map[string]any{{"op": "replace", "path": "/description", "value": "rack 2"}}, &patched, nil); err != nil {
		t.Fatalf("patch chassis: %v", err)
	}
	if patched.Description == nil || *patched.Description != "rack 2" || patched.UpdatedAt == nil {
		t.Fatalf("patched chassis = %+v", patched)
	}
	// Moving the node out of the chassis (1.25) frees it.
	if _, err := nodes.Update(ctx, sc, n.UUID, nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.RemoveOp, Path: "/chassis_uuid"}}).Extract(); err != nil {
		t.Fatalf("remove the node's chassis: %v", err)
	}
	if _, err := sc.Delete(ctx, sc.ServiceURL("chassis", ch.UUID), nil); err != nil {
		t.Fatalf("delete emptied chassis: %v", err)
	}
	_, err = sc.Get(ctx, sc.ServiceURL("chassis", ch.UUID), &chassisDoc{}, nil)
	if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Fatalf("GET deleted chassis = %v, want 404", err)
	}
}

// newChassis creates a chassis and returns its UUID.
func newChassis(t *testing.T, l *lab, body string) string {
	t.Helper()
	st, _, resp := do(t, "POST", l.srv.URL+"/v1/chassis", "1.1", body)
	if st != http.StatusCreated {
		t.Fatalf("create chassis %s: %d %s", body, st, resp)
	}
	return bodyMap(t, resp)["uuid"].(string)
}

// Ironic's answers to the chassis API: codes, messages and documents as
// its tempest tests and clients see them.
func TestChassisAsIronicAnswers(t *testing.T) {
	l := newLab(t)
	base := l.srv.URL + "/v1/"
	const given = "0f3e6b5a-9c1d-4e2f-8a7b-6c5d4e3f2a1b"
	st, hdr, body := do(t, "POST", base+"chassis", "1.1", `{"description":"В Україні ♡ OpenStack!","uuid":"`+given+`"}`)
	wantRaw(t, "create", st, http.StatusCreated, body, "")
	if hdr.Get("Location") != base+"chassis/"+given {
		t.Fatalf("Location = %q", hdr.Get("Location"))
	}
	doc := bodyMap(t, body)
	if keys(doc) != "created_at,description,extra,links,nodes,updated_at,uuid" || doc["description"] != "В Україні ♡ OpenStack!" || doc["uuid"] != given {
		t.Fatalf("created chassis = %s", body)
	}
	full := newChassis(t, l, `{"description":"full","extra":{"k":"v"}}`)
	empty := newChassis(t, l, `{}`)
	node := newNode(t, l, "racked", `,"chassis_uuid":"`+strings.ToUpper(full)+`"`)

	for _, tc := range []struct {
		name, method, path, version, body string
		status                            int
		text                              string
	}{
		{"unknown member", "POST", "chassis", "1.1", `{"name":"x"}`, 400, "Schema error for chassis: Additional properties are not allowed ('name' was unexpected)"},
		{"description too long", "POST", "chassis", "1.1", `{"description":"` + strings.Repeat("d", 256) + `"}`, 400, "is too long"},
		{"description not text", "POST", "chassis", "1.1", `{"description":5}`, 400, "Schema error for chassis: 5 is not of type 'string', 'null'"},
		{"extra not an object", "POST", "chassis", "1.1", `{"extra":[]}`, 400, "is not of type 'object', 'null'"},
		{"bad uuid", "POST", "chassis", "1.1", `{"uuid":"rack-1"}`, 400, "Expected UUID for uuid: rack-1"},
		{"duplicate uuid", "POST", "chassis", "1.1", `{"uuid":"` + given + `"}`, 409, "A chassis with UUID " + given + " already exists."},
		{"show by name", "GET", "chassis/rack-1", "1.1", "", 400, "Expected UUID for chassis_uuid: rack-1"},
		{"show unknown", "GET", "chassis/aaaaaaaa-0000-4000-8000-00000000dead", "1.1", "", 404, "Chassis aaaaaaaa-0000-4000-8000-00000000dead could not be found."},
		{"fields before 1.8", "GET", "chassis?fields=uuid", "1.7", "", 406, ""},
		{"unknown field", "GET", "chassis/" + full + "?fields=name", "1.8", "", 400, `Field(s) "name" are not valid`},
		{"detail before 1.43", "GET", "chassis?detail=true", "1.42", "", 400, "Invalid query parameter ?detail=True received."},
		{"detail and fields", "GET", "chassis?detail=true&fields=uuid", "1.43", "", 400, "Can not specify ?detail=True and fields in the same request."},
		{"fields on the detail path", "GET", "chassis/detail?fields=uuid", "1.8", "", 400, "'fields' was unexpected"},
		{"sort by extra", "GET", "chassis?sort_key=extra", "1.1", "", 400, "The sort_key value extra is an invalid field for sorting"},
		{"sort by unknown", "GET", "chassis?sort_key=name", "1.1", "", 400, `The sort_key value "name" is an invalid field for sorting`},
		{"sort direction", "GET", "chassis?sort_dir=up", "1.1", "", 400, "Invalid sort direction: up. Acceptable values are 'asc' or 'desc'"},
		{"zero limit", "GET", "chassis?limit=0", "1.1", "", 400, "Limit must be positive"},
		{"unknown marker", "GET", "chassis?marker=aaaaaaaa-0000-4000-8000-00000000dead", "1.1", "", 404, "Chassis aaaaaaaa-0000-4000-8000-00000000dead could not be found."},
		{"patch a read-only field", "PATCH", "chassis/" + full, "1.1", `[{"op":"replace","path":"/created_at","value":"x"}]`, 400, "Cannot patch /created_at. Only the following can be updated: uuid, extra, description"},
		{"patch the uuid", "PATCH", "chassis/" + full, "1.1", `[{"op":"replace","path":"/uuid","value":"` + given + `"}]`, 400, "Cannot overwrite UUID for an existing Chassis."},
		{"patch too long", "PATCH", "chassis/" + full, "1.1", `[{"op":"replace","path":"/description","value":"` + strings.Repeat("d", 256) + `"}]`, 400, "Schema error for patch:"},
		{"patch unknown", "PATCH", "chassis/aaaaaaaa-0000-4000-8000-00000000dead", "1.1", `[{"op":"remove","path":"/extra"}]`, 404, "could not be found"},
		{"delete with a node", "DELETE", "chassis/" + full, "1.1", "", 400, "Cannot complete the requested action because chassis " + full + " contains nodes."},
		{"delete unknown", "DELETE", "chassis/aaaaaaaa-0000-4000-8000-00000000dead", "1.1", "", 404, "could not be found"},
		{"delete by name", "DELETE", "chassis/rack-1", "1.1", "", 400, "Expected UUID for chassis_uuid: rack-1"},
		{"a node through the chassis", "GET", "chassis/" + full + "/nodes/" + node, "1.1", "", 400, "Malformed request URI."},
		{"create a node through the chassis", "POST", "chassis/" + full + "/nodes", "1.1", `{"driver":"fake-hardware"}`, 400, "Malformed request URI."},
		{"chassis nodes by name", "GET", "chassis/rack-1/nodes", "1.1", "", 400, "Expected UUID for chassis_uuid: rack-1"},
		{"node in an unknown chassis", "POST", "nodes", "1.1", `{"driver":"fake-hardware","chassis_uuid":"aaaaaaaa-0000-4000-8000-00000000dead"}`, 400, "Chassis aaaaaaaa-0000-4000-8000-00000000dead could not be found."},
		{"node in a chassis by name", "POST", "nodes", "1.1", `{"driver":"fake-hardware","chassis_uuid":"rack-1"}`, 400, "Expected UUID for chassis_uuid: rack-1"},
		{"node moved to an unknown chassis", "PATCH", "nodes/" + node, "1.1", `[{"op":"replace","path":"/chassis_uuid","value":"aaaaaaaa-0000-4000-8000-00000000dead"}]`, 400, "Chassis aaaaaaaa-0000-4000-8000-00000000dead could not be found."},
		{"chassis removed before 1.25", "PATCH", "nodes/" + node, "1.24", `[{"op":"remove","path":"/chassis_uuid"}]`, 406, ""},
		{"nodes by chassis name", "GET", "nodes?chassis_uuid=rack-1", "1.1", "", 400, "Expected UUID for chassis_uuid: rack-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, body := do(t, tc.method, base+tc.path, tc.version, tc.body)
			wantRaw(t, tc.name, st, tc.status, body, tc.text)
		})
	}

	// Listings: Ironic's default fields, detail, paging by marker and
	// sorting.
	st, _, body = do(t, "GET", base+"chassis", "1.1", "")
	list := bodyMap(t, body)["chassis"].([]any)
	if st != 200 || len(list) != 3 || keys(list[0].(map[string]any)) != "description,links,uuid" {
		t.Fatalf("list = %d %s; want three chassis with Ironic's default fields", st, body)
	}
	for _, path := range []string{"chassis/detail", "chassis?detail=True"} {
		st, _, body = do(t, "GET", base+path, "1.43", "")
		if list := bodyMap(t, body)["chassis"].([]any); st != 200 || len(list) != 3 || keys(list[1].(map[string]any)) != "created_at,description,extra,links,nodes,updated_at,uuid" {
			t.Fatalf("GET %s = %d %s; want every field", path, st, body)
		}
	}
	st, _, body = do(t, "GET", base+"chassis?limit=2&sort_key=description&sort_dir=desc&fields=uuid", "1.8", "")
	page := bodyMap(t, body)
	if list := page["chassis"].([]any); st != 200 || len(list) != 2 || list[0].(map[string]any)["uuid"] != given || list[1].(map[string]any)["uuid"] != full ||
		keys(list[0].(map[string]any)) != "links,uuid" {
		t.Fatalf("page 1 = %d %s; want the two longest descriptions, uuid and links", st, body)
	}
	next, _ := page["next"].(string)
	if !strings.Contains(next, "marker="+full) || !strings.Contains(next, "sort_key=description") {
		t.Fatalf("next = %q", next)
	}
	st, _, body = do(t, "GET", next, "1.8", "")
	if list := bodyMap(t, body)["chassis"].([]any); st != 200 || len(list) != 1 || list[0].(map[string]any)["uuid"] != empty {
		t.Fatalf("page 2 = %d %s; want the chassis without description", st, body)
	}

	// Patch as tempest does: the description, an extra key, the whole
	// extra; removing extra leaves an empty object.
	for _, tc := range []struct{ patch, check string }{
		{`[{"op":"replace","path":"/description","value":"new"}]`, `"description":"new"`},
		{`[{"op":"add","path":"/extra/key3","value":"v3"}]`, `"key3":"v3"`},
		{`[{"op":"remove","path":"/extra"}]`, `"extra":{}`},
		{`[{"op":"remove","path":"/description"}]`, `"description":null`},
	} {
		st, _, body = do(t, "PATCH", base+"chassis/"+full, "1.1", tc.patch)
		if st != 200 || !strings.Contains(body, tc.check) {
			t.Fatalf("PATCH %s = %d %s; want %s", tc.patch, st, body, tc.check)
		}
	}

	// The node shows its chassis, and the chassis' nodes list it, with
	// the node listing's own filters and detail.
	st, _, body = do(t, "GET", base+"nodes/"+node+"?fields=chassis_uuid", "1.8", "")
	if st != 200 || bodyMap(t, body)["chassis_uuid"] != full {
		t.Fatalf("node's chassis = %d %s", st, body)
	}
	for _, path := range []string{"chassis/" + full + "/nodes", "chassis/" + full + "/nodes/detail", "nodes?chassis_uuid=" + full, "nodes/detail?chassis_uuid=" + strings.ToUpper(full)} {
		st, _, body = do(t, "GET", base+path, "1.1", "")
		var got struct{ Nodes []map[string]any }
		_ = json.Unmarshal([]byte(body), &got)
		if st != 200 || len(got.Nodes) != 1 || got.Nodes[0]["uuid"] != node {
			t.Fatalf("GET %s = %d %s; want the node", path, st, body)
		}
	}
	st, _, body = do(t, "GET", base+"chassis/"+empty+"/nodes", "1.1", "")
	if st != 200 || len(bodyMap(t, body)["nodes"].([]any)) != 0 {
		t.Fatalf("nodes of an empty chassis = %d %s", st, body)
	}
	st, _, body = do(t, "GET", base+"chassis/"+full+"/nodes?limit=1", "1.1", "")
	if next, _ := bodyMap(t, body)["next"].(string); st != 200 || !strings.HasPrefix(next, base+"chassis/"+full+"/nodes?") {
		t.Fatalf("next of a chassis' nodes = %q (%d %s); want the chassis' own listing", next, st, body)
	}

	// Moving the node to another chassis, then out of any (1.25).
	st, _, body = do(t, "PATCH", base+"nodes/"+node, "1.1", `[{"op":"replace","path":"/chassis_uuid","value":"`+empty+`"}]`)
	if st != 200 || bodyMap(t, body)["chassis_uuid"] != empty {
		t.Fatalf("move node = %d %s", st, body)
	}
	st, _, body = do(t, "DELETE", base+"chassis/"+full, "1.1", "")
	wantRaw(t, "delete the emptied chassis", st, http.StatusNoContent, body, "")
	st, _, body = do(t, "PATCH", base+"nodes/"+node, "1.25", `[{"op":"remove","path":"/chassis_uuid"}]`)
	if st != 200 || bodyMap(t, body)["chassis_uuid"] != nil {
		t.Fatalf("remove the node's chassis = %d %s", st, body)
	}
	st, _, body = do(t, "DELETE", base+"chassis/"+empty, "1.1", "")
	wantRaw(t, "delete the other chassis", st, http.StatusNoContent, body, "")
}
