package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
)

// testUpdateRecording checks baremetal.RecordingNodeStore, when the store
// offers it: the update and its history line commit together, and a
// refused update or a bad entry writes neither.
func testUpdateRecording(t *testing.T, s baremetal.Store, _ *ManualClock) {
	rs, ok := s.(baremetal.RecordingNodeStore)
	if !ok {
		t.Skip("store does not implement baremetal.RecordingNodeStore")
	}
	n := mustNode(t, s, nil)
	if _, err := s.ReserveNode(ctx(t), n.UUID, "c-1"); err != nil {
		t.Fatal(err)
	}
	history := func() []*baremetal.HistoryEntry {
		t.Helper()
		h, err := s.ListHistory(ctx(t), n.UUID, 0)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	n.ProvisionState = "manageable"
	e := &baremetal.HistoryEntry{Event: "provision state manageable", EventType: "provisioning",
		Message: "verifying -> manageable: ipmi_password=hunter2", Conductor: "c-1"}
	if err := rs.UpdateNodeRecording(ctx(t), n, "c-1", e); err != nil {
		t.Fatalf("UpdateNodeRecording: %v", err)
	}
	if n.Version != 2 || e.ID == 0 || e.CreatedAt.IsZero() || e.NodeUUID != n.UUID || e.Severity != baremetal.HistoryInfo {
		t.Fatalf("node version %d, entry %+v: not filled", n.Version, e)
	}
	got, err := s.GetNode(ctx(t), n.UUID)
	if err != nil || got.ProvisionState != "manageable" || got.Version != 2 {
		t.Fatalf("GetNode = %+v, %v; want manageable at version 2", got, err)
	}
	h := history()
	if len(h) != 1 || h[0].ID != e.ID || h[0].Event != e.Event || strings.Contains(h[0].Message, "hunter2") {
		t.Fatalf("history = %+v; want the one masked entry", h)
	}

	// A stale version is refused and records nothing.
	stale := got.Clone()
	stale.Version = 1
	stale.ProvisionState = "available"
	err = rs.UpdateNodeRecording(ctx(t), stale, "c-1", &baremetal.HistoryEntry{Event: "provision state available"})
	var ce *baremetal.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("stale UpdateNodeRecording = %v, want *ConflictError", err)
	}
	// So is a wrong holder.
	other := got.Clone()
	other.ProvisionState = "available"
	err = rs.UpdateNodeRecording(ctx(t), other, "c-2", &baremetal.HistoryEntry{Event: "provision state available"})
	if !errors.As(err, &ce) {
		t.Fatalf("wrong-holder UpdateNodeRecording = %v, want *ConflictError", err)
	}
	// A bad entry is refused before anything is written.
	bad := got.Clone()
	bad.ProvisionState = "available"
	err = rs.UpdateNodeRecording(ctx(t), bad, "c-1", &baremetal.HistoryEntry{Event: "x", Severity: "LOUD"})
	wantField(t, err, "severity")
	err = rs.UpdateNodeRecording(ctx(t), bad, "c-1", &baremetal.HistoryEntry{NodeUUID: "3f2e0c1a-0000-4000-8000-000000000000", Event: "x"})
	wantField(t, err, "node_uuid")
	if h := history(); len(h) != 1 {
		t.Fatalf("history after refused writes = %d entries, want 1", len(h))
	}
	if got, _ := s.GetNode(ctx(t), n.UUID); got.ProvisionState != "manageable" || got.Version != 2 {
		t.Fatalf("node after refused writes = %s at version %d, want manageable at 2", got.ProvisionState, got.Version)
	}
}

