package driver

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
func FakeHardwareType() HardwareType {
	return HardwareType{
		Name: FakeHardware,
		Supported: map[Kind][]string{
			KindBIOS:       {Fake, NoBIOS},
			KindBoot:       {Fake},
			KindConsole:    {Fake, NoConsole},
			KindDeploy:     {Fake},
			KindFirmware:   {Fake, NoFirmware},
			KindInspect:    {Fake, NoInspect},
			KindManagement: {Fake},
			KindNetwork:    {Noop, Fake},
			KindPower:      {Fake},
			KindRAID:       {Fake, NoRAID},
			KindRescue:     {Fake, NoRescue},
			KindStorage:    {Noop, Fake},
			KindVendor:     {Fake, NoVendor},
		},
		SkipCompatibilityCheck: true,
	}
}

// ManualManagementType returns the manual-management hardware type with
// Ironic's generic lists: its boot implementations (ipxe, pxe, ...) and
// the "agent" power and deploy implementations are provided by other
// packages or plugins, and are skipped by the defaults until registered.
func ManualManagementType() HardwareType {
	return HardwareType{
		Name: ManualManagement,
		Supported: map[Kind][]string{
			KindBoot:       {"ipxe", "pxe", "http-ipxe", "http"},
			KindDeploy:     {"autodetect", "direct", "ansible", "ramdisk", "anaconda", "bootc", "custom-agent", Noop},
			KindInspect:    {"agent", NoInspect},
			KindManagement: {Noop, Fake},
			KindNetwork:    {"flat", "neutron", "ironic-networking", Noop},
			KindPower:      {"agent", Fake},
			KindRAID:       {NoRAID, "agent"},
			KindRescue:     {NoRescue, "agent"},
			KindStorage:    {Noop, "cinder", "external"},
			KindFirmware:   {NoFirmware},
			KindConsole:    {NoConsole, "fake-graphical"},
			KindVendor:     {NoVendor},
		},
	}
}

// Builtins returns the built-in hardware types (fake-hardware,
// manual-management) and implementations: fake of every kind configured by
// fake, the no-op ones (no-bios, no-console, no-firmware, no-inspect,
// no-raid, no-rescue, no-vendor) and noop network, storage, management and
// deploy. Register it with Registry.Register.
func Builtins(fake FakeConfig) Bundle {
	return Bundle{
		HardwareTypes: []HardwareType{FakeHardwareType(), ManualManagementType()},
		Implementations: []Implementation{
			{KindBIOS, Fake, NewFakeBIOS(fake)},
			{KindBoot, Fake, NewFakeBoot(fake)},
			{KindConsole, Fake, NewFakeConsole(fake)},
			{KindDeploy, Fake, NewFakeDeploy(fake)},
			{KindFirmware, Fake, NewFakeFirmware(fake)},
			{KindInspect, Fake, NewFakeInspect(fake)},
			{KindManagement, Fake, NewFakeManagement(fake)},
			{KindNetwork, Fake, NewFakeNetwork(fake)},
			{KindPower, Fake, NewFakePower(fake)},
			{KindRAID, Fake, NewFakeRAID(fake)},
			{KindRescue, Fake, NewFakeRescue(fake)},
			{KindStorage, Fake, NewFakeStorage(fake)},
			{KindVendor, Fake, NewFakeVendor(fake)},
			{KindBIOS, NoBIOS, NewNoBIOS()},
			{KindConsole, NoConsole, NewNoConsole()},
			{KindFirmware, NoFirmware, NewNoFirmware()},
			{KindInspect, NoInspect, NewNoInspect()},
			{KindRAID, NoRAID, NewNoRAID()},
			{KindRescue, NoRescue, NewNoRescue()},
			{KindVendor, NoVendor, NewNoVendor()},
			{KindNetwork, Noop, NoopNetwork{}},
			{KindStorage, Noop, NoopStorage{}},
			{KindManagement, Noop, NoopManagement{}},
			{KindDeploy, Noop, NoopDeploy{}},
		},
	}
}
