package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
)

// This file holds the conformance tests of the portgroup, allocation,
// deploy template and runbook stores.

// wantKind checks err is a typed error of the given sentinel.
func wantIs(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s = %v, want an error matching %v", what, err, target)
	}
}

func wantNotFound(t *testing.T, err error, kind, what string) {
	t.Helper()
	var nf *baremetal.NotFoundError
	if !errors.As(err, &nf) || nf.Kind != kind {
		t.Fatalf("%s = %v, want a NotFoundError of kind %s", what, err, kind)
	}
}

func testPortgroups(t *testing.T, s baremetal.Store, clock *ManualClock) {
	c := ctx(t)
	n1, n2 := mustNode(t, s, nil), mustNode(t, s, nil)
	g := &baremetal.Portgroup{
		NodeUUID: strings.ToUpper(n1.UUID), Name: "bond0", Address: "52:54:00:AA:BB:01", Mode: "802.3ad",
		Properties: map[string]any{"miimon": float64(100), "xmit_hash_policy": "layer3+4"}, StandalonePortsSupported: true,
		PhysicalNetwork: "physnet1", InternalInfo: map[string]any{"tenant_vif_port_id": "vif-1"}, Extra: map[string]any{"rack": "r1"},
	}
	if err := s.Portgroups().Create(c, g); err != nil {
		t.Fatalf("Portgroups().Create: %v", err)
	}
	if g.ID == 0 || g.UUID == "" || g.Version != 1 || !g.CreatedAt.Equal(clock.Now()) || g.Address != "52:54:00:aa:bb:01" || g.NodeUUID != n1.UUID {
		t.Fatalf("created portgroup = %+v: want ID, UUID, version 1, stamps, lower-case MAC and node UUID filled", g)
	}
	for _, ident := range []string{g.UUID, strings.ToUpper(g.UUID), "bond0"} {
		got, err := s.Portgroups().Get(c, ident)
		if err != nil {
			t.Fatalf("Portgroups().Get(%s): %v", ident, err)
		}
		if !reflect.DeepEqual(got, g) {
			t.Fatalf("Portgroups().Get(%s) = %+v, want %+v", ident, got, g)
		}
	}
	wantNotFound(t, func() error { _, err := s.Portgroups().Get(c, "bond9"); return err }(), "portgroup", "Portgroups().Get(unknown)")

	// Duplicates and bad input leave the store unchanged.
	for _, tc := range []struct {
		field string
		g     *baremetal.Portgroup
	}{
		{"uuid", &baremetal.Portgroup{UUID: g.UUID, NodeUUID: n1.UUID}},
		{"name", &baremetal.Portgroup{NodeUUID: n2.UUID, Name: "bond0"}},
		{"address", &baremetal.Portgroup{NodeUUID: n2.UUID, Address: "52-54-00-aa-bb-01"}},
		{"address", &baremetal.Portgroup{NodeUUID: n1.UUID, Address: "not-a-mac"}},
		{"name", &baremetal.Portgroup{NodeUUID: n1.UUID, Name: "bad name"}},
		{"uuid", &baremetal.Portgroup{NodeUUID: n1.UUID, UUID: "nope"}},
		{"node_uuid", &baremetal.Portgroup{NodeUUID: "nope"}},
		{"mode", &baremetal.Portgroup{NodeUUID: n1.UUID, Mode: strings.Repeat("m", 256)}},
	} {
		wantField(t, s.Portgroups().Create(c, tc.g), tc.field)
	}
	wantNotFound(t, s.Portgroups().Create(c, &baremetal.Portgroup{NodeUUID: "aaaaaaaa-0000-4000-8000-00000000dead"}), "node", "Portgroups().Create(unknown node)")

	// A second portgroup without a name or address: both are optional.
	g2 := &baremetal.Portgroup{NodeUUID: n2.UUID}
	if err := s.Portgroups().Create(c, g2); err != nil {
		t.Fatalf("Portgroups().Create(no name, no address): %v", err)
	}
	all, err := s.Portgroups().List(c, baremetal.PortgroupFilter{}, baremetal.Page{})
	if err != nil || len(all) != 2 || all[0].UUID != g.UUID || all[1].UUID != g2.UUID {
		t.Fatalf("Portgroups().List = %d, %v; want the two in creation order", len(all), err)
	}
	for _, tc := range []struct {
		f    baremetal.PortgroupFilter
		page baremetal.Page
		want []string
	}{
		{baremetal.PortgroupFilter{NodeUUID: n2.UUID}, baremetal.Page{}, []string{g2.UUID}},
		{baremetal.PortgroupFilter{Address: "52:54:00:AA:BB:01"}, baremetal.Page{}, []string{g.UUID}},
		{baremetal.PortgroupFilter{}, baremetal.Page{Limit: 1}, []string{g.UUID}},
		{baremetal.PortgroupFilter{}, baremetal.Page{Marker: g.UUID}, []string{g2.UUID}},
		{baremetal.PortgroupFilter{NodeUUID: n1.UUID}, baremetal.Page{Marker: g.UUID}, nil},
	} {
		got, err := s.Portgroups().List(c, tc.f, tc.page)
		if err != nil {
			t.Fatalf("Portgroups().List(%+v, %+v): %v", tc.f, tc.page, err)
		}
		var ids []string
		for _, x := range got {
			ids = append(ids, x.UUID)
		}
		if !reflect.DeepEqual(ids, tc.want) {
			t.Fatalf("Portgroups().List(%+v, %+v) = %v, want %v", tc.f, tc.page, ids, tc.want)
		}
	}
	wantField(t, func() error {
		_, err := s.Portgroups().List(c, baremetal.PortgroupFilter{}, baremetal.Page{Marker: "aaaaaaaa-0000-4000-8000-00000000dead"})
		return err
	}(), "marker")

	// Update is a compare-and-swap.
	stale := g.Clone()
	g.Mode, g.Extra = "active-backup", nil
	clock.Advance(1e9)
	if err := s.Portgroups().Update(c, g); err != nil || g.Version != 2 || !g.UpdatedAt.Equal(clock.Now()) {
		t.Fatalf("Portgroups().Update = %v (version %d); want version 2 and a new stamp", err, g.Version)
	}
	stale.Mode = "balance-rr"
	wantIs(t, s.Portgroups().Update(c, stale), baremetal.ErrConflict, "Portgroups().Update(stale)")
	if got, _ := s.Portgroups().Get(c, g.UUID); got.Mode != "active-backup" || got.Extra != nil {
		t.Fatalf("portgroup after a lost update = %+v", got)
	}
	wantField(t, s.Portgroups().Update(c, &baremetal.Portgroup{UUID: g2.UUID, NodeUUID: n2.UUID, Name: "bond0", Version: g2.Version}), "name")

	// Ports join portgroups of their own node only.
	p := &baremetal.Port{NodeUUID: n1.UUID, Address: "52:54:00:00:01:01", PortgroupUUID: strings.ToUpper(g.UUID)}
	if err := s.CreatePort(c, p); err != nil {
		t.Fatalf("CreatePort in a portgroup: %v", err)
	}
	if got, err := s.GetPort(c, p.UUID); err != nil || got.PortgroupUUID != g.UUID {
		t.Fatalf("port's portgroup = %+v, %v; want %s", got, err, g.UUID)
	}
	wantField(t, s.CreatePort(c, &baremetal.Port{NodeUUID: n1.UUID, Address: "52:54:00:00:01:02", PortgroupUUID: g2.UUID}), "portgroup_uuid")
	wantField(t, s.CreatePort(c, &baremetal.Port{NodeUUID: n1.UUID, Address: "52:54:00:00:01:02", PortgroupUUID: "x"}), "portgroup_uuid")
	other := &baremetal.Port{NodeUUID: n2.UUID, Address: "52:54:00:00:02:01"}
	if err := s.CreatePort(c, other); err != nil {
		t.Fatal(err)
	}
	other.PortgroupUUID = g.UUID
	wantField(t, s.UpdatePort(c, other), "portgroup_uuid")
	other.PortgroupUUID = g2.UUID
	if err := s.UpdatePort(c, other); err != nil {
		t.Fatalf("UpdatePort into its node's portgroup: %v", err)
	}
	ports, err := s.ListPorts(c, n2.UUID)
	if err != nil || len(ports) != 1 || ports[0].PortgroupUUID != g2.UUID {
		t.Fatalf("ListPorts(n2) = %v, %v; want the port in %s", ports, err, g2.UUID)
	}
	for _, tc := range []struct {
		pg   string
		want []string
	}{{strings.ToUpper(g2.UUID), []string{other.UUID}}, {g.UUID, []string{p.UUID}}, {"aaaaaaaa-0000-4000-8000-00000000dead", nil}} {
		got, err := s.QueryPorts(c, baremetal.PortQuery{PortgroupUUID: tc.pg}, baremetal.Page{})
		if err != nil {
			t.Fatalf("QueryPorts(portgroup %s): %v", tc.pg, err)
		}
		var ids []string
		for _, x := range got {
			ids = append(ids, x.UUID)
		}
		if !reflect.DeepEqual(ids, tc.want) {
			t.Fatalf("QueryPorts(portgroup %s) = %v, want %v", tc.pg, ids, tc.want)
		}
	}

	// A portgroup with ports can be neither deleted nor moved.
	err = s.Portgroups().Delete(c, g.UUID)
	var ne *baremetal.PortgroupNotEmptyError
	if !errors.As(err, &ne) || ne.Portgroup != g.UUID || !errors.Is(err, baremetal.ErrPortgroupNotEmpty) {
		t.Fatalf("Portgroups().Delete(with ports) = %v, want PortgroupNotEmptyError naming it", err)
	}
	moved := g.Clone()
	moved.NodeUUID = n2.UUID
	wantIs(t, s.Portgroups().Update(c, moved), baremetal.ErrPortgroupNotEmpty, "Portgroups().Update(move with ports)")
	p.PortgroupUUID = ""
	if err := s.UpdatePort(c, p); err != nil {
		t.Fatal(err)
	}
	if err := s.Portgroups().Delete(c, g.UUID); err != nil {
		t.Fatalf("Portgroups().Delete(empty): %v", err)
	}
	wantNotFound(t, s.Portgroups().Delete(c, g.UUID), "portgroup", "Portgroups().Delete(again)")

	// Deleting a node deletes its ports and portgroups.
	if err := s.DeleteNode(c, n2.UUID); err != nil {
		t.Fatalf("DeleteNode with a portgroup and a member port: %v", err)
	}
	wantNotFound(t, func() error { _, err := s.Portgroups().Get(c, g2.UUID); return err }(), "portgroup", "portgroup of a deleted node")
	wantNotFound(t, func() error { _, err := s.GetPort(c, other.UUID); return err }(), "port", "port of a deleted node")
}

