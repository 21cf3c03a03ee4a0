// Command versioned is a test plugin that serves the built-in fake
// implementations under the protocol versions set at link time, e.g.
//
//	go build -ldflags "-X main.name=old -X main.protocolVersions=2" ./driver/plugin/testdata/versioned
package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin"
)

// Set with -ldflags -X.
var (
	name             = "versioned"
	protocolVersions = "3,2"
	// strayStdout, when "1", makes the plugin write to stdout once it is
	// serving, which plugins must not do; the host logs it as a warning.
	strayStdout = ""
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
	if strayStdout == "1" {
		go func() {
			time.Sleep(300 * time.Millisecond) // after Serve took over stdout
			fmt.Println("stray line on stdout")
		}()
	}
	plugin.Serve(plugin.ServeConfig{Name: name, Version: "0.0.1", Bundle: builtin.Bundle(fake.Config{}), ProtocolVersions: versions})
}
