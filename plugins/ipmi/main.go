// Command anvil-driver-ipmi serves Anvil's ipmi hardware type as a driver
// plugin: the ipmitool power, management and vendor implementations,
// named as Ironic names them, driving BMCs through package ipmitool (the
// ipmitool program).
//
// Build it into a plugin directory under the name the host looks for:
//
//	go build -o /var/lib/anvil/plugins/anvil-driver-ipmi ./plugins/ipmi
//
// It needs the ipmitool program. When ipmitool is missing the plugin still
// starts and describes itself with every implementation marked unavailable
// and the reason (the host's plugin status and discovery report show it),
// logs the reason once, and every Validate and call fails with an error
// matching driver.ErrUnavailable: "ipmitool is not installed (install the
// ipmitool package)", so the node's validation says why. It logs hclog JSON on
// stderr (never passwords) and never writes to stdout. README.md beside
// this file lists the driver_info properties.
package main

import (
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
)

// version is the plugin's own version.
const version = "1.0.0"

func main() {
	logger := hclog.New(&hclog.LoggerOptions{Name: "ipmi", Level: hclog.Info, JSONFormat: true, Output: os.Stderr})
	d := ipmitool.NewDrivers(ipmitool.Options{IpmitoolPath: os.Getenv("ANVIL_IPMITOOL_PATH")})
	if err := d.Unavailable(); err != nil {
		logger.Warn("the ipmi hardware type is unavailable on this host", "reason", err.Error())
	}
	plugin.Serve(plugin.ServeConfig{Name: "ipmi", Version: version, Bundle: d.Bundle(), Logger: logger})
}
