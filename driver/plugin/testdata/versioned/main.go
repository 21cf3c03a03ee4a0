// Command versioned is a test plugin that serves the built-in fake
// implementations under the protocol versions set at link time, e.g.
//
//	go build -ldflags "-X main.name=old -X main.protocolVersions=1" ./driver/plugin/testdata/versioned
package main

import (
	"strconv"
	"strings"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/plugin"
)

// Set with -ldflags -X.
var (
	name             = "versioned"
	protocolVersions = "2,1"
)

func main() {
	var versions []int
	for _, s := range strings.Split(protocolVersions, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			panic("bad protocolVersions: " + protocolVersions)
		}
		versions = append(versions, v)
	}
	plugin.Serve(plugin.ServeConfig{Name: name, Version: "0.0.1", Bundle: driver.Builtins(driver.FakeConfig{}), ProtocolVersions: versions})
}
