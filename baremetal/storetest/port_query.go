package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
)

// testQueryPorts checks QueryPorts' filters, orders and keyset paging.
func testQueryPorts(t *testing.T, s baremetal.Store, clock *ManualClock) {
	a := mustNode(t, s, func(n *baremetal.Node) { n.ConductorGroup = "rack-1"; n.Shard = "s1" })
	b := mustNode(t, s, func(n *baremetal.Node) { n.Shard = "s2" })
	mk := func(node *baremetal.Node, mac, name, vendor string) *baremetal.Port {
		t.Helper()
		clock.Advance(time.Second)
		p := &baremetal.Port{NodeUUID: node.UUID, Address: mac, Name: name, Vendor: vendor, Description: "NIC " + name + " 100%_ok"}
		if err := s.CreatePort(ctx(t), p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	g := &baremetal.Portgroup{NodeUUID: a.UUID, Name: "bond0"}
	if err := s.Portgroups().Create(ctx(t), g); err != nil {
		t.Fatal(err)
	}
	p1 := mk(a, "52:54:00:00:00:03", "eth0", "intel")
	p2 := mk(a, "52:54:00:00:00:01", "", "")
	p2.PortgroupUUID = g.UUID
	if err := s.UpdatePort(ctx(t), p2); err != nil {
		t.Fatal(err)
	}
	p3 := mk(b, "52:54:00:00:00:02", "b-eth0", "intel")
	p4 := mk(b, "52:54:00:00:00:04", "b-eth1", "broadcom")
	uuids := func(ps []*baremetal.Port) string {
		var out []string
		for _, p := range ps {
			out = append(out, p.UUID)
		}
		return strings.Join(out, ",")
	}
	join := func(ps ...*baremetal.Port) string { return uuids(ps) }
	cases := []struct {
		name string
		q    baremetal.PortQuery
		want string
	}{
		{"all in id order", baremetal.PortQuery{}, join(p1, p2, p3, p4)},
		{"node", baremetal.PortQuery{NodeUUID: strings.ToUpper(b.UUID)}, join(p3, p4)},
		{"address in any form", baremetal.PortQuery{Address: "52-54-00-00-00-02"}, join(p3)},
		{"address of nobody", baremetal.PortQuery{Address: "52:54:00:00:00:09"}, ""},
		{"name", baremetal.PortQuery{Name: "b-eth1"}, join(p4)},
		{"portgroup, any case", baremetal.PortQuery{PortgroupUUID: strings.ToUpper(g.UUID)}, join(p2)},
		{"conductor group, any case", baremetal.PortQuery{ConductorGroups: []string{"RACK-1"}}, join(p1, p2)},
		{"default conductor group", baremetal.PortQuery{ConductorGroups: []string{""}}, join(p3, p4)},
		{"shards", baremetal.PortQuery{Shards: []string{"s2", "s9"}}, join(p3, p4)},
		{"description, any case", baremetal.PortQuery{DescriptionContains: "b-ETH"}, join(p3, p4)},
		{"description with LIKE's wildcards taken literally", baremetal.PortQuery{DescriptionContains: "0%_o"}, join(p1, p2, p3, p4)},
		{"description wildcards do not match other text", baremetal.PortQuery{DescriptionContains: "1_0"}, ""},
		{"node and address", baremetal.PortQuery{NodeUUID: a.UUID, Address: p3.Address}, ""},
		{"by address", baremetal.PortQuery{SortKey: "address"}, join(p2, p3, p1, p4)},
		{"by address descending", baremetal.PortQuery{SortKey: "address", Descending: true}, join(p4, p1, p3, p2)},
		{"by vendor, ties by id, null first", baremetal.PortQuery{SortKey: "vendor"}, join(p2, p4, p1, p3)},
		{"by id descending", baremetal.PortQuery{Descending: true}, join(p4, p3, p2, p1)},
	}
	for _, tc := range cases {
		got, err := s.QueryPorts(ctx(t), tc.q, baremetal.Page{})
		if err != nil || uuids(got) != tc.want {
			t.Errorf("%s: got %s, %v; want %s", tc.name, uuids(got), err, tc.want)
		}
		// Walking the same query two at a time gives the same sequence.
		var walked []*baremetal.Port
		page := baremetal.Page{Limit: 2}
		for i := 0; i < 5; i++ {
			part, err := s.QueryPorts(ctx(t), tc.q, page)
			if err != nil {
				t.Fatalf("%s: page %d: %v", tc.name, i, err)
			}
			walked = append(walked, part...)
			if len(part) < 2 {
				break
			}
			page.Marker = part[len(part)-1].UUID
		}
		if uuids(walked) != tc.want {
			t.Errorf("%s: paged walk %s, want %s", tc.name, uuids(walked), tc.want)
		}
	}
	got, err := s.QueryPorts(ctx(t), baremetal.PortQuery{Address: "52:54:00:00:00:02"}, baremetal.Page{})
	if err != nil || len(got) != 1 || got[0].NodeUUID != b.UUID || got[0].Name != "b-eth0" || got[0].Vendor != "intel" {
		t.Fatalf("port read back %+v, %v", got, err)
	}
	for _, tc := range []struct {
		name  string
		q     baremetal.PortQuery
		page  baremetal.Page
		field string
	}{
		{"malformed address", baremetal.PortQuery{Address: "not-a-mac"}, baremetal.Page{}, "address"},
		{"unknown sort key", baremetal.PortQuery{SortKey: "extra"}, baremetal.Page{}, "sort_key"},
		{"unknown marker", baremetal.PortQuery{}, baremetal.Page{Marker: "aaaaaaaa-0000-4000-8000-000000000000"}, "marker"},
		{"negative limit", baremetal.PortQuery{}, baremetal.Page{Limit: -1}, "limit"},
	} {
		_, err := s.QueryPorts(ctx(t), tc.q, tc.page)
		var ife *baremetal.InvalidFieldError
		if !errors.As(err, &ife) || ife.Field != tc.field {
			t.Errorf("%s: error %v, want an InvalidFieldError on %s", tc.name, err, tc.field)
		}
	}
	for _, k := range baremetal.PortSortKeys() {
		if _, err := s.QueryPorts(ctx(t), baremetal.PortQuery{SortKey: k}, baremetal.Page{Limit: 1, Marker: p1.UUID}); err != nil {
			t.Errorf("sort key %s with a marker: %v", k, err)
		}
	}
}

// testListConductors checks that ListConductors lists every row, alive
// or not, in registration order.
func testListConductors(t *testing.T, s baremetal.Store, clock *ManualClock) {
	for _, h := range []string{"c-z", "c-a", "c-m"} {
		if _, err := s.RegisterConductor(ctx(t), baremetal.ConductorRegistration{Hostname: h, ConductorGroup: "g-" + h, Drivers: []string{"fake-hardware"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.UnregisterConductor(ctx(t), "c-a"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	got, err := s.ListConductors(ctx(t))
	if err != nil || len(got) != 3 {
		t.Fatalf("ListConductors = %v, %v", got, err)
	}
	for i, want := range []string{"c-z", "c-a", "c-m"} {
		c := got[i]
		if c.Hostname != want || c.ConductorGroup != "g-"+want || len(c.Drivers) != 1 || c.CreatedAt.IsZero() || c.Online != (want != "c-a") {
			t.Errorf("conductor %d = %+v, want %s", i, c, want)
		}
	}
}
