package driver

import (
	"context"
	"fmt"

	"github.com/anvilmetal/anvil/steps"
)

// Driver is a node's composed driver: one implementation per kind, as the
// registry resolved them. Built-in and plugin implementations look the same
// here. A Driver is immutable and safe for concurrent use as far as its
// implementations are.
type Driver struct {
	// HardwareType is the node's hardware type.
	HardwareType string
	// Names holds the resolved implementation name per kind.
	Names map[Kind]string
	impls map[Kind]Interface
}

// NewDriver composes a Driver by hand, for tests and tools that bypass a
// Registry. impls must hold an implementation of the matching Go interface
// for each kind it lists.
func NewDriver(hardwareType string, impls map[Kind]Implementation) (*Driver, error) {
	d := &Driver{HardwareType: hardwareType, Names: map[Kind]string{}, impls: map[Kind]Interface{}}
	for k, i := range impls {
		if !kindMatches(k, i.Impl) {
			return nil, fmt.Errorf("driver: %w: %s/%s (%T) does not implement the %s interface", ErrInvalidParameter, k, i.Name, i.Impl, k)
		}
		d.Names[k] = i.Name
		d.impls[k] = i.Impl
	}
	return d, nil
}

// Interface returns the implementation of kind, or nil when none resolved.
func (d *Driver) Interface(kind Kind) Interface { return d.impls[kind] }

// Power returns the power interface (nil if absent).
func (d *Driver) Power() PowerInterface { p, _ := d.impls[KindPower].(PowerInterface); return p }

// Management returns the management interface (nil if absent).
func (d *Driver) Management() ManagementInterface {
	m, _ := d.impls[KindManagement].(ManagementInterface)
	return m
}

// Boot returns the boot interface (nil if absent).
func (d *Driver) Boot() BootInterface { b, _ := d.impls[KindBoot].(BootInterface); return b }

// Deploy returns the deploy interface (nil if absent).
func (d *Driver) Deploy() DeployInterface { x, _ := d.impls[KindDeploy].(DeployInterface); return x }

// Inspect returns the inspect interface (nil if absent).
func (d *Driver) Inspect() InspectInterface {
	x, _ := d.impls[KindInspect].(InspectInterface)
	return x
}

// BIOS returns the bios interface (nil if absent).
func (d *Driver) BIOS() BIOSInterface { x, _ := d.impls[KindBIOS].(BIOSInterface); return x }

// RAID returns the raid interface (nil if absent).
func (d *Driver) RAID() RAIDInterface { x, _ := d.impls[KindRAID].(RAIDInterface); return x }

// Console returns the console interface (nil if absent).
func (d *Driver) Console() ConsoleInterface {
	x, _ := d.impls[KindConsole].(ConsoleInterface)
	return x
}

// Vendor returns the vendor interface (nil if absent).
func (d *Driver) Vendor() VendorInterface { x, _ := d.impls[KindVendor].(VendorInterface); return x }

// Rescue returns the rescue interface (nil if absent).
func (d *Driver) Rescue() RescueInterface { x, _ := d.impls[KindRescue].(RescueInterface); return x }

// Firmware returns the firmware interface (nil if absent).
func (d *Driver) Firmware() FirmwareInterface {
	x, _ := d.impls[KindFirmware].(FirmwareInterface)
	return x
}

// Network returns the network interface (nil if absent).
func (d *Driver) Network() NetworkInterface {
	x, _ := d.impls[KindNetwork].(NetworkInterface)
	return x
}

// Storage returns the storage interface (nil if absent).
func (d *Driver) Storage() StorageInterface {
	x, _ := d.impls[KindStorage].(StorageInterface)
	return x
}

// Properties returns the union of the driver_info properties of every
// interface, first occurrence wins, in kind order.
func (d *Driver) Properties() []Property {
	var out []Property
	seen := map[string]bool{}
	for _, k := range Kinds() {
		i := d.impls[k]
		if i == nil {
			continue
		}
		for _, p := range i.Properties() {
			if !seen[p.Name] {
				seen[p.Name] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// Validate runs every interface's Validate (as Ironic's node validate API
// does) and returns the result per kind; a nil error means valid.
func (d *Driver) Validate(ctx context.Context, t *Task) map[Kind]error {
	out := make(map[Kind]error, len(d.impls))
	for _, k := range Kinds() {
		if i := d.impls[k]; i != nil {
			out[k] = i.Validate(ctx, t)
		}
	}
	return out
}

// Steps returns the steps of kind from every interface that provides
// steps, in kind order, each with Interface set to its kind. Ordering and
// filtering are the steps planner's job.
func (d *Driver) Steps(kind steps.Kind) []steps.Step {
	var out []steps.Step
	for _, k := range Kinds() {
		sp, ok := As[StepProvider](d.impls[k])
		if !ok {
			continue
		}
		for _, s := range sp.Steps(kind) {
			s.Interface = string(k)
			out = append(out, s)
		}
	}
	return out
}

// ExecuteStep runs step on the interface named by step.Interface. It fails
// with a *StepNotFoundError when that interface has no such step.
func (d *Driver) ExecuteStep(ctx context.Context, t *Task, kind steps.Kind, step steps.Step) (StepResult, error) {
	k := Kind(step.Interface)
	impl := d.impls[k]
	notFound := &StepNotFoundError{Kind: k, Impl: d.Names[k], StepKind: string(kind), Step: step.Name}
	if impl == nil {
		return StepResult{}, notFound
	}
	if !HasStep(impl, kind, step.Name) {
		return StepResult{}, notFound
	}
	runner, ok := As[StepRunner](impl)
	if !ok {
		return StepResult{}, notFound
	}
	return runner.ExecuteStep(ctx, t, kind, step)
}

// HasStep reports whether impl declares a step called name of kind.
func HasStep(impl Interface, kind steps.Kind, name string) bool {
	sp, ok := As[StepProvider](impl)
	if !ok {
		return false
	}
	for _, s := range sp.Steps(kind) {
		if s.Name == name {
			return true
		}
	}
	return false
}
