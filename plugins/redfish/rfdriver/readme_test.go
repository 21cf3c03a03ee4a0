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

Several nodes may share one BMC address (and its session): each node's
` + "`redfish_system_id`" + ` (a path or an Id; not needed when the BMC manages one
system) is resolved per node, and the machine's UUID is recorded at the first
contact (` + "`driver_internal_info.bmc_machine_identity`" + `): an action is refused
when the BMC later reports another machine, until the node's ` + "`driver_info`" + `
is updated or the node is inspected. ` + "`redfish_auth_type=auto`" + ` uses a session
when the service root offers one and HTTP Basic otherwise (or when the
session login is refused but Basic is accepted).

Virtual media: the ` + "`redfish-virtual-media`" + ` boot interface passes the node's
ramdisk parameters (the conductor's ` + "`ipa-api-url`" + `, ` + "`ipa-inspection-callback-url`" + `,
` + "`kernel_append_params`" + `, ` + "`boot_method=vmedia`" + `) in ` + "`parameters.txt`" + ` on an
ISO 9660 image labelled ` + "`ir-vfd-dev`" + `, inserted into the system's virtual USB
stick or floppy, where IPA looks for it. The plugin publishes that image into
the directory ` + "`ANVIL_REDFISH_HTTP_ROOT`" + `, which the embedder serves at
` + "`ANVIL_REDFISH_HTTP_URL`" + ` (reachable by the BMCs); without them no image is made
and the deploy ISO must carry the parameters.

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
