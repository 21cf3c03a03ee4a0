package ironicapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// listFixture creates nodes l0..l8 with varied fields through the API
// and returns them by name.
func listFixture(t *testing.T, l *lab) map[string]*baremetal.Node {
	t.Helper()
	ctx := context.Background()
	out := map[string]*baremetal.Node{}
	for i := 0; i < 9; i++ {
		body := map[string]any{
			"name": fmt.Sprintf("l%d", i), "driver": "fake-hardware",
			"resource_class":  []string{"gold", "silver", "bronze"}[i%3],
			"conductor_group": []string{"", "rack-a"}[i%2],
			"owner":           []string{"proj-a", "proj-b", ""}[i%3],
			"lessee":          []string{"", "proj-c"}[i%2],
			"description":     []string{"top of rack 1", "bottom", "spare part"}[i%3],
			"shard":           []string{"s1", "s2", "s3"}[i%3],
		}
		if i%4 == 0 {
			body["instance_uuid"] = fmt.Sprintf("cccccccc-0000-4000-8000-%012d", i)
		}
		if i == 5 {
			body["retired"] = true
		}
		data, _ := json.Marshal(body)
		st, _, resp := do(t, "POST", l.srv.URL+"/v1/nodes", "1.89", string(data))
		if st != 201 {
			t.Fatalf("create %s: %d %s", body["name"], st, resp)
		}
		var created struct{ UUID string }
		_ = json.Unmarshal([]byte(resp), &created)
		if i%3 == 0 {
			if err := l.c.SetMaintenance(ctx, created.UUID, true, "test"); err != nil {
				t.Fatal(err)
			}
		}
		if i == 7 {
			// A fault is set by the conductor only; write it as one would.
			n, _ := l.c.Store().GetNode(ctx, created.UUID)
			n.Fault = "power failure"
			if err := l.c.Store().UpdateNode(ctx, n, ""); err != nil {
				t.Fatal(err)
			}
		}
		n, err := l.c.Store().GetNode(ctx, created.UUID)
		if err != nil {
			t.Fatal(err)
		}
		out[n.Name] = n
	}
	return out
}

// listNames lists /v1/nodes?query at version and returns the names in
// order and the decoded body.
func listNames(t *testing.T, l *lab, version, query string) (int, []string, map[string]any, string) {
	t.Helper()
	st, _, body := do(t, "GET", l.srv.URL+"/v1/nodes?"+query, version, "")
	if st != 200 {
		return st, nil, nil, body
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("listing body %q: %v", body, err)
	}
	var names []string
	for _, n := range doc["nodes"].([]any) {
		if name, ok := n.(map[string]any)["name"].(string); ok {
			names = append(names, name)
		}
	}
	return st, names, doc, body
}

func TestNodeListFilters(t *testing.T) {
	l := newLab(t)
	fx := listFixture(t, l)
	keep := func(f func(n *baremetal.Node) bool) []string {
		var out []string
		for i := 0; i < 9; i++ {
			if n := fx[fmt.Sprintf("l%d", i)]; f(n) {
				out = append(out, n.Name)
			}
		}
		return out
	}
	cases := []struct {
		query string
		want  []string
	}{
		{"", keep(func(*baremetal.Node) bool { return true })},
		{"provision_state=enroll", keep(func(*baremetal.Node) bool { return true })},
		{"provision_state=active", nil},
		{"maintenance=true", keep(func(n *baremetal.Node) bool { return n.Maintenance })},
		{"maintenance=False", keep(func(n *baremetal.Node) bool { return !n.Maintenance })},
		{"driver=fake-hardware", keep(func(*baremetal.Node) bool { return true })},
		{"driver=ipmi", nil},
		{"resource_class=silver", keep(func(n *baremetal.Node) bool { return n.ResourceClass == "silver" })},
		{"conductor_group=RACK-A", keep(func(n *baremetal.Node) bool { return n.ConductorGroup == "rack-a" })},
		{"associated=true", keep(func(n *baremetal.Node) bool { return n.InstanceUUID != "" })},
		{"associated=no", keep(func(n *baremetal.Node) bool { return n.InstanceUUID == "" })},
		{"instance_uuid=cccccccc-0000-4000-8000-000000000004", []string{"l4"}},
		{"fault=power%20failure", []string{"l7"}},
		{"owner=proj-b", keep(func(n *baremetal.Node) bool { return n.Owner == "proj-b" })},
		{"lessee=proj-c", keep(func(n *baremetal.Node) bool { return n.Lessee == "proj-c" })},
		{"shard=s1,s3", keep(func(n *baremetal.Node) bool { return n.Shard == "s1" || n.Shard == "s3" })},
		{"description_contains=rack", []string{"l0", "l3", "l6"}},
		{"retired=true", []string{"l5"}},
		{"conductor=api-test", keep(func(*baremetal.Node) bool { return true })},
		{"conductor=elsewhere", nil},
		{"owner=proj-a&maintenance=true&resource_class=gold", keep(func(n *baremetal.Node) bool {
			return n.Owner == "proj-a" && n.Maintenance && n.ResourceClass == "gold"
		})},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			st, names, _, body := listNames(t, l, "1.89", tc.query)
			if st != 200 {
				t.Fatalf("status %d: %s", st, body)
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("got %v, want %v", names, tc.want)
			}
		})
	}
	// The same filter through gophercloud.
	pages, err := nodes.List(l.client(t, "1.89"), nodes.ListOpts{ResourceClass: "gold", Owner: "proj-a"}).AllPages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := nodes.ExtractNodes(pages)
	var gotNames []string
	for _, n := range got {
		gotNames = append(gotNames, n.Name)
	}
	if want := keep(func(n *baremetal.Node) bool { return n.ResourceClass == "gold" && n.Owner == "proj-a" }); !slices.Equal(gotNames, want) {
		t.Fatalf("gophercloud filter: %v, want %v", gotNames, want)
	}
}

