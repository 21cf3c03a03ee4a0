// Command anvil-driver-ipmi serves Anvil's ipmi hardware type as a driver
// plugin (package ipmiplugin has the program and its documentation).
// go install github.com/anvilmetal/anvil/cmd/anvil-driver-ipmi installs the
// same program under the name the plugin host looks for; here it is built
// with an explicit name:
//
//	go build -o /var/lib/anvil/plugins/anvil-driver-ipmi ./plugins/ipmi
package main

import "github.com/anvilmetal/anvil/plugins/ipmi/ipmiplugin"

// Aliases kept for this package's tests.
const (
	envRetryTimeout       = ipmiplugin.EnvRetryTimeout
	envMinCommandInterval = ipmiplugin.EnvMinCommandInterval
)

var options = ipmiplugin.OptionsFromEnv

func main() { ipmiplugin.Main() }
