package conductor

import (
	"context"
	"fmt"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/jsonmap"
	"github.com/anvilmetal/anvil/steps"
)

func networkPurpose(kind steps.Kind) driver.NetworkPurpose {
	switch kind {
	case steps.Clean:
		return driver.NetworkCleaning
	case steps.Service:
		return driver.NetworkServicing
	}
	return driver.NetworkProvisioning
}

// bootRamdisk boots the node into the agent ramdisk for an agent-based
// run: network, ramdisk boot, token wiped, reboot (or power on).
func (c *Conductor) bootRamdisk(ctx context.Context, t *task, kind steps.Kind) error {
	if err := c.prepareRamdiskBoot(ctx, t, networkPurpose(kind), c.agentRamdiskParams()); err != nil {
		return err
	}
	return c.powerIntoRamdisk(ctx, t)
}

// prepareRamdiskBoot readies the node to boot the agent ramdisk for
// purpose: its network, the boot interface's ramdisk (with params, the
// ramdisk's kernel parameters, and the boot device the boot interface
// chooses and sets), and the previous
// agent's token and URL forgotten (unless the token is pre-generated), so
// the booting agent finds no stale token.
func (c *Conductor) prepareRamdiskBoot(ctx context.Context, t *task, purpose driver.NetworkPurpose, params map[string]any) error {
	if err := c.prepareRamdiskConfig(ctx, t, purpose, params); err != nil {
		return err
	}
	n := t.node
	if _, pre := n.DriverInternalInfo[driver.InternalAgentTokenPregenerated]; !pre {
		delete(n.DriverInternalInfo, driver.InternalAgentToken)
	}
	delete(n.DriverInternalInfo, driver.InternalAgentURL)
	return nil
}

// prepareRamdiskConfig is prepareRamdiskBoot keeping the agent's token
// and URL: for a fast-track run whose agent is up (it may have looked
// the node up already) and is not rebooted.
func (c *Conductor) prepareRamdiskConfig(ctx context.Context, t *task, purpose driver.NetworkPurpose, params map[string]any) error {
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		if nw := d.Network(); nw != nil {
			if err := nw.AddNetwork(ctx, v, purpose); err != nil {
				return err
			}
		}
		if b := d.Boot(); b != nil {
			// The boot interface sets the boot device itself (PXE for
			// network boot, CD for virtual media), as in Ironic: a PXE
			// override here would undo a virtual-media boot.
			if err := b.PrepareRamdisk(ctx, v, params); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.bootPrepared(ctx, t)
	return nil
}

// powerIntoRamdisk reboots the node (or powers it on) once its ramdisk
// boot is prepared.
func (c *Conductor) powerIntoRamdisk(ctx context.Context, t *task) error {
	if t.node.PowerState == driver.PowerOn {
		return c.powerBootingAgent(ctx, t, driver.Reboot)
	}
	return c.powerBootingAgent(ctx, t, driver.PowerOn)
}

// shutdownRamdisk ends an agent-based clean or service run: power off and
// forget the ramdisk boot and the run's network.
func (c *Conductor) shutdownRamdisk(ctx context.Context, t *task, kind steps.Kind) error {
	// A node with disable_power_off keeps running the ramdisk; the
	// caller reboots it (or locks its agent down) as Ironic does.
	if !t.node.DisablePowerOff {
		if err := c.powerAction(ctx, t, driver.PowerOff, 0); err != nil {
			return err
		}
	}
	return t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		if b := d.Boot(); b != nil {
			if err := b.CleanUpRamdisk(ctx, v); err != nil {
				return err
			}
		}
		if nw := d.Network(); nw != nil {
			return nw.RemoveNetwork(ctx, v, networkPurpose(kind))
		}
		return nil
	})
}

// agentNodeDict is the node as sent to the agent: secrets masked, except
// the config drive for deploy steps, which the agent writes.
func agentNodeDict(n *baremetal.Node, kind steps.Kind) map[string]any {
	ii := baremetal.MaskSecrets(n.InstanceInfo)
	if kind == steps.Deploy {
		if cd, ok := n.InstanceInfo["configdrive"]; ok {
			ii = ensureMap(ii)
			ii["configdrive"] = cd
		}
	}
	return map[string]any{
		"uuid": n.UUID, "name": n.Name, "driver": n.Driver, "properties": jsonmap.Clone(n.Properties),
		"instance_info": ii, "driver_internal_info": baremetal.MaskSecrets(n.DriverInternalInfo),
		"driver_info":        baremetal.MaskSecrets(n.DriverInfo),
		"target_raid_config": nonNilMap(jsonmap.Clone(n.TargetRAIDConfig)),
		"raid_config":        nonNilMap(jsonmap.Clone(n.RAIDConfig)),
	}
}

// nonNilMap is m, or an empty map for nil (Ironic's node fields default
// to {}, and IPA reads them with .get on a dict).
func nonNilMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func (t *task) agentPorts(ctx context.Context) []map[string]any {
	ps, err := t.loadPorts(ctx)
	if err != nil {
		return nil
	}
	out := make([]map[string]any, 0, len(ps))
	for _, p := range ps {
		out = append(out, map[string]any{"uuid": p.UUID, "address": p.Address, "pxe_enabled": p.PXEEnabled})
	}
	return out
}

func hardwareManagerVersion(n *baremetal.Node) map[string]string {
	raw, _ := n.DriverInternalInfo[steps.HardwareManagerVersionKey].(map[string]any)
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		out[k] = fmt.Sprint(v)
	}
	return out
}
