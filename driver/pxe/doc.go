// Package pxe implements the network boot interfaces pxe, ipxe, http and
// http-ipxe (Ironic's names) as driver.BootInterface implementations that
// run in the embedding process: instead of writing files for an outside
// TFTP server, they write each node's boot configuration (a
// netboot.Config) into a netboot.ConfigStore, which Anvil's boot server
// (package netboot) serves by MAC address.
//
// What each call writes:
//
//	PrepareRamdisk   Action Ramdisk: the deploy kernel and ramdisk (the
//	                 rescue ones while rescuing), kernel_append_params then
//	                 the conductor's parameters; then a one-time network
//	                 boot through the node's management interface
//	CleanUpRamdisk   the ramdisk configuration removed
//	PrepareInstance  Action LocalDisk (a machine that still boots from the
//	                 network is sent to its disk), or for a ramdisk deploy
//	                 (deploy interface "ramdisk") the instance's kernel and
//	                 ramdisk, with a persistent network boot
//	CleanUpInstance  the instance configuration removed
//
// The interfaces keep no state of their own: which configuration they
// last wrote is in driver_internal_info (InternalConfigKey), so that the
// end of a deploy (the conductor's tear_down_agent cleans up the ramdisk
// after prepare_instance_boot wrote the local boot) leaves the local boot
// in place.
//
// PrepareRamdisk sets the boot device itself, as Ironic's boot interfaces
// do: it reaches the node's management interface through
// driver.Task.Driver, which the conductor binds before each call, so
// these interfaces work only in the process that composes the drivers
// (never inside a plugin).
//
// # Usage
//
//	var configs netboot.ConfigStore = ... // the boot server's store
//	boot := pxe.New(configs, pxe.Options{
//		DeployKernel:  "http://192.0.2.1:8080/images/ipa.kernel",
//		DeployRamdisk: "http://192.0.2.1:8080/images/ipa.initramfs",
//	})
//	reg.MustRegister(boot.Bundle()) // pxe, ipxe, http, http-ipxe
//	// enroll nodes of hardware type ipmi, redfish or manual-management
//	// with boot_interface "ipxe" (their default) or "pxe", ...
package pxe
