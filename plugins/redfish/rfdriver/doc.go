// Package rfdriver is the Redfish client layer of the redfish hardware
// type: driver_info parsing as Ironic names it, and the operations the
// redfish interfaces need (power, boot override, secure boot, indicator,
// virtual media, inspection, BIOS, RAID volumes and firmware updates),
// built on github.com/stmcginnis/gofish.
//
// It handles what users of BMC libraries keep running into:
//
//   - One Redfish session per BMC and credentials, shared by all nodes on
//     it through a Pool, reused across calls and logged out by Pool.Close
//     (BMCs have few session slots). The system is not part of the
//     connection: Conn.System resolves each node's own redfish_system_id
//     (a path or an Id, or the only system) on every call, so several
//     nodes behind one address never drive each other's systems.
//   - The machine's identity (the system's UUID) is recorded for the node
//     at first contact and every action checks it (driver.CheckIdentity):
//     a BMC that later reports another machine gets nothing sent to it.
//   - redfish_auth_type auto uses a session only when the service root
//     offers one, and falls back to HTTP Basic when the session login is
//     refused; only a refusal of Basic too is bad credentials
//     (driver.BMCAuthError).
//   - A 401 on a session token triggers one transparent re-login; several
//     callers hitting the same expired session log in once.
//   - A per-BMC concurrency limit (Options.MaxConcurrentPerBMC) and
//     exponential backoff with jitter on 5xx answers and connection errors
//     (honouring Retry-After), so a power sync cannot flood a BMC.
//   - Tolerant decoding: the ComputerSystem and inventory resources are read
//     as generic JSON with typed getters, so a malformed vendor field
//     degrades one property (reported in Inventory.Warnings) instead of
//     failing the whole call.
//   - A per-request timeout (Options.CallTimeout) inside the caller's
//     context; gofish's own client binds a context at connect time, so
//     this package gives gofish a per-call common.Client instead.
//
// On top of the client layer, Drivers provides the package driver
// implementations of the redfish hardware type (HardwareTypeDef): power
// "redfish" (reset types chosen from those the system advertises, then a
// wait for the new state), management "redfish" (boot device once or
// persistent, boot mode, secure boot, indicator, NMI), boot
// "redfish-virtual-media" (the deploy ISO fetched within
// Options.MaxDeployISOSize and re-mastered by Remaster into a per-node ISO
// whose grub and isolinux kernel lines carry the node's ramdisk
// parameters, published through Options.Media and inserted in the CD,
// one-time boot from CD; with config_via_removable also an ir-vfd-dev
// parameters image in the virtual USB stick or floppy), inspect "redfish"
// (Ironic's memory_mb, cpus, cpu_arch, local_gb, boot_mode capability and a port per enabled NIC), and bios,
// raid and firmware "redfish" with out-of-band steps (priority 0, no
// ramdisk): bios.apply_configuration, bios.factory_reset,
// raid.create_configuration, raid.delete_configuration and
// firmware.update; vendor "redfish" offers eject_vmedia. Drivers.Bundle
// is what the plugin binary serves.
//
// Passwords never appear in errors or logs: the parameter errors name
// keys, not values; Info.String hides the password; addresses with credentials in
// the URL are refused.
//
// # Usage
//
//	info, err := rfdriver.ParseInfo(driver.ReadDriverInfo(task, driver.KindPower, rfdriver.ImplRedfish))
//	if err != nil { ... } // *driver.MissingParameterError or *driver.InvalidParameterError
//	pool := rfdriver.NewPool(rfdriver.Options{})
//	defer pool.Close(context.Background())
//	conn, err := pool.Conn(info)
//	sys, err := conn.System(ctx, info.SystemID)
//	state, err := sys.PowerState()        // "On" or "Off"
//	used, err := sys.Reset("On", "ForceOn") // first one the BMC advertises
//
// In process, as package driver implementations:
//
//	d := rfdriver.NewDrivers(rfdriver.Options{})
//	defer d.Close(ctx) // logs every session out
//	err := registry.Register(d.Bundle())
package rfdriver
