// Package builtin holds the built-in hardware types, fake-hardware and
// manual-management, and Bundle, which registers them with every fake
// (package driver/fake) and no-op (package driver/noop) implementation:
//
//	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
//	reg.MustRegister(builtin.Bundle(fake.Config{}))
//
// It is a package of its own because the two hardware types name the
// implementations of both: fake and noop depend only on driver, and driver
// depends on neither (a driver.Registry starts empty and gets the built-ins as a
// value, never from a global).
package builtin

import (
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/noop"
)

// Built-in hardware type names.
const (
	// FakeHardware is Ironic's fake-hardware: a fake implementation of
	// every kind, with compatibility checks skipped.
	FakeHardware = "fake-hardware"
	// ManualManagement is Ironic's manual-management: for machines whose
	// power and boot a human (or the agent) handles.
	ManualManagement = "manual-management"
)

// FakeHardwareType returns the fake-hardware hardware type.
func FakeHardwareType() driver.HardwareType {
	return driver.HardwareType{
		Name: FakeHardware,
		Supported: map[driver.Kind][]string{
			driver.KindBIOS:       {fake.Name, driver.NoBIOS},
			driver.KindBoot:       {fake.Name},
			driver.KindConsole:    {fake.Name, driver.NoConsole},
			driver.KindDeploy:     {fake.Name},
			driver.KindFirmware:   {fake.Name, driver.NoFirmware},
			driver.KindInspect:    {fake.Name, driver.NoInspect},
			driver.KindManagement: {fake.Name},
			// Ironic's fake-hardware supports flat first (its default
			// when enabled); Anvil keeps noop first so that a library
			// caller enabling every implementation gets noop, as before.
			driver.KindNetwork: {driver.Noop, fake.Name, driver.Flat},
			driver.KindPower:   {fake.Name},
			driver.KindRAID:    {fake.Name, driver.NoRAID},
			driver.KindRescue:  {fake.Name, driver.NoRescue},
			driver.KindStorage: {driver.Noop, fake.Name},
			driver.KindVendor:  {fake.Name, driver.NoVendor},
		},
		SkipCompatibilityCheck: true,
	}
}

// ManualManagementType returns the manual-management hardware type with
// Ironic's generic lists: its boot implementations (ipxe, pxe, ...) and
// the "agent" power and deploy implementations are provided by other
// packages or plugins, and are skipped by the defaults until registered.
func ManualManagementType() driver.HardwareType {
	return driver.HardwareType{
		Name: ManualManagement,
		Supported: map[driver.Kind][]string{
			driver.KindBoot:       {"ipxe", "pxe", "http-ipxe", "http"},
			driver.KindDeploy:     {"autodetect", "direct", "ansible", "ramdisk", "anaconda", "bootc", "custom-agent", driver.Noop},
			driver.KindInspect:    {"agent", driver.NoInspect},
			driver.KindManagement: {driver.Noop, fake.Name},
			driver.KindNetwork:    {driver.Flat, "neutron", "ironic-networking", driver.Noop},
			driver.KindPower:      {"agent", fake.Name},
			driver.KindRAID:       {driver.NoRAID, "agent"},
			driver.KindRescue:     {driver.NoRescue, "agent"},
			driver.KindStorage:    {driver.Noop, "cinder", "external"},
			driver.KindFirmware:   {driver.NoFirmware},
			driver.KindConsole:    {driver.NoConsole, "fake-graphical"},
			driver.KindVendor:     {driver.NoVendor},
		},
	}
}

// Bundle returns the built-in hardware types (fake-hardware,
// manual-management) and implementations: fake of every kind configured by
// cfg, the no-op ones (no-bios, no-console, no-firmware, no-inspect,
// no-raid, no-rescue, no-vendor) and noop network, storage, management and
// deploy. Register it with driver.Registry.Register.
func Bundle(cfg fake.Config) driver.Bundle {
	if cfg.BMCs == nil {
		// One set of simulated BMCs for the whole bundle, so a node's
		// power and management calls queue at the same BMC.
		cfg.BMCs = fake.NewBMCs()
	}
	return driver.Bundle{
		HardwareTypes: []driver.HardwareType{FakeHardwareType(), ManualManagementType()},
		Implementations: []driver.Implementation{
			{Kind: driver.KindBIOS, Name: fake.Name, Impl: fake.NewBIOS(cfg)},
			{Kind: driver.KindBoot, Name: fake.Name, Impl: fake.NewBoot(cfg)},
			{Kind: driver.KindConsole, Name: fake.Name, Impl: fake.NewConsole(cfg)},
			{Kind: driver.KindDeploy, Name: fake.Name, Impl: fake.NewDeploy(cfg)},
			{Kind: driver.KindFirmware, Name: fake.Name, Impl: fake.NewFirmware(cfg)},
			{Kind: driver.KindInspect, Name: fake.Name, Impl: fake.NewInspect(cfg)},
			{Kind: driver.KindManagement, Name: fake.Name, Impl: fake.NewManagement(cfg)},
			{Kind: driver.KindNetwork, Name: fake.Name, Impl: fake.NewNetwork(cfg)},
			{Kind: driver.KindPower, Name: fake.Name, Impl: fake.NewPower(cfg)},
			{Kind: driver.KindRAID, Name: fake.Name, Impl: fake.NewRAID(cfg)},
			{Kind: driver.KindRescue, Name: fake.Name, Impl: fake.NewRescue(cfg)},
			{Kind: driver.KindStorage, Name: fake.Name, Impl: fake.NewStorage(cfg)},
			{Kind: driver.KindVendor, Name: fake.Name, Impl: fake.NewVendor(cfg)},
			{Kind: driver.KindBIOS, Name: driver.NoBIOS, Impl: noop.NewBIOS()},
			{Kind: driver.KindConsole, Name: driver.NoConsole, Impl: noop.NewConsole()},
			{Kind: driver.KindFirmware, Name: driver.NoFirmware, Impl: noop.NewFirmware()},
			{Kind: driver.KindInspect, Name: driver.NoInspect, Impl: noop.NewInspect()},
			{Kind: driver.KindRAID, Name: driver.NoRAID, Impl: noop.NewRAID()},
			{Kind: driver.KindRescue, Name: driver.NoRescue, Impl: noop.NewRescue()},
			{Kind: driver.KindVendor, Name: driver.NoVendor, Impl: noop.NewVendor()},
			{Kind: driver.KindNetwork, Name: driver.Noop, Impl: noop.Network{}},
			{Kind: driver.KindNetwork, Name: driver.Flat, Impl: noop.FlatNetwork{}},
			{Kind: driver.KindStorage, Name: driver.Noop, Impl: noop.Storage{}},
			{Kind: driver.KindManagement, Name: driver.Noop, Impl: noop.Management{}},
			{Kind: driver.KindDeploy, Name: driver.Noop, Impl: noop.Deploy{}},
		},
	}
}