func TestNodeListRefusals(t *testing.T) {
	l := newLab(t)
	listFixture(t, l)
	cases := []struct {
		version, query string
		status         int
		fault          string
	}{
		{"1.89", "limit=0", 400, "Limit must be positive"},
		{"1.89", "limit=-3", 400, "Limit must be positive"},
		{"1.89", "limit=ten", 400, "Expected an integer for limit: ten"},
		{"1.89", "marker=not-a-uuid", 400, "Expected UUID for marker: not-a-uuid"},
		{"1.89", "marker=99999999-0000-4000-8000-000000000000", 404, "Node 99999999-0000-4000-8000-000000000000 could not be found."},
		{"1.89", "sort_dir=up", 400, "Invalid sort direction: up. Acceptable values are 'asc' or 'desc'"},
		{"1.89", "sort_key=properties", 400, "The sort_key value properties is an invalid field for sorting"},
		{"1.89", "sort_key=nope", 400, "The sort_key value \"nope\" is an invalid field for sorting"},
		{"1.20", "sort_key=resource_class", 406, "Request not acceptable."},
		{"1.8", "provision_state=enroll", 406, "Request not acceptable."},
		{"1.89", "provision_state=flying", 400, "Provision state \"flying\" is not valid"},
		{"1.15", "driver=fake-hardware", 406, "Request not acceptable. The minimal required API version should be 1.16"},
		{"1.20", "resource_class=gold", 406, "should be 1.21"},
		{"1.41", "fault=power%20failure", 406, "should be 1.42"},
		{"1.89", "fault=bad", 400, "Unrecognized fault \"bad\" is specified"},
		{"1.45", "conductor_group=x", 406, "should be 1.46"},
		{"1.48", "conductor=x", 406, "should be 1.49"},
		{"1.49", "owner=x", 406, "should be 1.50"},
		{"1.64", "lessee=x", 406, "should be 1.65"},
		{"1.81", "shard=x", 406, "should be 1.82"},
		{"1.89", "maintenance=maybe", 400, "Invalid maintenance: Unrecognized value 'maybe'"},
		{"1.89", "instance_uuid=zzz", 400, "Expected UUID for instance_uuid: zzz"},
		{"1.7", "fields=uuid", 406, "Request not acceptable."},
		{"1.89", "fields=uuid,bogus", 400, "Field(s) \"bogus\" are not valid"},
		{"1.42", "detail=true", 400, "Invalid query parameter ?detail=true received."},
		{"1.89", "detail=true&fields=uuid", 400, "Can not specify ?detail=True and fields in the same request."},
	}
	for _, tc := range cases {
		t.Run(tc.version+" "+tc.query, func(t *testing.T) {
			st, _, _, body := listNames(t, l, tc.version, tc.query)
			if st != tc.status {
				t.Fatalf("status %d, want %d: %s", st, tc.status, body)
			}
			if f := faultString(t, body); !strings.Contains(f, tc.fault) {
				t.Fatalf("fault %q, want %q", f, tc.fault)
			}
		})
	}
}

