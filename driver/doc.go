// Package driver composes the driver of a bare-metal node from per-kind
// interface implementations, the way OpenStack Ironic composes hardware
// types and hardware interfaces.
//
// A node's driver is made of one implementation for each of the 13
// interface kinds (Kind): bios, boot, console, deploy, firmware, inspect,
// management, network, power, raid, rescue, storage and vendor. Each kind
// has a small Go interface (PowerInterface, DeployInterface, ...) whose
// methods take a context.Context and a *Task: the node's identity and the
// parts a driver may read (driver_info, driver_internal_info,
// instance_info, properties, ports). A driver never touches a database; it
// records what it changes on the Task (SetDriverInternalInfo, SetProperty,
// AddPort, ...) and the caller persists Task.Changes(). This is what makes
// out-of-process plugins (package driver/plugin) stateless: every call
// carries the Task and returns the Changes.
//
// The conductor binds the node's composed Driver to each Task it hands an
// implementation (Task.Driver, Ironic's task.driver), so one interface
// can use another: a network boot interface sets the boot device through
// the node's management interface. A Task that crossed the plugin
// boundary has none.
//
// Every implementation describes its driver_info properties and validates
// a node (Interface). Optional capabilities are one-method-set interfaces
// found with As, never with a bare type assertion: StepProvider and
// StepRunner (steps as metadata of type steps.Step, and a way to run
// one), StepPreparer (deploy interfaces that prepare clean/service
// environments), and for management interfaces BootModeManager,
// NMIInjector, IndicatorManager, SecureBootManager, SensorReader
// (typed SensorReading values) and VirtualMediaManager. Any
// implementation may be an AvailabilityReporter: when a prerequisite on
// the host is missing (a tool not installed) Available returns an
// *UnavailableError matching ErrUnavailable, and its calls fail with it,
// instead of failing obscurely. Through a plugin these capabilities are
// carried by protocol version 3, and As answers on a plugin proxy exactly
// as on the implementation in the plugin: a proxy is a CapabilityProvider,
// so that one Go type serves every combination of capabilities.
//
// A HardwareType is data: a name and, per kind, the ordered list of
// implementation names it supports. A Registry holds hardware types and
// implementations, built-in and from plugins side by side, together with
// the enabled lists and defaults of a Config, and applies Ironic's rules:
//
//   - an empty enabled list for a kind is computed from the first supported
//     (registered) implementation of each enabled hardware type;
//   - the default for a node is default_<kind>_interface when configured,
//     else the first supported implementation that is enabled;
//   - instance_info["<kind>_interface"] overrides the node's field;
//   - errors are typed and say what is wrong: *HardwareTypeNotFoundError,
//     *InterfaceNotFoundError (listing the valid names),
//     *IncompatibleInterfaceError, *NoValidDefaultError (saying what to
//     enable); they match the sentinels ErrHardwareTypeNotFound and friends
//     with errors.Is;
//   - fake-hardware (HardwareType.SkipCompatibilityCheck) accepts any
//     enabled implementation of any kind.
//
// The built-ins live in their own packages, so that this one is the
// contract alone: package driver/fake has a "fake" implementation of every
// kind (fake.Power, fake.NewPower, fake.Config, ...) whose state lives in
// driver_internal_info and which accepts injected delays and failures;
// package driver/noop has Ironic's no-op implementations (no-bios,
// no-console, ..., failing with *UnsupportedError, and noop network,
// storage, management and deploy, succeeding without effect); package
// driver/builtin has the fake-hardware and manual-management hardware
// types and builtin.Bundle, which holds all of them for Registry.Register.
// The names of the no-op implementations (NoBIOS, Noop, ...) stay here,
// because HardwareType.SupportedFor falls back to them.
//
// # Usage
//
// An embedder builds one registry, registers the built-ins and plugins,
// checks the configuration at start, fills defaults when a node is
// created, and resolves the driver when working on a node:
//
//	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
//	reg.MustRegister(builtin.Bundle(fake.Config{})) // panics on a registration mistake
//	for _, w := range reg.Warnings() {
//		logger.Warn(w.String()) // duplicates in the enabled lists
//	}
//	if err := reg.Check(); err != nil {
//		return err // a conductor refuses to start
//	}
//	ifaces, err := reg.FillDefaults(driver.NodeInterfaces{HardwareType: builtin.FakeHardware})
//	// persist ifaces on the new node ...
//	drv, err := reg.Resolve(driver.NodeInterfaces{Node: uuid, HardwareType: builtin.FakeHardware, Interfaces: ifaces})
//	task := &driver.Task{NodeUUID: uuid, HardwareType: drv.HardwareType, Interfaces: drv.Names, DriverInfo: info}
//	err = drv.Power().SetPowerState(ctx, task, driver.PowerOn, 0)
//	changes := task.Changes() // persist changes.DriverInternalInfo ...
//
// Registration mistakes (an empty or duplicate name, a nil implementation)
// are programming errors: the MustRegister variants panic with a clear
// error at start, while Register, RegisterHardwareType and
// RegisterInterface return it. Duplicate or empty entries in the
// configured enabled lists are ignored and reported by Config.Warnings and
// Registry.Warnings.
//
// See ExampleRegistry_Resolve, ExampleRegistry_MustRegister,
// ExampleNMIInjector and ExampleTask_Changes.
package driver