// testUpdateReleasing checks baremetal.ReleasingNodeStore, when the store
// offers it: the update, its history line and the release commit
// together; a stale version, a wrong holder or a bad entry writes
// nothing and keeps the reservation; without an entry only the node is
// written.
func testUpdateReleasing(t *testing.T, s baremetal.Store, _ *ManualClock) {
	rs, ok := s.(baremetal.ReleasingNodeStore)
	if !ok {
		t.Skip("store does not implement baremetal.ReleasingNodeStore")
	}
	n := mustNode(t, s, nil)
	locked, err := s.ReserveNode(ctx(t), n.UUID, "c-1")
	if err != nil {
		t.Fatal(err)
	}
	history := func() []*baremetal.HistoryEntry {
		t.Helper()
		h, err := s.ListHistory(ctx(t), n.UUID, 0)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	refused := func(what string, err error, target any) {
		t.Helper()
		if !errors.As(err, target) {
			t.Fatalf("%s: UpdateNodeReleasing = %v, want %T", what, err, target)
		}
		got, gerr := s.GetNode(ctx(t), n.UUID)
		if gerr != nil || got.Reservation != "c-1" || got.Version != locked.Version || got.ProvisionState != locked.ProvisionState {
			t.Fatalf("%s: node after the refusal = %+v, %v; want it unchanged and still reserved by c-1", what, got, gerr)
		}
		if h := history(); len(h) != 0 {
			t.Fatalf("%s: history after the refusal = %d entries, want none", what, len(h))
		}
	}

	stale := locked.Clone()
	stale.Version--
	stale.ProvisionState = "manageable"
	var ce *baremetal.ConflictError
	refused("stale version", rs.UpdateNodeReleasing(ctx(t), stale, "c-1", &baremetal.HistoryEntry{Event: "provision state manageable"}), &ce)
	other := locked.Clone()
	other.ProvisionState = "manageable"
	refused("wrong holder", rs.UpdateNodeReleasing(ctx(t), other, "c-2", &baremetal.HistoryEntry{Event: "provision state manageable"}), &ce)
	if ce.ActualHolder != "c-1" {
		t.Fatalf("wrong-holder conflict names holder %q, want c-1", ce.ActualHolder)
	}
	var ife *baremetal.InvalidFieldError
	refused("bad entry", rs.UpdateNodeReleasing(ctx(t), other.Clone(), "c-1", &baremetal.HistoryEntry{Event: "x", Severity: "LOUD"}), &ife)
	refused("no holder", rs.UpdateNodeReleasing(ctx(t), other.Clone(), "", &baremetal.HistoryEntry{Event: "x"}), &ife)

	upd := locked.Clone()
	upd.ProvisionState = "manageable"
	e := &baremetal.HistoryEntry{Event: "provision state manageable", EventType: "provisioning",
		Message: "verifying -> manageable: ipmi_password=hunter2", Conductor: "c-1"}
	if err := rs.UpdateNodeReleasing(ctx(t), upd, "c-1", e); err != nil {
		t.Fatalf("UpdateNodeReleasing: %v", err)
	}
	if upd.Reservation != "" || upd.Version != locked.Version+1 || e.ID == 0 || e.NodeUUID != n.UUID {
		t.Fatalf("after UpdateNodeReleasing: reservation %q, version %d, entry %+v; want released at %d with the entry filled",
			upd.Reservation, upd.Version, e, locked.Version+1)
	}
	got, err := s.GetNode(ctx(t), n.UUID)
	if err != nil || got.Reservation != "" || got.ProvisionState != "manageable" || got.Version != upd.Version {
		t.Fatalf("GetNode = %+v, %v; want manageable, unreserved, at version %d", got, err, upd.Version)
	}
	if h := history(); len(h) != 1 || h[0].ID != e.ID || strings.Contains(h[0].Message, "hunter2") {
		t.Fatalf("history = %+v; want the one masked entry", h)
	}
	// The lock is free: anyone may take it, and the old holder's
	// release finds it not locked.
	var nl *baremetal.NodeNotLockedError
	if err := s.ReleaseNode(ctx(t), n.UUID, "c-1"); !errors.As(err, &nl) {
		t.Fatalf("ReleaseNode after UpdateNodeReleasing = %v, want *NodeNotLockedError", err)
	}

	// Without an entry only the node is written.
	again, err := s.ReserveNode(ctx(t), n.UUID, "c-2")
	if err != nil {
		t.Fatal(err)
	}
	again.ProvisionState = "available"
	if err := rs.UpdateNodeReleasing(ctx(t), again, "c-2", nil); err != nil {
		t.Fatalf("UpdateNodeReleasing without an entry: %v", err)
	}
	if got, err := s.GetNode(ctx(t), n.UUID); err != nil || got.Reservation != "" || got.ProvisionState != "available" {
		t.Fatalf("GetNode = %+v, %v; want available and unreserved", got, err)
	}
	if h := history(); len(h) != 1 {
		t.Fatalf("history after the update without an entry = %d entries, want 1", len(h))
	}
}
