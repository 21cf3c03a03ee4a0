// Command anvil-driver-acme is an example third-party driver plugin: it
// serves the "acme" hardware type (package acme) to an Anvil host. See
// README.md for how to build it and point Anvil at it.
package main

import (
	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/examples/vendor-plugin/acme"
)

func main() {
	plugin.Serve(plugin.ServeConfig{Name: "acme", Version: "0.1.0", Bundle: acme.Bundle()})
}