func testAllocations(t *testing.T, s baremetal.Store, clock *ManualClock) {
	c := ctx(t)
	n1, n2 := mustNode(t, s, nil), mustNode(t, s, nil)
	a := &baremetal.Allocation{
		Name: "alloc-1", ResourceClass: "baremetal", Traits: []string{"CUSTOM_GPU"},
		CandidateNodes: []string{strings.ToUpper(n1.UUID), n2.UUID}, Extra: map[string]any{"k": "v"}, Owner: "project-a",
	}
	if err := s.Allocations().Create(c, a); err != nil {
		t.Fatalf("Allocations().Create: %v", err)
	}
	if a.ID == 0 || a.UUID == "" || a.State != baremetal.AllocationAllocating || a.Version != 1 || a.CandidateNodes[0] != n1.UUID || !a.CreatedAt.Equal(clock.Now()) {
		t.Fatalf("created allocation = %+v: want ID, UUID, state allocating, version 1, candidates lower case", a)
	}
	for _, ident := range []string{a.UUID, "alloc-1"} {
		got, err := s.Allocations().Get(c, ident)
		if err != nil || !reflect.DeepEqual(got, a) {
			t.Fatalf("Allocations().Get(%s) = %+v, %v; want %+v", ident, got, err, a)
		}
	}
	wantNotFound(t, func() error { _, err := s.Allocations().Get(c, "nope"); return err }(), "allocation", "Allocations().Get(unknown)")

	for _, tc := range []struct {
		field string
		a     *baremetal.Allocation
	}{
		{"uuid", &baremetal.Allocation{UUID: a.UUID, ResourceClass: "x"}},
		{"name", &baremetal.Allocation{Name: "alloc-1", ResourceClass: "x"}},
		{"resource_class", &baremetal.Allocation{}},
		{"resource_class", &baremetal.Allocation{ResourceClass: strings.Repeat("r", 81)}},
		{"traits", &baremetal.Allocation{ResourceClass: "x", Traits: []string{"lower"}}},
		{"traits", &baremetal.Allocation{ResourceClass: "x", Traits: []string{"CUSTOM_A", "CUSTOM_A"}}},
		{"candidate_nodes", &baremetal.Allocation{ResourceClass: "x", CandidateNodes: []string{"node-name"}}},
		{"state", &baremetal.Allocation{ResourceClass: "x", State: "deploying"}},
		{"name", &baremetal.Allocation{ResourceClass: "x", Name: "a b"}},
		{"node_uuid", &baremetal.Allocation{NodeUUID: "nope"}},
	} {
		wantField(t, s.Allocations().Create(c, tc.a), tc.field)
	}
	wantNotFound(t, s.Allocations().Create(c, &baremetal.Allocation{NodeUUID: "aaaaaaaa-0000-4000-8000-00000000dead"}), "node", "Allocations().Create(unknown node)")

	// A backfill names its node; a node has one allocation at most.
	b := &baremetal.Allocation{NodeUUID: n2.UUID, State: baremetal.AllocationActive}
	if err := s.Allocations().Create(c, b); err != nil {
		t.Fatalf("Allocations().Create(backfill without resource class): %v", err)
	}
	wantField(t, s.Allocations().Create(c, &baremetal.Allocation{NodeUUID: n2.UUID}), "node_uuid")

	// Update: the conductor binds the node; compare-and-swap.
	stale := a.Clone()
	a.State, a.NodeUUID = baremetal.AllocationActive, n1.UUID
	clock.Advance(1e9)
	if err := s.Allocations().Update(c, a); err != nil || a.Version != 2 || !a.UpdatedAt.Equal(clock.Now()) {
		t.Fatalf("Allocations().Update = %v, version %d", err, a.Version)
	}
	stale.State, stale.LastError = baremetal.AllocationError, "late"
	wantIs(t, s.Allocations().Update(c, stale), baremetal.ErrConflict, "Allocations().Update(stale)")
	taken := b.Clone()
	taken.NodeUUID = n1.UUID
	wantField(t, s.Allocations().Update(c, taken), "node_uuid")
	if got, _ := s.Allocations().Get(c, a.UUID); got.State != baremetal.AllocationActive || got.NodeUUID != n1.UUID || got.LastError != "" {
		t.Fatalf("allocation after a lost update = %+v", got)
	}

	e := &baremetal.Allocation{ResourceClass: "other", State: baremetal.AllocationError, LastError: "no node", Owner: "project-b"}
	if err := s.Allocations().Create(c, e); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f    baremetal.AllocationFilter
		page baremetal.Page
		want []string
	}{
		{baremetal.AllocationFilter{}, baremetal.Page{}, []string{a.UUID, b.UUID, e.UUID}},
		{baremetal.AllocationFilter{NodeUUID: n1.UUID}, baremetal.Page{}, []string{a.UUID}},
		{baremetal.AllocationFilter{ResourceClass: "other"}, baremetal.Page{}, []string{e.UUID}},
		{baremetal.AllocationFilter{State: baremetal.AllocationActive}, baremetal.Page{}, []string{a.UUID, b.UUID}},
		{baremetal.AllocationFilter{Owner: "project-a"}, baremetal.Page{}, []string{a.UUID}},
		{baremetal.AllocationFilter{}, baremetal.Page{Limit: 2, Marker: a.UUID}, []string{b.UUID, e.UUID}},
	} {
		got, err := s.Allocations().List(c, tc.f, tc.page)
		if err != nil {
			t.Fatalf("Allocations().List(%+v): %v", tc.f, err)
		}
		var ids []string
		for _, x := range got {
			ids = append(ids, x.UUID)
		}
		if !reflect.DeepEqual(ids, tc.want) {
			t.Fatalf("Allocations().List(%+v, %+v) = %v, want %v", tc.f, tc.page, ids, tc.want)
		}
	}

	if err := s.Allocations().Delete(c, e.UUID); err != nil {
		t.Fatalf("Allocations().Delete: %v", err)
	}
	wantNotFound(t, s.Allocations().Delete(c, e.UUID), "allocation", "Allocations().Delete(again)")
	// Deleting a node deletes its allocation.
	if err := s.DeleteNode(c, n2.UUID); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, func() error { _, err := s.Allocations().Get(c, b.UUID); return err }(), "allocation", "allocation of a deleted node")
}