func TestNodeListPagingSortingFields(t *testing.T) {
	l := newLab(t)
	fx := listFixture(t, l)
	// Sorted by name descending, pages of 4 followed through "next" as
	// gophercloud does.
	var got []string
	pager := nodes.List(l.client(t, "1.89"), nodes.ListOpts{Limit: 4, SortKey: "name", SortDir: "desc"})
	pagesSeen := 0
	err := pager.EachPage(context.Background(), func(_ context.Context, p pagination.Page) (bool, error) {
		pagesSeen++
		ns, err := nodes.ExtractNodes(p)
		for _, n := range ns {
			got = append(got, n.Name)
		}
		return true, err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"l8", "l7", "l6", "l5", "l4", "l3", "l2", "l1", "l0"}
	if !slices.Equal(got, want) || pagesSeen < 3 {
		t.Fatalf("paged sorted names %v in %d pages, want %v", got, pagesSeen, want)
	}
	// The next link keeps the query and moves the marker.
	_, _, doc, _ := listNames(t, l, "1.89", "limit=2&sort_key=resource_class&owner=proj-a")
	next, _ := doc["next"].(string)
	u, err := url.Parse(next)
	if err != nil || u.Query().Get("sort_key") != "resource_class" || u.Query().Get("owner") != "proj-a" || u.Query().Get("limit") != "2" || u.Query().Get("marker") == "" {
		t.Fatalf("next link %q", next)
	}
	// The limit is capped at 1000 and a short page has no next link.
	_, names, doc, _ := listNames(t, l, "1.89", "limit=5000")
	if len(names) != 9 || doc["next"] != nil {
		t.Fatalf("limit=5000: %d nodes, next %v", len(names), doc["next"])
	}
	// Default listing fields, ?fields and ?detail=True.
	_, _, doc, _ = listNames(t, l, "1.89", "limit=1")
	first := doc["nodes"].([]any)[0].(map[string]any)
	var keys []string
	for k := range first {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"instance_uuid", "links", "maintenance", "name", "power_state", "provision_state", "uuid"}) {
		t.Fatalf("default list fields %v", keys)
	}
	_, _, doc, _ = listNames(t, l, "1.89", "fields=uuid,owner&limit=1")
	first = doc["nodes"].([]any)[0].(map[string]any)
	if _, ok := first["owner"]; !ok || len(first) != 3 {
		t.Fatalf("fields=uuid,owner: %v", first)
	}
	_, _, doc, _ = listNames(t, l, "1.89", "detail=True&limit=1")
	first = doc["nodes"].([]any)[0].(map[string]any)
	if first["driver_info"] == nil || first["shard"] != fx["l0"].Shard {
		t.Fatalf("detail=True: %v", first)
	}
	// /v1/nodes/detail at an old version hides newer fields.
	st, _, body := do(t, "GET", l.srv.URL+"/v1/nodes/detail?limit=1", "1.20", "")
	if st != 200 || strings.Contains(body, "resource_class") || !strings.Contains(body, "driver_internal_info") {
		t.Fatalf("detail at 1.20: %d %s", st, body)
	}
}

func TestNodeListChildrenProjectShardedInstanceName(t *testing.T) {
	l := newLab(t)
	parent := newNode(t, l, "parent", `,"owner":"proj-a","shard":"s1"`)
	newNode(t, l, "child", `,"parent_node":"`+parent+`","lessee":"proj-a"`)
	if st, _, body := do(t, "POST", l.srv.URL+"/v1/nodes", "1.104", `{"name":"plain","driver":"fake-hardware","instance_name":"vm-1"}`); st != 201 {
		t.Fatalf("create plain: %d %s", st, body)
	}
	cases := []struct {
		version, query string
		status         int
		want           []string
		fault          string
	}{
		{"1.89", "", 200, []string{"parent", "plain"}, ""},
		{"1.1", "", 200, nil, ""}, // names are hidden before 1.5, children still are
		{"1.89", "include_children=true", 200, []string{"parent", "child", "plain"}, ""},
		{"1.89", "parent_node=" + parent, 200, []string{"child"}, ""},
		{"1.89", "parent_node=" + strings.ToUpper(parent), 200, []string{"child"}, ""},
		{"1.82", "include_children=true", 406, nil, "should be 1.83"},
		{"1.82", "parent_node=" + parent, 406, nil, "should be 1.83"},
		{"1.89", "project=proj-a&include_children=True", 200, []string{"parent", "child"}, ""},
		{"1.89", "sharded=true", 200, []string{"parent"}, ""},
		{"1.89", "sharded=false", 200, []string{"plain"}, ""},
		{"1.81", "sharded=true", 406, nil, "should be 1.82"},
		{"1.110", "instance_name=vm-1", 200, []string{"plain"}, ""},
		{"1.103", "instance_name=vm-1", 406, nil, "instance_name is not acceptable in this API version"},
	}
	for _, tc := range cases {
		t.Run(tc.version+" "+tc.query, func(t *testing.T) {
			st, names, doc, body := listNames(t, l, tc.version, tc.query)
			if st != tc.status {
				t.Fatalf("status %d, want %d: %s", st, tc.status, body)
			}
			if st != 200 {
				if f := faultString(t, body); !strings.Contains(f, tc.fault) {
					t.Fatalf("fault %q, want %q", f, tc.fault)
				}
				return
			}
			if tc.version == "1.1" {
				if n := len(doc["nodes"].([]any)); n != 2 {
					t.Fatalf("%d nodes at 1.1, want 2", n)
				}
				return
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("got %v, want %v", names, tc.want)
			}
		})
	}
}
