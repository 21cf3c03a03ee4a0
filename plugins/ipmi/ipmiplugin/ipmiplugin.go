// Package ipmiplugin is the anvil-driver-ipmi plugin's program, shared by
// cmd/anvil-driver-ipmi (what go install installs beside anvild) and
// plugins/ipmi. It serves Anvil's ipmi hardware type as a driver
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
//
// Ironic's [ipmi] retry settings are read from the environment, in seconds
// (as Ironic's options) or as Go durations ("1500ms"):
// ANVIL_IPMI_COMMAND_RETRY_TIMEOUT (command_retry_timeout, default 60) bounds
// the attempts of one operation on a BMC that does not answer or answers
// busy, and ANVIL_IPMI_MIN_COMMAND_INTERVAL (min_command_interval, default
// 5) spaces them. A value that is not a positive duration is reported in
// the log and the default is used.
package ipmiplugin

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
)

// Version is the plugin's own version.
const Version = "1.0.0"

// Main is the plugin's main function: it serves the ipmi hardware type to
// the host that started the process and returns when the host is done.
func Main() {
	logger := hclog.New(&hclog.LoggerOptions{Name: "ipmi", Level: hclog.Info, JSONFormat: true, Output: os.Stderr})
	opts, warnings := OptionsFromEnv(os.Getenv)
	for _, w := range warnings {
		logger.Warn("ignoring a setting", "reason", w)
	}
	d := ipmitool.NewDrivers(opts)
	if err := d.Unavailable(); err != nil {
		logger.Warn("the ipmi hardware type is unavailable on this host", "reason", err.Error())
	}
	plugin.Serve(plugin.ServeConfig{Name: "ipmi", Version: Version, Bundle: d.Bundle(), Logger: logger})
}

// Environment variables holding Ironic's [ipmi] retry settings.
const (
	EnvRetryTimeout       = "ANVIL_IPMI_COMMAND_RETRY_TIMEOUT"
	EnvMinCommandInterval = "ANVIL_IPMI_MIN_COMMAND_INTERVAL"
)

// OptionsFromEnv builds the client options from the environment, with a
// warning for each value it could not use.
func OptionsFromEnv(getenv func(string) string) (ipmitool.Options, []string) {
	opts := ipmitool.Options{IpmitoolPath: getenv("ANVIL_IPMITOOL_PATH")}
	var warnings []string
	for _, v := range []struct {
		name string
		dst  *time.Duration
	}{{EnvRetryTimeout, &opts.RetryTimeout}, {EnvMinCommandInterval, &opts.MinCommandInterval}} {
		raw := getenv(v.name)
		if raw == "" {
			continue
		}
		d, err := time.ParseDuration(raw)
		if n, nerr := strconv.Atoi(raw); nerr == nil {
			d, err = time.Duration(n)*time.Second, nil
		}
		if err != nil || d <= 0 {
			warnings = append(warnings, fmt.Sprintf("%s=%q is not a positive number of seconds or duration; using the default", v.name, raw))
			continue
		}
		*v.dst = d
	}
	return opts, warnings
}
