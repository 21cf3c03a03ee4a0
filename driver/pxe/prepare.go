package pxe

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/statemachine"
)

// Values of InternalConfigKey.
const (
	configRamdisk  = "ramdisk"
	configInstance = "instance"
	configLocal    = "local"
)

// RamdiskDeploy is the deploy interface whose instance is a kernel and
// ramdisk booted from the network (Ironic's "ramdisk" deploy).
const RamdiskDeploy = "ramdisk"

// Purpose returns the Config.Purpose of a ramdisk boot in provision
// state s: "deploy", "clean", "inspect", "rescue" or "service"; "" for a
// state that boots no ramdisk.
func Purpose(s statemachine.State) string {
	switch s {
	case statemachine.Deploying, statemachine.DeployWait:
		return "deploy"
	case statemachine.Cleaning, statemachine.CleanWait:
		return "clean"
	case statemachine.Inspecting, statemachine.InspectWait:
		return "inspect"
	case statemachine.Rescuing, statemachine.RescueWait:
		return "rescue"
	case statemachine.Servicing, statemachine.ServiceWait:
		return "service"
	}
	return ""
}

// PrepareRamdisk writes the node's ramdisk boot configuration: the deploy
// kernel and ramdisk (the rescue ones while the node is rescuing), the
// node's kernel_append_params followed by params (the conductor's
// ipa-api-url=..., sorted by key), for every pxe-enabled port's MAC; then
// it sets a one-time network boot (PXE; UEFI HTTP for http and http-ipxe
// when the management interface supports it; persistent with
// force_persistent_boot_device "Always") through the node's management
// interface (t.Driver must be bound). A parameter that names a secret
// (ipa-agent-token) is refused: the agent gets its token at lookup. It is
// idempotent.
func (b *Boot) PrepareRamdisk(ctx context.Context, t *driver.Task, params map[string]any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	kernel, ramdisk, err := b.images(t, rescuing(t.ProvisionState))
	if err != nil {
		return err
	}
	words, err := b.appendParams(t)
	if err != nil {
		return err
	}
	extra, err := b.conductorParams(t, params)
	if err != nil {
		return err
	}
	persist, err := b.persistence(t)
	if err != nil {
		return err
	}
	cfg, err := b.config(t, netboot.Ramdisk, Purpose(t.ProvisionState), kernel, ramdisk, append(words, extra...))
	if err != nil {
		return err
	}
	if err := b.put(ctx, t, cfg, configRamdisk); err != nil {
		return err
	}
	return b.setBootDevice(ctx, t, persist == "Always")
}

// CleanUpRamdisk removes the node's ramdisk boot configuration. A local
// or instance boot written since (PrepareInstance runs before the
// agent's tear-down at the end of a deploy) is left in place.
func (b *Boot) CleanUpRamdisk(ctx context.Context, t *driver.Task) error {
	return b.remove(ctx, t, configInstance, configLocal)
}

// PrepareInstance makes the node's next network boot go to its local
// disk (Action LocalDisk; the conductor sets the boot device to disk
// after it), or, for a ramdisk deploy (deploy interface "ramdisk"),
// writes the instance's kernel and ramdisk (instance_info kernel and
// ramdisk, with kernel_append_params) and sets a persistent network boot
// (unless force_persistent_boot_device is "Never").
func (b *Boot) PrepareInstance(ctx context.Context, t *driver.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.Interfaces[driver.KindDeploy] != RamdiskDeploy {
		cfg, err := b.config(t, netboot.LocalDisk, "", "", "", nil)
		if err != nil {
			return err
		}
		return b.put(ctx, t, cfg, configLocal)
	}
	r := driver.NewInfoReader(t.NodeUUID, driver.KindBoot, b.name, "instance_info", t.InstanceInfo)
	kernel, ramdisk := r.String("kernel", true), r.String("ramdisk", true)
	b.checkImage(r, "kernel", kernel)
	b.checkImage(r, "ramdisk", ramdisk)
	if err := r.Err(); err != nil {
		return err
	}
	words, err := b.appendParams(t)
	if err != nil {
		return err
	}
	persist, err := b.persistence(t)
	if err != nil {
		return err
	}
	cfg, err := b.config(t, netboot.Ramdisk, "instance", kernel, ramdisk, words)
	if err != nil {
		return err
	}
	if err := b.put(ctx, t, cfg, configInstance); err != nil {
		return err
	}
	return b.setBootDevice(ctx, t, persist != "Never")
}

