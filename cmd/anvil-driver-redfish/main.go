// Command anvil-driver-redfish is the redfish driver plugin (package
// rfplugin) under the name anvild's plugin host looks for, so that
//
//	go install github.com/anvilmetal/anvil/cmd/...
//
// puts it beside anvild, in the directory anvild searches by default.
package main

import "github.com/anvilmetal/anvil/plugins/redfish/rfplugin"

func main() { rfplugin.Main() }
