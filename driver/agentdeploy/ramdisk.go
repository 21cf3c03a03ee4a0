package agentdeploy

import (
	"context"
	"fmt"
	"slices"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/steps"
)

// Implementation names of the other deploy interfaces of this package.
const (
	// CustomAgentName is Ironic's "custom-agent": the direct interface's
	// deploy steps without write_image. The ramdisk agent does the
	// deployment through the deploy steps the user gives (Metal3's
	// custom deploy).
	CustomAgentName = "custom-agent"
	// RamdiskName is Ironic's "ramdisk": the instance is a kernel and
	// ramdisk (instance_info kernel, ramdisk) or an ISO (instance_info
	// boot_iso) booted by the boot interface, with nothing written to
	// disk (Metal3's live-ISO hosts).
	RamdiskName = "ramdisk"
	// AutodetectName is Ironic's "autodetect": at deploy time the node
	// switches to the first of its candidates that supports the
	// instance (see Autodetect.Detect).
	AutodetectName = "autodetect"
)

// NewCustomAgent returns the custom-agent deploy interface: the direct
// interface without its write_image step and without the image checks
// (there is no image to write).
func NewCustomAgent(client *agentclient.Client) *Direct {
	d := NewWithOptions(client, Options{})
	d.custom = true
	return d
}

// Ramdisk is Ironic's "ramdisk" deploy interface. Its one deploy step,
// deploy (priority 100), needs the conductor: it powers the node off
// (unless disable_power_off), binds the tenant network, prepares the
// instance's boot on the boot interface (the PXE interfaces write the
// instance's kernel and ramdisk; virtual media inserts boot_iso) and
// powers the node on (reboots it with disable_power_off). The conductor
// recognises it through RamdiskDeploy.
type Ramdisk struct{}

// NewRamdisk returns the ramdisk deploy interface.
func NewRamdisk() *Ramdisk { return &Ramdisk{} }

// RamdiskDeploy reports that the conductor boots the instance itself
// after the deploy step.
func (*Ramdisk) RamdiskDeploy() bool { return true }

// Properties returns nothing: the boot interface reads what it boots.
func (*Ramdisk) Properties() []driver.Property { return nil }

// Validate checks, when the node is being deployed, that instance_info
// names what to boot: boot_iso, or kernel and ramdisk. A configdrive is
// fine (the instance reads it through the boot interface's means, as in
// Ironic); an image_source alone is not enough.
func (*Ramdisk) Validate(ctx context.Context, t *driver.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.ProvisionState != "deploying" {
		return nil
	}
	if iso, _ := t.InstanceString("boot_iso"); iso != "" {
		return nil
	}
	k, _ := t.InstanceString("kernel")
	r, _ := t.InstanceString("ramdisk")
	if k != "" && r != "" {
		return nil
	}
	var missing []string
	if k == "" {
		missing = append(missing, "kernel")
	}
	if r == "" {
		missing = append(missing, "ramdisk")
	}
	return &driver.MissingParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: RamdiskName, Field: "instance_info",
		Missing: []string{"boot_iso (or " + joinAnd(missing) + ")"}}
}

func joinAnd(s []string) string {
	if len(s) == 2 {
		return s[0] + " and " + s[1]
	}
	return s[0]
}

// Prepare has nothing to prepare: the deploy step boots the instance.
func (*Ramdisk) Prepare(context.Context, *driver.Task) error { return nil }

// Deploy finishes at once; the conductor boots the instance.
func (*Ramdisk) Deploy(context.Context, *driver.Task) (driver.StepResult, error) {
	return driver.StepResult{}, nil
}

// TearDown has nothing of its own; the conductor powers the node off
// and the boot interface forgets the instance's boot.
func (*Ramdisk) TearDown(context.Context, *driver.Task) error { return nil }

// CleanUp has nothing to clean up.
func (*Ramdisk) CleanUp(context.Context, *driver.Task) error { return nil }

// TakeOver has nothing to re-establish.
func (*Ramdisk) TakeOver(context.Context, *driver.Task) error { return nil }

// Steps returns the ramdisk interface's one deploy step.
func (*Ramdisk) Steps(kind steps.Kind) []steps.Step {
	if kind != steps.Deploy {
		return nil
	}
	return []steps.Step{steps.MustDeclare(steps.Deploy, string(driver.KindDeploy), StepDeploy, 100)}
}

// ExecuteStep runs deploy.
func (r *Ramdisk) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, s steps.Step) (driver.StepResult, error) {
	if kind != steps.Deploy || s.Name != StepDeploy {
		return driver.StepResult{}, &driver.StepNotFoundError{Kind: driver.KindDeploy, Impl: RamdiskName, StepKind: string(kind), Step: s.Name}
	}
	return r.Deploy(ctx, t)
}

// StepRerunSafe: deploy is a power action and a boot set to the same
// value, safe to run again after a takeover.
func (*Ramdisk) StepRerunSafe(kind steps.Kind, step string) bool {
	return kind == steps.Deploy && step == StepDeploy
}

