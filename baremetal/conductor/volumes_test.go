package conductor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// powerTo sets the node's power state through the conductor and waits
// for it, the node unlocked.
func (h *harness) powerTo(uuid string, target statemachine.PowerState) {
	h.t.Helper()
	if err := h.c.SetPowerState(h.ctx, uuid, target, 0); err != nil {
		h.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := h.store.GetNode(h.ctx, uuid)
		if err != nil {
			h.t.Fatal(err)
		}
		if n.PowerState == target && n.TargetPowerState == "" && n.Reservation == "" {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("node %s: power %q (target %q), want %q", uuid, n.PowerState, n.TargetPowerState, target)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Volume connectors and targets change under their node's lock, with
// Ironic's conditions: an update only while the node is powered off, a
// deletion also in enroll, manageable and adopt failed whatever the
// power state.
func TestVolumeChangesFollowIronicsStateRules(t *testing.T) {
	t.Parallel()
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{DisableAutomatedClean: true,
		LockPolicy: &baremetal.LockPolicy{Attempts: 1}})
	n := h.enroll("volumes", nil)
	newConnector := func(id string) *baremetal.VolumeConnector {
		t.Helper()
		vc := &baremetal.VolumeConnector{NodeUUID: n.UUID, Type: "iqn", ConnectorID: id}
		if err := h.store.VolumeConnectors().Create(h.ctx, vc); err != nil {
			t.Fatal(err)
		}
		return vc
	}
	newTarget := func(index int) *baremetal.VolumeTarget {
		t.Helper()
		vt := &baremetal.VolumeTarget{NodeUUID: n.UUID, VolumeType: "iscsi", VolumeID: "vol", BootIndex: index}
		if err := h.store.VolumeTargets().Create(h.ctx, vt); err != nil {
			t.Fatal(err)
		}
		return vt
	}
	refused := func(err error, action string, power statemachine.PowerState) {
		t.Helper()
		var vse *conductor.VolumeStateError
		if !errors.As(err, &vse) || vse.Action != action || vse.Node != n.UUID || vse.PowerState != power || !errors.Is(err, conductor.ErrVerbRefused) {
			t.Fatalf("%s = %v, want a VolumeStateError in power state %q", action, err, power)
		}
	}
	vc, vt := newConnector("iqn.a"), newTarget(0)

	// A fake-hardware node's power state is unknown until a power action:
	// an update is refused, a deletion in enroll is not.
	vc.ConnectorID = "iqn.b"
	refused(h.c.UpdateVolumeConnector(h.ctx, vc), "volume connector update", "")
	vt.VolumeID = "vol-b"
	refused(h.c.UpdateVolumeTarget(h.ctx, vt), "volume target update", "")
	if got, _ := h.store.VolumeConnectors().Get(h.ctx, vc.UUID); got.ConnectorID != "iqn.a" || got.Version != 1 {
		t.Fatalf("refused update wrote the connector: %+v", got)
	}

	h.powerTo(n.UUID, statemachine.PowerOff)
	if err := h.c.UpdateVolumeConnector(h.ctx, vc); err != nil || vc.Version != 2 {
		t.Fatalf("UpdateVolumeConnector(powered off) = %v, version %d", err, vc.Version)
	}
	if err := h.c.UpdateVolumeTarget(h.ctx, vt); err != nil || vt.Version != 2 {
		t.Fatalf("UpdateVolumeTarget(powered off) = %v, version %d", err, vt.Version)
	}

	h.powerTo(n.UUID, statemachine.PowerOn)
	vc.ConnectorID = "iqn.c"
	refused(h.c.UpdateVolumeConnector(h.ctx, vc), "volume connector update", statemachine.PowerOn)
	// In enroll (and manageable) a deletion needs no power off.
	if err := h.c.DeleteVolumeConnector(h.ctx, vc.UUID); err != nil {
		t.Fatalf("DeleteVolumeConnector(enroll, powered on) = %v", err)
	}
	if err := h.c.Manage(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	h.powerTo(n.UUID, statemachine.PowerOn)
	if err := h.c.DeleteVolumeTarget(h.ctx, vt.UUID); err != nil {
		t.Fatalf("DeleteVolumeTarget(manageable, powered on) = %v", err)
	}

	// Available and powered on: refused; powered off: done.
	vc, vt = newConnector("iqn.d"), newTarget(1)
	if err := h.c.Provide(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Available)
	h.powerTo(n.UUID, statemachine.PowerOn)
	refused(h.c.DeleteVolumeConnector(h.ctx, vc.UUID), "volume connector deletion", statemachine.PowerOn)
	refused(h.c.DeleteVolumeTarget(h.ctx, vt.UUID), "volume target deletion", statemachine.PowerOn)

	// A node locked by another conductor is Ironic's NodeLocked.
	if _, err := h.store.ReserveNode(h.ctx, n.UUID, "other-conductor"); err != nil {
		t.Fatal(err)
	}
	var locked *baremetal.NodeLockedError
	if err := h.c.DeleteVolumeTarget(h.ctx, vt.UUID); !errors.As(err, &locked) || locked.Holder != "other-conductor" {
		t.Fatalf("DeleteVolumeTarget(locked) = %v, want NodeLockedError naming the holder", err)
	}
	if err := h.store.ReleaseNode(h.ctx, n.UUID, "other-conductor"); err != nil {
		t.Fatal(err)
	}

	h.powerTo(n.UUID, statemachine.PowerOff)
	if err := h.c.DeleteVolumeConnector(h.ctx, vc.UUID); err != nil {
		t.Fatalf("DeleteVolumeConnector(available, powered off) = %v", err)
	}
	if err := h.c.DeleteVolumeTarget(h.ctx, vt.UUID); err != nil {
		t.Fatalf("DeleteVolumeTarget(available, powered off) = %v", err)
	}
	var nf *baremetal.NotFoundError
	if err := h.c.DeleteVolumeTarget(h.ctx, vt.UUID); !errors.As(err, &nf) || nf.Kind != "volume_target" {
		t.Fatalf("DeleteVolumeTarget(again) = %v, want a NotFoundError", err)
	}
	if got, _ := h.store.GetNode(h.ctx, n.UUID); got.Reservation != "" {
		t.Fatalf("node left reserved by %s", got.Reservation)
	}
}
