package driver

// Names of Ironic's no-op implementations. A hardware type that leaves a
// kind out of HardwareType.Supported supports these (see
// HardwareType.SupportedFor); package driver/noop implements them.
const (
	Noop       = "noop"
	NoBIOS     = "no-bios"
	NoConsole  = "no-console"
	NoFirmware = "no-firmware"
	NoInspect  = "no-inspect"
	NoRAID     = "no-raid"
	NoRescue   = "no-rescue"
	NoVendor   = "no-vendor"
)

// Flat is the name of Ironic's "flat" network implementation (one shared
// network for provisioning and tenants), which package driver/noop
// implements for Anvil, where no Neutron port needs binding.
const Flat = "flat"