func testDeployTemplates(t *testing.T, s baremetal.Store, clock *ManualClock) {
	c := ctx(t)
	dt := &baremetal.DeployTemplate{Name: "CUSTOM_RAID1", Extra: map[string]any{"a": "b"}, Steps: []baremetal.DeployTemplateStep{
		{Interface: "raid", Step: "create_configuration", Args: map[string]any{"logical_disks": []any{map[string]any{"size_gb": "MAX", "raid_level": "1"}}}, Priority: 90},
		{Interface: "bios", Step: "apply_configuration", Args: map[string]any{"big": int64(9007199254740993)}, Priority: 0},
	}}
	if err := s.DeployTemplates().Create(c, dt); err != nil {
		t.Fatalf("DeployTemplates().Create: %v", err)
	}
	if dt.ID == 0 || dt.UUID == "" || dt.Version != 1 || !dt.CreatedAt.Equal(clock.Now()) {
		t.Fatalf("created template = %+v", dt)
	}
	for _, ident := range []string{dt.UUID, "CUSTOM_RAID1"} {
		got, err := s.DeployTemplates().Get(c, ident)
		if err != nil {
			t.Fatalf("DeployTemplates().Get(%s): %v", ident, err)
		}
		if fmt.Sprint(got.Steps[1].Args["big"]) != "9007199254740993" {
			t.Fatalf("step argument 9007199254740993 read back as %v", got.Steps[1].Args["big"])
		}
		got.Steps[1].Args, dt.Steps[1].Args = nil, nil
		if !reflect.DeepEqual(got, dt) {
			t.Fatalf("DeployTemplates().Get(%s) = %+v, want %+v", ident, got, dt)
		}
		dt.Steps[1].Args = map[string]any{"big": int64(9007199254740993)}
	}
	step := func(iface, name string, prio int) baremetal.DeployTemplateStep {
		return baremetal.DeployTemplateStep{Interface: iface, Step: name, Args: map[string]any{}, Priority: prio}
	}
	for _, tc := range []struct {
		field string
		dt    *baremetal.DeployTemplate
	}{
		{"name", &baremetal.DeployTemplate{Name: "CUSTOM_RAID1", Steps: []baremetal.DeployTemplateStep{step("raid", "x", 1)}}},
		{"uuid", &baremetal.DeployTemplate{UUID: dt.UUID, Name: "CUSTOM_B", Steps: []baremetal.DeployTemplateStep{step("raid", "x", 1)}}},
		{"name", &baremetal.DeployTemplate{Name: "custom_lower", Steps: []baremetal.DeployTemplateStep{step("raid", "x", 1)}}},
		{"name", &baremetal.DeployTemplate{Name: "CUSTOM_", Steps: []baremetal.DeployTemplateStep{step("raid", "x", 1)}}},
		{"steps", &baremetal.DeployTemplate{Name: "CUSTOM_B"}},
		{"steps", &baremetal.DeployTemplate{Name: "CUSTOM_B", Steps: []baremetal.DeployTemplateStep{step("nope", "x", 1)}}},
		{"steps", &baremetal.DeployTemplate{Name: "CUSTOM_B", Steps: []baremetal.DeployTemplateStep{step("raid", "", 1)}}},
		{"steps", &baremetal.DeployTemplate{Name: "CUSTOM_B", Steps: []baremetal.DeployTemplateStep{step("raid", "x", -1)}}},
		{"steps", &baremetal.DeployTemplate{Name: "CUSTOM_B", Steps: []baremetal.DeployTemplateStep{step("raid", "x", 1), step("raid", "x", 2)}}},
		{"steps", &baremetal.DeployTemplate{Name: "CUSTOM_B", Steps: []baremetal.DeployTemplateStep{{Interface: "raid", Step: "x"}}}},
	} {
		wantField(t, s.DeployTemplates().Create(c, tc.dt), tc.field)
	}
	second := &baremetal.DeployTemplate{Name: "CUSTOM_B", Steps: []baremetal.DeployTemplateStep{step("deploy", "write_image", 80)}}
	if err := s.DeployTemplates().Create(c, second); err != nil {
		t.Fatal(err)
	}
	list, err := s.DeployTemplates().List(c, baremetal.DeployTemplateFilter{}, baremetal.Page{})
	if err != nil || len(list) != 2 || list[0].Name != "CUSTOM_RAID1" || list[1].Name != "CUSTOM_B" {
		t.Fatalf("DeployTemplates().List = %v, %v", list, err)
	}
	if list, err := s.DeployTemplates().List(c, baremetal.DeployTemplateFilter{}, baremetal.Page{Marker: dt.UUID, Limit: 5}); err != nil || len(list) != 1 || list[0].UUID != second.UUID {
		t.Fatalf("DeployTemplates().List(after the first) = %v, %v", list, err)
	}
	stale := second.Clone()
	second.Name = "CUSTOM_C"
	if err := s.DeployTemplates().Update(c, second); err != nil || second.Version != 2 {
		t.Fatalf("DeployTemplates().Update = %v", err)
	}
	wantIs(t, s.DeployTemplates().Update(c, stale), baremetal.ErrConflict, "DeployTemplates().Update(stale)")
	second.Name = "CUSTOM_RAID1"
	wantField(t, s.DeployTemplates().Update(c, second), "name")
	if err := s.DeployTemplates().Delete(c, second.UUID); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, s.DeployTemplates().Delete(c, second.UUID), "deploy_template", "DeployTemplates().Delete(again)")
	wantNotFound(t, func() error { _, err := s.DeployTemplates().Get(c, "CUSTOM_C"); return err }(), "deploy_template", "DeployTemplates().Get(deleted)")
}

