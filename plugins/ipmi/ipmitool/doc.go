// Package ipmitool is the IPMI client layer of the ipmi hardware type:
// driver_info parsing as Ironic names it (ipmi_address, ipmi_port,
// ipmi_username, ipmi_password, ipmi_priv_level, ipmi_protocol_version,
// ipmi_cipher_suite, ipmi_terminal_port) and the BMC operations the
// ipmitool power, management and vendor interfaces need.
//
// Power control, boot device, NMI and BMC reset go through bmclib's
// ipmitool provider (github.com/bmc-toolbox/bmclib/v2) when the session is
// one bmclib expresses (IPMI 2.0 at ADMINISTRATOR privilege); sessions
// with another privilege level or IPMI 1.5, and the commands bmclib lacks
// (boot flags read-back, sensor data, raw requests), run the ipmitool
// binary directly with equivalent arguments. Either way the password
// travels in ipmitool's environment (-E), never on its command line, and
// is scrubbed from any output quoted in an error.
//
// When ipmitool is not installed, New fails with an error wrapping
// ErrNotInstalled that says what to install, so the plugin can report the
// hardware type unavailable with that reason.
//
// Power changes wait until the BMC reports the requested state, polling
// every Options.PollInterval up to Options.PowerTimeout (Ironic's
// power_state_change_timeout, 60 s). Reboot is power off then power on,
// as in Ironic's driver.
//
// Drivers provides the package driver implementations of the ipmi
// hardware type (HardwareTypeDef): power "ipmitool", management
// "ipmitool" (boot device with the UEFI flag taken from the node's boot
// mode, boot device read-back, NMI, sensors, and the out-of-band clean
// step clear_system_event_log) and vendor "ipmitool" (send_raw,
// bmc_reset). Drivers.Bundle is what the plugin binary serves;
// Drivers.Unavailable says why the hardware type cannot work on this host.
//
// # Usage
//
//	info, err := ipmitool.ParseInfo(node.DriverInfo) // *InfoError on bad input
//	if err != nil { ... }
//	c, err := ipmitool.New(info, ipmitool.Options{})
//	if errors.Is(err, ipmitool.ErrNotInstalled) { ... } // unavailable
//	on, err := c.PowerState(ctx)
//	err = c.SetBootDevice(ctx, "pxe", false, true)
//
// In process, as package driver implementations:
//
//	d := ipmitool.NewDrivers(ipmitool.Options{})
//	if err := d.Unavailable(); err != nil { log.Print(err) }
//	err := registry.Register(d.Bundle())
package ipmitool
