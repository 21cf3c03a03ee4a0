// Package ipmisol is the ipmitool-socat console interface of the ipmi
// hardware type: a node's serial console over IPMI serial-over-LAN,
// reached as a raw TCP port on the conductor host (and, through the
// console.Manager, as a WebSocket and a browser page), as Ironic's
// socat console is.
//
// It runs in the process that owns the console.Manager, not in the ipmi
// plugin: a console is a long-running "ipmitool sol activate" under a
// pseudo-terminal and a listening port, which a stateless plugin call
// cannot own. The plugin declares the hardware type (its console list is
// ipmitool-socat, no-console, as Ironic's); this package provides the
// implementation, as driver/pxe provides the boot interfaces.
//
// What each call does:
//
//	Validate      the ipmi_* driver_info (ipmi_terminal_port: an
//	              optional port 1-65535), console_idle_timeout (optional
//	              whole seconds >= 1, overriding Options.IdleTimeout for
//	              the node) and that ipmitool is installed; no BMC
//	              contact
//	StartConsole  negotiates the cipher suite when ipmi_cipher_suite is
//	              unset (ipmi_sim has only suite 3), then Manager.Start
//	              with "sol deactivate" before and "sol activate" as the
//	              console, ready on "[SOL Session operational", the
//	              password in the environment (IPMITOOL_PASSWORD, -E) and
//	              in Spec.Secrets; records the address in
//	              driver_internal_info (InternalAddress, and
//	              InternalAllocatedPort when the port was not configured)
//	StopConsole   Manager.Stop, then "sol deactivate", and removes the
//	              recorded address
//	GetConsole    {"type": "socat", "url": "tcp://host:port"}, from the
//	              Manager or from driver_internal_info
//
// The ipmi hardware type's nodes keep no-console as their default until
// the embedder enables ipmitool-socat by name (Ironic's
// enabled_console_interfaces defaults to no-console), and a node opts in
// with console_interface "ipmitool-socat".
//
// Ironic has no serial console for the redfish hardware type (its only
// redfish console is the graphical one), so this package has no
// counterpart there.
//
// ipmitool's escape character stays "~": a client typing "~." at the
// start of a line ends the ipmitool process, which the Manager restarts.
//
// # Usage
//
//	m := console.NewManager(console.Options{PortRange: [2]int{10000, 20000}})
//	defer m.Close()
//	reg := driver.NewRegistry(driver.Config{
//		EnabledHardwareTypes: []string{"ipmi"},
//		EnabledInterfaces: map[driver.Kind][]string{
//			driver.KindConsole: {ipmisol.Name, driver.NoConsole},
//		},
//	})
//	reg.MustRegister(builtin.Bundle(fake.Config{}))                  // no-console, ...
//	reg.MustRegister(ipmitool.NewDrivers(ipmitool.Options{}).Bundle()) // or the ipmi plugin
//	reg.MustRegister(ipmisol.New(m, ipmisol.Options{}).Bundle())
//	// a node with console_interface "ipmitool-socat": the conductor calls
//	// StartConsole when its console is enabled; GetConsole answers
//	// tcp://127.0.0.1:<port>; m.Handler() serves the WebSocket and page.
package ipmisol
