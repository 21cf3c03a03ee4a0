// Package ipmitool is the IPMI client layer of the ipmi hardware type:
// driver_info parsing as Ironic names it (ipmi_address, ipmi_port,
// ipmi_username, ipmi_password, ipmi_priv_level, ipmi_protocol_version,
// ipmi_cipher_suite, ipmi_terminal_port) and the BMC operations the
// ipmitool power, management and vendor interfaces need.
//
// Every operation runs the ipmitool binary, one process per attempt,
// with the password in its environment (-E), never on its command line,
// and scrubbed from any output quoted in an error. (bmclib's ipmitool
// provider, used before, reported only the last cipher suite's output and
// left out -v, so a wrong password read as a cipher mismatch.) ipmitool's
// output is classified (Classify): a refused password or user is a
// CommandError of class FailAuth, which the driver implementations return
// as *driver.BMCAuthError at once; a BMC that never answers (FailNoAnswer)
// or answers busy is tried again, attempts spaced by
// Options.MinCommandInterval (Ironic's [ipmi] min_command_interval, 5 s),
// until Options.RetryTimeout (Ironic's [ipmi] command_retry_timeout,
// 60 s), and then is a *driver.BMCUnreachableError naming the BMC's
// host:port, the attempts and the time spent. (Ironic also spaces separate
// operations on one BMC by min_command_interval; here only the attempts of
// one operation are spaced, and power waits poll every PollInterval.) With
// ipmi_cipher_suite unset
// suite 3 is tried, then 17 when the BMC refuses 3's algorithms.
//
// Power, boot device, NMI, step and vendor actions first read the system
// GUID (Get System GUID), and the power read reads it in the same ipmitool
// session as the state (PowerStateAndGUID); each checks it against the machine
// identity recorded for the node (driver.CheckIdentity, as
// "ipmi-guid:<guid>"; recorded at first contact), so that an action is
// refused with *driver.IdentityMismatchError rather than sent to another
// machine at a reused address. A BMC without Get System GUID reports no
// identity, which is accepted.
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
//	r := driver.ReadDriverInfo(task, driver.KindPower, ipmitool.ImplIPMITool)
//	info, err := ipmitool.ParseInfo(r) // *driver.MissingParameterError or
//	if err != nil { ... }              // *driver.InvalidParameterError
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
