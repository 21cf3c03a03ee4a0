package conductor

import (
	"context"
	"fmt"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/statemachine"
)

// VolumeStateError refuses changing a node's volume connectors or
// targets while the node's state forbids it (Ironic's
// InvalidStateRequested). It matches ErrVerbRefused.
type VolumeStateError struct {
	// Action is Ironic's name of the change: "volume connector update",
	// "volume connector deletion", "volume target update" or "volume
	// target deletion".
	Action string
	// Node is the node's UUID.
	Node string
	// ProvisionState and PowerState are the node's states ("" for an
	// unknown power state).
	ProvisionState statemachine.State
	PowerState     statemachine.PowerState
}

func (e *VolumeStateError) Error() string {
	power := string(e.PowerState)
	if power == "" {
		power = "unknown"
	}
	allowed := "the node must be powered off"
	if e.deletion() {
		allowed += fmt.Sprintf(" or in one of %v", statemachine.DeleteAllowedStates())
	}
	return fmt.Sprintf("%s on node %s refused: its power state is %s and its provision state %s; %s",
		e.Action, e.Node, power, e.ProvisionState, allowed)
}

func (e *VolumeStateError) deletion() bool {
	return e.Action == "volume connector deletion" || e.Action == "volume target deletion"
}

// Is matches ErrVerbRefused.
func (e *VolumeStateError) Is(target error) bool { return target == ErrVerbRefused }

// UpdateVolumeConnector writes vc (NodeUUID included) under the lock of
// the node it names, as Ironic's conductor does: only while that node is
// powered off (a *VolumeStateError otherwise). Errors are also the
// lock's (*baremetal.NodeLockedError) and the store's.
func (c *Conductor) UpdateVolumeConnector(ctx context.Context, vc *baremetal.VolumeConnector) error {
	return c.changeVolume(ctx, vc.NodeUUID, "volume connector update", func() error {
		return c.store.VolumeConnectors().Update(ctx, vc)
	})
}

// DeleteVolumeConnector deletes the connector uuid under its node's
// lock, as Ironic's conductor does: only while the node is powered off
// or in enroll, manageable or adopt failed (a *VolumeStateError
// otherwise).
func (c *Conductor) DeleteVolumeConnector(ctx context.Context, uuid string) error {
	vc, err := c.store.VolumeConnectors().Get(ctx, uuid)
	if err != nil {
		return err
	}
	return c.changeVolume(ctx, vc.NodeUUID, "volume connector deletion", func() error {
		return c.store.VolumeConnectors().Delete(ctx, vc.UUID)
	})
}

// UpdateVolumeTarget is UpdateVolumeConnector for a volume target.
func (c *Conductor) UpdateVolumeTarget(ctx context.Context, vt *baremetal.VolumeTarget) error {
	return c.changeVolume(ctx, vt.NodeUUID, "volume target update", func() error {
		return c.store.VolumeTargets().Update(ctx, vt)
	})
}

// DeleteVolumeTarget is DeleteVolumeConnector for a volume target.
func (c *Conductor) DeleteVolumeTarget(ctx context.Context, uuid string) error {
	vt, err := c.store.VolumeTargets().Get(ctx, uuid)
	if err != nil {
		return err
	}
	return c.changeVolume(ctx, vt.NodeUUID, "volume target deletion", func() error {
		return c.store.VolumeTargets().Delete(ctx, vt.UUID)
	})
}

// changeVolume runs write under node's exclusive lock when the node's
// states allow action.
func (c *Conductor) changeVolume(ctx context.Context, node, action string, write func() error) error {
	t, err := c.acquire(ctx, node)
	if err != nil {
		return err
	}
	defer t.release()
	n := t.node
	refused := &VolumeStateError{Action: action, Node: n.UUID, ProvisionState: n.ProvisionState, PowerState: n.PowerState}
	allowed := n.PowerState == statemachine.PowerOff || (refused.deletion() && statemachine.DeleteAllowed(n.ProvisionState, false))
	if !allowed {
		return refused
	}
	return write()
}