func testRunbooks(t *testing.T, s baremetal.Store, clock *ManualClock) {
	c := ctx(t)
	rb := &baremetal.Runbook{Name: "CUSTOM_FIRMWARE", DisableRamdisk: true, Public: true, Owner: "project-a",
		Description: "firmware of the rack", Traits: []string{"CUSTOM_RACK2", "CUSTOM_FW"},
		Extra: map[string]any{"x": "y"}, Steps: []baremetal.RunbookStep{
			{Interface: "management", Step: "update_firmware", Args: map[string]any{"url": "http://fw"}, Order: 2},
			{Interface: "bios", Step: "factory_reset", Args: map[string]any{}, Order: 1},
		}}
	if err := s.Runbooks().Create(c, rb); err != nil {
		t.Fatalf("Runbooks().Create: %v", err)
	}
	if rb.Steps[0].Order != 1 || rb.Version != 1 || rb.UUID == "" || !rb.UpdatedAt.Equal(clock.Now()) ||
		!reflect.DeepEqual(rb.Traits, []string{"CUSTOM_FW", "CUSTOM_RACK2"}) {
		t.Fatalf("created runbook = %+v: want its steps in run order, traits sorted, version 1", rb)
	}
	for _, ident := range []string{rb.UUID, "CUSTOM_FIRMWARE"} {
		got, err := s.Runbooks().Get(c, ident)
		if err != nil || !reflect.DeepEqual(got, rb) {
			t.Fatalf("Runbooks().Get(%s) = %+v, %v; want %+v", ident, got, err, rb)
		}
	}
	step := func(order int) baremetal.RunbookStep {
		return baremetal.RunbookStep{Interface: "deploy", Step: "erase_devices", Args: map[string]any{}, Order: order}
	}
	for _, tc := range []struct {
		field string
		rb    *baremetal.Runbook
	}{
		{"name", &baremetal.Runbook{Name: "CUSTOM_FIRMWARE", Steps: []baremetal.RunbookStep{step(0)}}},
		{"name", &baremetal.Runbook{Name: "firm ware", Steps: []baremetal.RunbookStep{step(0)}}},
		{"name", &baremetal.Runbook{Name: strings.Repeat("n", 256), Steps: []baremetal.RunbookStep{step(0)}}},
		{"description", &baremetal.Runbook{Name: "CUSTOM_B", Description: strings.Repeat("d", 256), Steps: []baremetal.RunbookStep{step(0)}}},
		{"traits", &baremetal.Runbook{Name: "CUSTOM_B", Traits: []string{"custom_lower"}, Steps: []baremetal.RunbookStep{step(0)}}},
		{"traits", &baremetal.Runbook{Name: "CUSTOM_B", Traits: []string{"CUSTOM_X", "CUSTOM_X"}, Steps: []baremetal.RunbookStep{step(0)}}},
		{"steps", &baremetal.Runbook{Name: "CUSTOM_B"}},
		{"steps", &baremetal.Runbook{Name: "CUSTOM_B", Steps: []baremetal.RunbookStep{step(1), step(1)}}},
		{"steps", &baremetal.Runbook{Name: "CUSTOM_B", Steps: []baremetal.RunbookStep{step(-1)}}},
		{"owner", &baremetal.Runbook{Name: "CUSTOM_B", Steps: []baremetal.RunbookStep{step(0)}, Owner: strings.Repeat("o", 256)}},
	} {
		wantField(t, s.Runbooks().Create(c, tc.rb), tc.field)
	}
	// Since 1.112 a name is any logical name; no traits are an empty list.
	private := &baremetal.Runbook{Name: "erase-disks.v2", Owner: "project-b", Steps: []baremetal.RunbookStep{step(0)}}
	if err := s.Runbooks().Create(c, private); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Runbooks().Get(c, "erase-disks.v2"); err != nil || got.Traits == nil || len(got.Traits) != 0 || got.Description != "" {
		t.Fatalf("Runbooks().Get(no traits) = %+v, %v; want an empty trait list", got, err)
	}
	yes, no := true, false
	for _, tc := range []struct {
		f    baremetal.RunbookFilter
		want []string
	}{
		{baremetal.RunbookFilter{}, []string{rb.UUID, private.UUID}},
		{baremetal.RunbookFilter{Owner: "project-b"}, []string{private.UUID}},
		{baremetal.RunbookFilter{Public: &yes}, []string{rb.UUID}},
		{baremetal.RunbookFilter{Public: &no, Owner: "project-a"}, nil},
	} {
		got, err := s.Runbooks().List(c, tc.f, baremetal.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range got {
			ids = append(ids, x.UUID)
		}
		if !reflect.DeepEqual(ids, tc.want) {
			t.Fatalf("Runbooks().List(%+v) = %v, want %v", tc.f, ids, tc.want)
		}
	}
	stale := private.Clone()
	private.Public = true
	private.Traits = []string{"CUSTOM_ERASE"}
	private.Description = "wipes"
	if err := s.Runbooks().Update(c, private); err != nil || private.Version != 2 {
		t.Fatalf("Runbooks().Update = %v", err)
	}
	if got, err := s.Runbooks().Get(c, private.UUID); err != nil || !reflect.DeepEqual(got.Traits, []string{"CUSTOM_ERASE"}) || got.Description != "wipes" {
		t.Fatalf("Runbooks().Get(updated) = %+v, %v; want its traits and description", got, err)
	}
	wantIs(t, s.Runbooks().Update(c, stale), baremetal.ErrConflict, "Runbooks().Update(stale)")
	if err := s.Runbooks().Delete(c, private.UUID); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, s.Runbooks().Delete(c, private.UUID), "runbook", "Runbooks().Delete(again)")
}

// testConcurrentAllocationOfNode checks the store lets one allocation
// only hold a node, whatever the number of concurrent writers.
func testConcurrentAllocationOfNode(t *testing.T, s baremetal.Store, _ *ManualClock) {
	c := ctx(t)
	n := mustNode(t, s, nil)
	const writers = 8
	allocs := make([]*baremetal.Allocation, writers)
	for i := range allocs {
		allocs[i] = &baremetal.Allocation{ResourceClass: "baremetal"}
		if err := s.Allocations().Create(c, allocs[i]); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i, a := range allocs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.NodeUUID, a.State = n.UUID, baremetal.AllocationActive
			errs[i] = s.Allocations().Update(c, a)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, baremetal.ErrDuplicate):
		default:
			t.Fatalf("concurrent allocation of one node: %v, want success or a DuplicateError", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d allocations took the node, want exactly 1", won)
	}
}
