package agentdeploy

import (
	"context"
	"strings"

	"github.com/anvilmetal/anvil/driver"
)

// RescueName is the agent rescue interface's name, as Ironic names it.
const RescueName = "agent"

// Rescue is Ironic's "agent" rescue interface: the node boots the agent
// ramdisk for rescue (the boot interface's rescue_kernel and
// rescue_ramdisk, driver_info or the conductor's defaults), and when the
// agent calls back the conductor sends it the rescue password's crypt
// hash (rescue.finalize_rescue with hashed=true). IPA writes the hash to
// /etc/ipa-rescue-config/ipa-rescue-password and stops serving its API;
// a rescue-capable ramdisk then creates the user "rescue" with that
// password (IPA's DIB element does; so does Anvil's own ramdisk, package
// ramdisk), which logs in on the console or over the network.
//
// The work around the boot interface (power, the instance's boot, the
// tenant and rescuing networks) is the conductor's, which recognises
// this interface through AgentBased (conductor.AgentRescuer): Rescue
// only checks the password and asks for the ramdisk (StepResult{Wait:
// true, RebootRequested: true}); Unrescue and CleanUp have nothing of
// their own.
type Rescue struct{}

// NewRescue returns the agent rescue interface.
func NewRescue() *Rescue { return &Rescue{} }

// AgentBased reports that the rescue ramdisk is the agent's.
func (*Rescue) AgentBased() bool { return true }

// Properties returns none, as Ironic's: the boot interface reads the
// rescue kernel and ramdisk.
func (*Rescue) Properties() []driver.Property { return []driver.Property{} }

// Validate checks what Ironic's AgentRescue.validate checks of the node
// itself: instance_info.rescue_password is set (the conductor records it
// before validating) and not blank. The boot interface's rescue ramdisk
// is validated by the conductor, which has the boot interface.
func (*Rescue) Validate(ctx context.Context, t *driver.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	v, ok := t.InstanceInfo["rescue_password"]
	if !ok || v == nil {
		return &driver.MissingParameterError{Node: t.NodeUUID, Kind: driver.KindRescue, Impl: RescueName, Field: "instance_info",
			Missing: []string{"rescue_password"}}
	}
	if s, isStr := v.(string); !isStr || strings.TrimSpace(s) == "" {
		// The value is a secret: the error never shows it.
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindRescue, Impl: RescueName, Field: "instance_info",
			Key: "rescue_password", Expected: "a non-empty string"}
	}
	return nil
}

// Rescue asks the conductor to boot the rescue ramdisk and wait for the
// agent (Ironic's RESCUEWAIT).
func (r *Rescue) Rescue(ctx context.Context, t *driver.Task) (driver.StepResult, error) {
	if err := r.Validate(ctx, t); err != nil {
		return driver.StepResult{}, err
	}
	return driver.StepResult{Wait: true, RebootRequested: true}, nil
}

// Unrescue has nothing of its own: the conductor boots the instance.
func (*Rescue) Unrescue(ctx context.Context, _ *driver.Task) error { return ctx.Err() }

// CleanUp has nothing of its own: the conductor forgets the password and
// removes the ramdisk's boot and the rescuing network.
func (*Rescue) CleanUp(ctx context.Context, _ *driver.Task) error { return ctx.Err() }

var (
	_ driver.RescueInterface = (*Rescue)(nil)
)
