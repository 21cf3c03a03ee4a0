// Command anvil-driver-redfish serves Anvil's redfish hardware type as a
// driver plugin (package rfplugin has the program and its documentation).
// go install github.com/anvilmetal/anvil/cmd/anvil-driver-redfish installs
// the same program under the name the plugin host looks for; here it is
// built with an explicit name:
//
//	go build -o /var/lib/anvil/plugins/anvil-driver-redfish ./plugins/redfish
package main

import "github.com/anvilmetal/anvil/plugins/redfish/rfplugin"

func main() { rfplugin.Main() }