// CleanUpInstance removes the node's instance (or local) boot
// configuration; a ramdisk boot written since is left in place.
func (b *Boot) CleanUpInstance(ctx context.Context, t *driver.Task) error {
	return b.remove(ctx, t, configRamdisk)
}

// config builds the node's Config.
func (b *Boot) config(t *driver.Task, action netboot.Action, purpose, kernel, ramdisk string, params []string) (netboot.Config, error) {
	macs, err := b.macs(t)
	if err != nil {
		return netboot.Config{}, err
	}
	mode, err := b.mode(t)
	if err != nil {
		return netboot.Config{}, err
	}
	if n := len(strings.Join(params, " ")); n > MaxCommandLine {
		return netboot.Config{}, b.invalid(t, "ramdisk parameters", "kernel_append_params",
			fmt.Sprintf("a kernel command line of at most %d bytes (got %d)", MaxCommandLine, n))
	}
	cfg := netboot.Config{Node: t.NodeUUID, NodeName: t.NodeName, MACs: macs, Interface: b.iface, Mode: mode,
		Action: action, Purpose: purpose, Kernel: kernel, Ramdisk: ramdisk, Params: slices.Clip(params)}
	if b.iface == netboot.IPXE || b.iface == netboot.HTTPIPXE {
		cfg.IPXETimeout = b.x.opts.IPXETimeout
	}
	// Secure boot (mode refused it on every other interface): UEFI PXE
	// through Debian's signed shim and GRUB.
	cfg.SecureBoot = b.iface == netboot.PXE && secureBootField(t) != ""
	return cfg, nil
}

func (b *Boot) put(ctx context.Context, t *driver.Task, cfg netboot.Config, kind string) error {
	if err := b.x.store.PutConfig(ctx, cfg); err != nil {
		return fmt.Errorf("boot/%s: node %s: write the boot configuration: %w", b.name, t.NodeUUID, err)
	}
	t.SetDriverInternalInfo(InternalConfigKey, kind)
	return nil
}

// remove deletes the node's configuration unless the one last written is
// of a kind in keep.
func (b *Boot) remove(ctx context.Context, t *driver.Task, keep ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cur, _ := t.InternalString(InternalConfigKey)
	if slices.Contains(keep, cur) {
		return nil
	}
	if err := b.x.store.DeleteConfig(ctx, t.NodeUUID); err != nil {
		return fmt.Errorf("boot/%s: node %s: remove the boot configuration: %w", b.name, t.NodeUUID, err)
	}
	t.DeleteDriverInternalInfo(InternalConfigKey)
	return nil
}

// setBootDevice sets the network boot device through the node's
// management interface.
func (b *Boot) setBootDevice(ctx context.Context, t *driver.Task, persistent bool) error {
	d := t.Driver()
	if d == nil || d.Management() == nil {
		return fmt.Errorf("boot/%s: node %s: no management interface to set the boot device with (the Task is not bound to its driver: these interfaces run only where the conductor composes drivers)", b.name, t.NodeUUID)
	}
	m := d.Management()
	dev := driver.BootPXE
	if b.needsUEFI() {
		supported, err := m.SupportedBootDevices(ctx, t)
		if err != nil {
			return fmt.Errorf("boot/%s: node %s: read the supported boot devices: %w", b.name, t.NodeUUID, err)
		}
		if slices.Contains(supported, driver.BootUEFIHTTP) {
			dev = driver.BootUEFIHTTP
		}
	}
	if err := m.SetBootDevice(ctx, t, dev, persistent); err != nil {
		return fmt.Errorf("boot/%s: node %s: set boot device %s: %w", b.name, t.NodeUUID, dev, err)
	}
	return nil
}
