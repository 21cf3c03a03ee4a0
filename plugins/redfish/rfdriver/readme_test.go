package rfdriver

import (
	"flag"
	"testing"

	"github.com/anvilmetal/anvil/driver/drivertest"
)

var update = flag.Bool("update", false, "rewrite ../README.md from the code's descriptions")

const readmeIntro = `# redfish driver plugin

The plugin binary ` + "`anvil-driver-redfish`" + ` serves the ` + "`redfish`" + ` hardware type
of Anvil over the driver plugin protocol. It talks to BMCs with
[gofish](https://github.com/stmcginnis/gofish) through ` + "`rfdriver`" + `, which keeps
one Redfish session per BMC (reused, logged out on exit), logs in again after
a 401, limits concurrent requests per BMC, backs off on 5xx answers, decodes
vendor quirks tolerantly and bounds every request with a timeout.

Build: ` + "`go build -o anvil-driver-redfish ./plugins/redfish`" + ` and put the binary
in the host's plugin directory.

Tests run against ` + "`redfishtest`" + `, a stateful Redfish service built from the
DMTF public mockups (BSD-3-Clause; see ` + "`redfishtest/testdata/LICENSE.md`" + `),
over HTTP and HTTPS; they need nothing installed.

This file is generated from the code by ` + "`go test ./plugins/redfish/rfdriver -run TestREADME -update`" + `;
a test fails when it is out of date.
`

// TestREADME keeps ../README.md equal to what the code describes.
func TestREADME(t *testing.T) {
	d := NewDrivers(Options{})
	drivertest.CheckGenerated(t, "../README.md", readmeIntro+drivertest.Reference(d.Bundle()), *update,
		"go test ./plugins/redfish/rfdriver -run TestREADME -update")
}
