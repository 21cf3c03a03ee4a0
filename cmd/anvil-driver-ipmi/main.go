// Command anvil-driver-ipmi is the ipmi driver plugin (package
// ipmiplugin) under the name anvild's plugin host looks for, so that
//
//	go install github.com/anvilmetal/anvil/cmd/...
//
// puts it beside anvild, in the directory anvild searches by default.
package main

import "github.com/anvilmetal/anvil/plugins/ipmi/ipmiplugin"

func main() { ipmiplugin.Main() }
