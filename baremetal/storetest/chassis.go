package storetest

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
)

// This file holds the conformance tests of the chassis and volume
// stores, and of the node's chassis.

// uuids lists the UUIDs of a listing.
func uuids[T any](list []*T, uuid func(*T) string) []string {
	var out []string
	for _, x := range list {
		out = append(out, uuid(x))
	}
	return out
}

func chassisUUID(c *baremetal.Chassis) string { return c.UUID }

func testChassis(t *testing.T, s baremetal.Store, clock *ManualClock) {
	c := ctx(t)
	ch := &baremetal.Chassis{Description: "rack 1 ♡", Extra: map[string]any{"row": "b", "big": int64(9007199254740993)}}
	if err := s.Chassis().Create(c, ch); err != nil {
		t.Fatalf("Chassis().Create: %v", err)
	}
	if ch.ID == 0 || ch.UUID == "" || ch.Version != 1 || !ch.CreatedAt.Equal(clock.Now()) || !ch.UpdatedAt.Equal(clock.Now()) {
		t.Fatalf("created chassis = %+v: want ID, UUID, version 1 and stamps", ch)
	}
	for _, ident := range []string{ch.UUID, strings.ToUpper(ch.UUID)} {
		got, err := s.Chassis().Get(c, ident)
		if err != nil {
			t.Fatalf("Chassis().Get(%s): %v", ident, err)
		}
		if fmt.Sprint(got.Extra["big"]) != "9007199254740993" {
			t.Fatalf("extra 9007199254740993 read back as %v", got.Extra["big"])
		}
		got.Extra["big"] = ch.Extra["big"]
		if !reflect.DeepEqual(got, ch) {
			t.Fatalf("Chassis().Get(%s) = %+v, want %+v", ident, got, ch)
		}
	}
	// Chassis have no name: only a UUID finds one.
	for _, ident := range []string{"rack 1 ♡", "aaaaaaaa-0000-4000-8000-00000000dead"} {
		wantNotFound(t, func() error { _, err := s.Chassis().Get(c, ident); return err }(), "chassis", "Chassis().Get("+ident+")")
	}

	for _, tc := range []struct {
		field string
		ch    *baremetal.Chassis
	}{
		{"uuid", &baremetal.Chassis{UUID: strings.ToUpper(ch.UUID)}},
		{"uuid", &baremetal.Chassis{UUID: "rack-1"}},
		{"description", &baremetal.Chassis{Description: strings.Repeat("d", baremetal.MaxChassisDescription+1)}},
		{"description", &baremetal.Chassis{Description: "nul \x00 byte"}},
		{"description", &baremetal.Chassis{Description: "bad \xff utf-8"}},
		{"extra", &baremetal.Chassis{Extra: map[string]any{"nan": math.NaN()}}},
	} {
		wantField(t, s.Chassis().Create(c, tc.ch), tc.field)
	}
	if err := s.Chassis().Create(c, nil); err == nil {
		t.Fatal("Chassis().Create(nil) succeeded")
	}
	if err := s.Chassis().Create(c, &baremetal.Chassis{Description: strings.Repeat("♡", baremetal.MaxChassisDescription)}); err != nil {
		t.Fatalf("Chassis().Create(255 characters of description): %v", err)
	}

	// Listings: ID order, or sorted by a column with the ID as the tie
	// break, in either direction, paged by marker.
	b := &baremetal.Chassis{Description: "b"}
	a := &baremetal.Chassis{Description: "a"}
	none := &baremetal.Chassis{}
	for _, x := range []*baremetal.Chassis{b, a, none} {
		if err := s.Chassis().Create(c, x); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Chassis().List(c, baremetal.ChassisFilter{}, baremetal.Page{})
	if err != nil || len(all) != 5 || all[0].UUID != ch.UUID || all[4].UUID != none.UUID {
		t.Fatalf("Chassis().List = %v, %v; want the five in creation order", uuids(all, chassisUUID), err)
	}
	long := all[1].UUID
	for _, tc := range []struct {
		page baremetal.Page
		want []string
	}{
		{baremetal.Page{Limit: 2}, []string{ch.UUID, long}},
		{baremetal.Page{Marker: b.UUID}, []string{a.UUID, none.UUID}},
		{baremetal.Page{SortKey: "description"}, []string{none.UUID, a.UUID, b.UUID, ch.UUID, long}},
		{baremetal.Page{SortKey: "description", SortDesc: true, Limit: 2}, []string{long, ch.UUID}},
		{baremetal.Page{SortKey: "description", SortDesc: true, Marker: ch.UUID}, []string{b.UUID, a.UUID, none.UUID}},
		{baremetal.Page{SortKey: "description", Marker: a.UUID, Limit: 1}, []string{b.UUID}},
		{baremetal.Page{SortKey: "id", SortDesc: true, Limit: 1}, []string{none.UUID}},
		{baremetal.Page{SortKey: "created_at", Marker: long}, []string{b.UUID, a.UUID, none.UUID}},
	} {
		got, err := s.Chassis().List(c, baremetal.ChassisFilter{}, tc.page)
		if err != nil {
			t.Fatalf("Chassis().List(%+v): %v", tc.page, err)
		}
		if ids := uuids(got, chassisUUID); !reflect.DeepEqual(ids, tc.want) {
			t.Fatalf("Chassis().List(%+v) = %v, want %v", tc.page, ids, tc.want)
		}
	}
	for _, tc := range []struct {
		field string
		page  baremetal.Page
	}{
		{"sort_key", baremetal.Page{SortKey: "extra"}},
		{"sort_key", baremetal.Page{SortKey: "name"}},
		{"marker", baremetal.Page{Marker: "aaaaaaaa-0000-4000-8000-00000000dead"}},
		{"limit", baremetal.Page{Limit: -1}},
	} {
		_, err := s.Chassis().List(c, baremetal.ChassisFilter{}, tc.page)
		wantField(t, err, tc.field)
	}

	// Update is a compare-and-swap of description and extra.
	stale := ch.Clone()
	ch.Description, ch.Extra = "rack 2", nil
	clock.Advance(1e9)
	if err := s.Chassis().Update(c, ch); err != nil || ch.Version != 2 || !ch.UpdatedAt.Equal(clock.Now()) {
		t.Fatalf("Chassis().Update = %v (version %d); want version 2 and a new stamp", err, ch.Version)
	}
	stale.Description = "lost"
	wantIs(t, s.Chassis().Update(c, stale), baremetal.ErrConflict, "Chassis().Update(stale)")
	if got, _ := s.Chassis().Get(c, ch.UUID); got.Description != "rack 2" || got.Extra != nil || !got.CreatedAt.Equal(Epoch()) {
		t.Fatalf("chassis after a lost update = %+v", got)
	}
	bad := ch.Clone()
	bad.Description = strings.Repeat("d", 256)
	wantField(t, s.Chassis().Update(c, bad), "description")
	wantNotFound(t, s.Chassis().Update(c, &baremetal.Chassis{UUID: "aaaaaaaa-0000-4000-8000-00000000dead", Version: 1}), "chassis", "Chassis().Update(unknown)")

	if err := s.Chassis().Delete(c, strings.ToUpper(none.UUID)); err != nil {
		t.Fatalf("Chassis().Delete: %v", err)
	}
	wantNotFound(t, s.Chassis().Delete(c, none.UUID), "chassis", "Chassis().Delete(again)")
}

// testNodeChassis checks a node's chassis: it must exist, it filters
// listings, and a chassis with nodes cannot be deleted.
func testNodeChassis(t *testing.T, s baremetal.Store, _ *ManualClock) {
	c := ctx(t)
	ch, other := &baremetal.Chassis{}, &baremetal.Chassis{}
	for _, x := range []*baremetal.Chassis{ch, other} {
		if err := s.Chassis().Create(c, x); err != nil {
			t.Fatal(err)
		}
	}
	n := mustNode(t, s, func(n *baremetal.Node) { n.ChassisUUID = strings.ToUpper(ch.UUID) })
	got, err := s.GetNode(c, n.UUID)
	if err != nil || got.ChassisUUID != ch.UUID {
		t.Fatalf("node's chassis = %q, %v; want %s in lower case", got.ChassisUUID, err, ch.UUID)
	}
	plain := mustNode(t, s, nil)

	// An unknown chassis is refused, alone or in a batch, and nothing is
	// written.
	const ghost = "aaaaaaaa-0000-4000-8000-00000000dead"
	before := count(t, s)
	wantNotFound(t, s.CreateNode(c, &baremetal.Node{ChassisUUID: ghost}), "chassis", "CreateNode(unknown chassis)")
	err = s.CreateNodes(c, []*baremetal.Node{{ChassisUUID: ch.UUID}, {ChassisUUID: ghost}})
	var nf *baremetal.NotFoundError
	if !errors.As(err, &nf) || nf.Kind != "chassis" || nf.Ident != ghost {
		t.Fatalf("CreateNodes(one unknown chassis) = %v, want a NotFoundError naming %s", err, ghost)
	}
	wantField(t, s.CreateNode(c, &baremetal.Node{ChassisUUID: "rack-1"}), "chassis_uuid")
	if after := count(t, s); after != before {
		t.Fatalf("refused creates changed the store from %d to %d nodes", before, after)
	}
	moved := plain.Clone()
	moved.ChassisUUID = ghost
	wantNotFound(t, s.UpdateNode(c, moved, ""), "chassis", "UpdateNode(unknown chassis)")
	if got, _ := s.GetNode(c, plain.UUID); got.Version != plain.Version || got.ChassisUUID != "" {
		t.Fatalf("refused update changed the node: %+v", got)
	}
	moved.ChassisUUID = other.UUID
	if err := s.UpdateNode(c, moved, ""); err != nil {
		t.Fatalf("UpdateNode(into a chassis): %v", err)
	}

	for _, tc := range []struct {
		chassis string
		want    []string
	}{{strings.ToUpper(ch.UUID), []string{n.UUID}}, {other.UUID, []string{plain.UUID}}, {ghost, nil}} {
		list, err := s.ListNodes(c, baremetal.NodeFilter{ChassisUUID: tc.chassis}, baremetal.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range list {
			ids = append(ids, x.UUID)
		}
		if !reflect.DeepEqual(ids, tc.want) {
			t.Fatalf("ListNodes(chassis %s) = %v, want %v", tc.chassis, ids, tc.want)
		}
		if k, err := s.CountNodes(c, baremetal.NodeFilter{ChassisUUID: tc.chassis}); err != nil || k != len(tc.want) {
			t.Fatalf("CountNodes(chassis %s) = %d, %v", tc.chassis, k, err)
		}
	}

	// A chassis with nodes stays; without them it goes.
	err = s.Chassis().Delete(c, ch.UUID)
	var ne *baremetal.ChassisNotEmptyError
	if !errors.As(err, &ne) || ne.Chassis != ch.UUID || !errors.Is(err, baremetal.ErrChassisNotEmpty) {
		t.Fatalf("Chassis().Delete(with a node) = %v, want ChassisNotEmptyError naming it", err)
	}
	if _, err := s.Chassis().Get(c, ch.UUID); err != nil {
		t.Fatalf("refused delete removed the chassis: %v", err)
	}
	n, _ = s.GetNode(c, n.UUID)
	n.ChassisUUID = ""
	if err := s.UpdateNode(c, n, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Chassis().Delete(c, ch.UUID); err != nil {
		t.Fatalf("Chassis().Delete(emptied): %v", err)
	}
	if err := s.DeleteNode(c, plain.UUID); err != nil {
		t.Fatal(err)
	}
	if err := s.Chassis().Delete(c, other.UUID); err != nil {
		t.Fatalf("Chassis().Delete(after its node was deleted): %v", err)
	}
}

func connectorUUID(v *baremetal.VolumeConnector) string { return v.UUID }

func testVolumeConnectors(t *testing.T, s baremetal.Store, clock *ManualClock) {
	c := ctx(t)
	n1, n2 := mustNode(t, s, nil), mustNode(t, s, nil)
	vc := &baremetal.VolumeConnector{NodeUUID: strings.ToUpper(n1.UUID), Type: "iqn", ConnectorID: "iqn.2026-01.org.example:n1", Extra: map[string]any{"k": "v"}}
	if err := s.VolumeConnectors().Create(c, vc); err != nil {
		t.Fatalf("VolumeConnectors().Create: %v", err)
	}
	if vc.ID == 0 || vc.UUID == "" || vc.Version != 1 || vc.NodeUUID != n1.UUID || !vc.CreatedAt.Equal(clock.Now()) {
		t.Fatalf("created connector = %+v: want ID, UUID, version 1, stamps and the node UUID in lower case", vc)
	}
	if got, err := s.VolumeConnectors().Get(c, strings.ToUpper(vc.UUID)); err != nil || !reflect.DeepEqual(got, vc) {
		t.Fatalf("VolumeConnectors().Get = %+v, %v; want %+v", got, err, vc)
	}
	wantNotFound(t, func() error { _, err := s.VolumeConnectors().Get(c, "iqn"); return err }(), "volume_connector", "VolumeConnectors().Get(not a UUID)")

	// (type, connector_id) is unique across the store.
	for _, tc := range []struct {
		field string
		vc    *baremetal.VolumeConnector
	}{
		{"uuid", &baremetal.VolumeConnector{UUID: vc.UUID, NodeUUID: n2.UUID, Type: "ip", ConnectorID: "192.0.2.1"}},
		{"connector_id", &baremetal.VolumeConnector{NodeUUID: n2.UUID, Type: "iqn", ConnectorID: vc.ConnectorID}},
		{"type", &baremetal.VolumeConnector{NodeUUID: n1.UUID, Type: strings.Repeat("t", 33), ConnectorID: "x"}},
		{"connector_id", &baremetal.VolumeConnector{NodeUUID: n1.UUID, Type: "ip", ConnectorID: strings.Repeat("c", 256)}},
		{"node_uuid", &baremetal.VolumeConnector{NodeUUID: "node-1", Type: "ip", ConnectorID: "x"}},
		{"extra", &baremetal.VolumeConnector{NodeUUID: n1.UUID, Type: "ip", ConnectorID: "x", Extra: map[string]any{"f": math.Inf(1)}}},
	} {
		wantField(t, s.VolumeConnectors().Create(c, tc.vc), tc.field)
	}
	wantNotFound(t, s.VolumeConnectors().Create(c, &baremetal.VolumeConnector{NodeUUID: "aaaaaaaa-0000-4000-8000-00000000dead", Type: "ip", ConnectorID: "x"}),
		"node", "VolumeConnectors().Create(unknown node)")

	sameID := &baremetal.VolumeConnector{NodeUUID: n2.UUID, Type: "wwpn", ConnectorID: vc.ConnectorID}
	mac := &baremetal.VolumeConnector{NodeUUID: n1.UUID, Type: "mac", ConnectorID: "52:54:00:00:00:01"}
	for _, x := range []*baremetal.VolumeConnector{sameID, mac} {
		if err := s.VolumeConnectors().Create(c, x); err != nil {
			t.Fatalf("VolumeConnectors().Create(%s %s): %v", x.Type, x.ConnectorID, err)
		}
	}
	for _, tc := range []struct {
		f    baremetal.VolumeFilter
		page baremetal.Page
		want []string
	}{
		{baremetal.VolumeFilter{}, baremetal.Page{}, []string{vc.UUID, sameID.UUID, mac.UUID}},
		{baremetal.VolumeFilter{NodeUUID: strings.ToUpper(n1.UUID)}, baremetal.Page{}, []string{vc.UUID, mac.UUID}},
		{baremetal.VolumeFilter{}, baremetal.Page{Limit: 1, Marker: vc.UUID}, []string{sameID.UUID}},
		{baremetal.VolumeFilter{}, baremetal.Page{SortKey: "type"}, []string{vc.UUID, mac.UUID, sameID.UUID}},
		{baremetal.VolumeFilter{}, baremetal.Page{SortKey: "node_id", SortDesc: true}, []string{sameID.UUID, mac.UUID, vc.UUID}},
	} {
		got, err := s.VolumeConnectors().List(c, tc.f, tc.page)
		if err != nil {
			t.Fatalf("VolumeConnectors().List(%+v, %+v): %v", tc.f, tc.page, err)
		}
		if ids := uuids(got, connectorUUID); !reflect.DeepEqual(ids, tc.want) {
			t.Fatalf("VolumeConnectors().List(%+v, %+v) = %v, want %v", tc.f, tc.page, ids, tc.want)
		}
	}
	_, err := s.VolumeConnectors().List(c, baremetal.VolumeFilter{}, baremetal.Page{SortKey: "extra"})
	wantField(t, err, "sort_key")

	// Update is a compare-and-swap; it may move the connector to another
	// node, and keeps the pair unique.
	stale := vc.Clone()
	vc.NodeUUID, vc.ConnectorID = strings.ToUpper(n2.UUID), "iqn.2026-01.org.example:n2"
	clock.Advance(1e9)
	if err := s.VolumeConnectors().Update(c, vc); err != nil || vc.Version != 2 || vc.NodeUUID != n2.UUID || !vc.UpdatedAt.Equal(clock.Now()) {
		t.Fatalf("VolumeConnectors().Update = %v (%+v); want version 2 on node %s", err, vc, n2.UUID)
	}
	wantIs(t, s.VolumeConnectors().Update(c, stale), baremetal.ErrConflict, "VolumeConnectors().Update(stale)")
	taken := mac.Clone()
	taken.Type, taken.ConnectorID = sameID.Type, sameID.ConnectorID
	wantField(t, s.VolumeConnectors().Update(c, taken), "connector_id")
	if got, _ := s.VolumeConnectors().Get(c, mac.UUID); got.Version != 1 || got.Type != "mac" {
		t.Fatalf("connector after a refused update = %+v", got)
	}

	if err := s.VolumeConnectors().Delete(c, mac.UUID); err != nil {
		t.Fatalf("VolumeConnectors().Delete: %v", err)
	}
	wantNotFound(t, s.VolumeConnectors().Delete(c, mac.UUID), "volume_connector", "VolumeConnectors().Delete(again)")
	// Deleting a node deletes its connectors.
	if err := s.DeleteNode(c, n2.UUID); err != nil {
		t.Fatal(err)
	}
	if left, err := s.VolumeConnectors().List(c, baremetal.VolumeFilter{}, baremetal.Page{}); err != nil || len(left) != 0 {
		t.Fatalf("connectors after their node was deleted = %v, %v", uuids(left, connectorUUID), err)
	}
}

func targetUUID(v *baremetal.VolumeTarget) string { return v.UUID }

func testVolumeTargets(t *testing.T, s baremetal.Store, clock *ManualClock) {
	c := ctx(t)
	n1, n2 := mustNode(t, s, nil), mustNode(t, s, nil)
	vt := &baremetal.VolumeTarget{NodeUUID: n1.UUID, VolumeType: "iscsi", VolumeID: "04452bed-5367-4202-8bf5-de4335ac56d2",
		Properties: map[string]any{"target_lun": int64(9007199254740993), "auth_password": "s3cret"}, Extra: map[string]any{"k": "v"}}
	if err := s.VolumeTargets().Create(c, vt); err != nil {
		t.Fatalf("VolumeTargets().Create: %v", err)
	}
	if vt.ID == 0 || vt.UUID == "" || vt.Version != 1 || vt.BootIndex != 0 || !vt.CreatedAt.Equal(clock.Now()) {
		t.Fatalf("created target = %+v", vt)
	}
	got, err := s.VolumeTargets().Get(c, vt.UUID)
	if err != nil || fmt.Sprint(got.Properties["target_lun"]) != "9007199254740993" || got.Properties["auth_password"] != "s3cret" {
		t.Fatalf("VolumeTargets().Get = %+v, %v; want the properties exact", got, err)
	}
	got.Properties["target_lun"] = vt.Properties["target_lun"]
	if !reflect.DeepEqual(got, vt) {
		t.Fatalf("VolumeTargets().Get = %+v, want %+v", got, vt)
	}

	// A boot index is unique per node.
	for _, tc := range []struct {
		field string
		vt    *baremetal.VolumeTarget
	}{
		{"boot_index", &baremetal.VolumeTarget{NodeUUID: n1.UUID, VolumeType: "iscsi", VolumeID: "v2"}},
		{"uuid", &baremetal.VolumeTarget{UUID: vt.UUID, NodeUUID: n2.UUID, VolumeType: "iscsi", VolumeID: "v2"}},
		{"volume_type", &baremetal.VolumeTarget{NodeUUID: n1.UUID, BootIndex: 1, VolumeType: strings.Repeat("t", 65), VolumeID: "v2"}},
		{"volume_id", &baremetal.VolumeTarget{NodeUUID: n1.UUID, BootIndex: 1, VolumeType: "iscsi", VolumeID: strings.Repeat("v", 37)}},
		{"boot_index", &baremetal.VolumeTarget{NodeUUID: n1.UUID, BootIndex: math.MaxInt32 + 1, VolumeType: "iscsi", VolumeID: "v2"}},
		{"properties", &baremetal.VolumeTarget{NodeUUID: n1.UUID, BootIndex: 1, VolumeType: "iscsi", VolumeID: "v2", Properties: map[string]any{"c": make(chan int)}}},
	} {
		err := s.VolumeTargets().Create(c, tc.vt)
		wantField(t, err, tc.field)
		if strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("error quotes a property: %v", err)
		}
	}
	second := &baremetal.VolumeTarget{NodeUUID: n2.UUID, VolumeType: "fibre_channel", VolumeID: "v2"}
	third := &baremetal.VolumeTarget{NodeUUID: n1.UUID, BootIndex: -1, VolumeType: "iscsi", VolumeID: "v3"}
	for _, x := range []*baremetal.VolumeTarget{second, third} {
		if err := s.VolumeTargets().Create(c, x); err != nil {
			t.Fatalf("VolumeTargets().Create(%s on %s): %v", x.VolumeID, x.NodeUUID, err)
		}
	}
	for _, tc := range []struct {
		f    baremetal.VolumeFilter
		page baremetal.Page
		want []string
	}{
		{baremetal.VolumeFilter{}, baremetal.Page{}, []string{vt.UUID, second.UUID, third.UUID}},
		{baremetal.VolumeFilter{NodeUUID: n1.UUID}, baremetal.Page{}, []string{vt.UUID, third.UUID}},
		{baremetal.VolumeFilter{}, baremetal.Page{SortKey: "boot_index"}, []string{third.UUID, vt.UUID, second.UUID}},
		{baremetal.VolumeFilter{}, baremetal.Page{SortKey: "volume_type", SortDesc: true, Limit: 1}, []string{third.UUID}},
		{baremetal.VolumeFilter{NodeUUID: n2.UUID}, baremetal.Page{Marker: second.UUID}, nil},
	} {
		got, err := s.VolumeTargets().List(c, tc.f, tc.page)
		if err != nil {
			t.Fatalf("VolumeTargets().List(%+v, %+v): %v", tc.f, tc.page, err)
		}
		if ids := uuids(got, targetUUID); !reflect.DeepEqual(ids, tc.want) {
			t.Fatalf("VolumeTargets().List(%+v, %+v) = %v, want %v", tc.f, tc.page, ids, tc.want)
		}
	}
	_, err = s.VolumeTargets().List(c, baremetal.VolumeFilter{}, baremetal.Page{SortKey: "properties"})
	wantField(t, err, "sort_key")

	stale := third.Clone()
	third.BootIndex = 0
	wantField(t, s.VolumeTargets().Update(c, third), "boot_index")
	third.NodeUUID = n2.UUID
	wantField(t, s.VolumeTargets().Update(c, third), "boot_index")
	third.BootIndex, third.Properties = 1, nil
	if err := s.VolumeTargets().Update(c, third); err != nil || third.Version != 2 {
		t.Fatalf("VolumeTargets().Update(to another node) = %v, version %d", err, third.Version)
	}
	wantIs(t, s.VolumeTargets().Update(c, stale), baremetal.ErrConflict, "VolumeTargets().Update(stale)")

	if err := s.VolumeTargets().Delete(c, vt.UUID); err != nil {
		t.Fatalf("VolumeTargets().Delete: %v", err)
	}
	wantNotFound(t, s.VolumeTargets().Delete(c, vt.UUID), "volume_target", "VolumeTargets().Delete(again)")
	if err := s.DeleteNode(c, n2.UUID); err != nil {
		t.Fatal(err)
	}
	if left, err := s.VolumeTargets().List(c, baremetal.VolumeFilter{}, baremetal.Page{}); err != nil || len(left) != 0 {
		t.Fatalf("targets after their node was deleted = %v, %v", uuids(left, targetUUID), err)
	}
}