// SupportsInstance reports whether the ramdisk interface is right for
// the node's instance, by Ironic's RamdiskDeploy.supports_deploy rule:
// instance_info ironic_ramdisk_deploy is true and either boot_iso, or
// kernel and ramdisk, are set.
func (*Ramdisk) SupportsInstance(t *driver.Task) bool {
	if !truthy(t.InstanceInfo["ironic_ramdisk_deploy"]) {
		return false
	}
	if iso, _ := t.InstanceString("boot_iso"); iso != "" {
		return true
	}
	k, _ := t.InstanceString("kernel")
	r, _ := t.InstanceString("ramdisk")
	return k != "" && r != ""
}

func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return slices.Contains([]string{"true", "True", "1", "yes", "on"}, x)
	}
	return false
}

// InstanceSupporter is what Autodetect asks a candidate deploy
// interface: whether it supports the node's instance (Ironic's
// supports_deploy). A candidate without it supports nothing by
// detection and is only chosen as the last resort.
type InstanceSupporter interface {
	SupportsInstance(t *driver.Task) bool
}

// Autodetect is Ironic's "autodetect" deploy interface (the default of
// Ironic 2026.1). It never deploys itself: the conductor asks Detect
// which of Candidates fits the node's instance, switches the node's
// deploy_interface to it for the deployment (remembering the original
// in driver_internal_info original_deploy_interface) and switches back
// when the instance is torn down. Its other methods refuse, as
// Ironic's do, in case the switch did not happen.
type Autodetect struct {
	// Candidates are Ironic's [DEFAULT]autodetect_deploy_interfaces, in
	// order: the first that supports the instance wins, the last is the
	// fallback.
	Candidates []string
	lookup     func(name string) driver.Interface
}

// NewAutodetect returns the autodetect interface choosing among
// candidates, which lookup resolves to the registered deploy
// implementations (nil for one that is not registered).
func NewAutodetect(candidates []string, lookup func(name string) driver.Interface) *Autodetect {
	return &Autodetect{Candidates: slices.Clone(candidates), lookup: lookup}
}

// DefaultAutodetectCandidates is Ironic's autodetect_deploy_interfaces
// default: ramdisk, bootc, direct.
func DefaultAutodetectCandidates() []string { return []string{RamdiskName, "bootc", Name} }

// Detect returns the deploy interface for the node's instance: the first
// candidate whose implementation supports it, else the last candidate.
// Candidates that are not registered are skipped; none registered is an
// error naming the node.
func (a *Autodetect) Detect(t *driver.Task) (string, error) {
	last := ""
	for _, name := range a.Candidates {
		impl := a.lookup(name)
		if impl == nil {
			continue
		}
		last = name
		if s, ok := impl.(InstanceSupporter); ok && s.SupportsInstance(t) {
			return name, nil
		}
	}
	if last == "" {
		return "", &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: AutodetectName, Field: "configuration", Key: "autodetect_deploy_interfaces",
			Expected: fmt.Sprintf("at least one enabled deploy interface among %v", a.Candidates)}
	}
	return last, nil
}

func (a *Autodetect) notSwitched(t *driver.Task) error {
	return fmt.Errorf("node %s: the autodetect deploy interface did not switch to a concrete interface (one of %v)", t.NodeUUID, a.Candidates)
}

// Properties returns nothing.
func (*Autodetect) Properties() []driver.Property { return nil }

// Validate validates with the interface Detect picks.
func (a *Autodetect) Validate(ctx context.Context, t *driver.Task) error {
	name, err := a.Detect(t)
	if err != nil {
		return err
	}
	dep, ok := a.lookup(name).(driver.DeployInterface)
	if !ok {
		return a.notSwitched(t)
	}
	return dep.Validate(ctx, t)
}

// Prepare refuses: the node should have switched.
func (a *Autodetect) Prepare(_ context.Context, t *driver.Task) error { return a.notSwitched(t) }

// Deploy refuses: the node should have switched.
func (a *Autodetect) Deploy(_ context.Context, t *driver.Task) (driver.StepResult, error) {
	return driver.StepResult{}, a.notSwitched(t)
}

// TearDown has nothing to tear down.
func (*Autodetect) TearDown(context.Context, *driver.Task) error { return nil }

// CleanUp has nothing to clean up.
func (*Autodetect) CleanUp(context.Context, *driver.Task) error { return nil }

// TakeOver has nothing to re-establish.
func (*Autodetect) TakeOver(context.Context, *driver.Task) error { return nil }

// Interface guards.
var (
	_ driver.DeployInterface = (*Ramdisk)(nil)
	_ driver.StepRunner      = (*Ramdisk)(nil)
	_ driver.DeployInterface = (*Autodetect)(nil)
	_ InstanceSupporter      = (*Ramdisk)(nil)
)
