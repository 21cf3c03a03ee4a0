package ipmitool

import (
	"flag"
	"testing"

	"github.com/anvilmetal/anvil/driver/drivertest"
)

var update = flag.Bool("update", false, "rewrite ../README.md from the code's descriptions")

const readmeIntro = `# ipmi driver plugin

The plugin binary ` + "`anvil-driver-ipmi`" + ` serves the ` + "`ipmi`" + ` hardware type of
Anvil over the driver plugin protocol. It drives BMCs by running ` + "`ipmitool`" + `
(package ` + "`ipmitool`" + `), one process per attempt. The password reaches ipmitool
through its environment, never its command line.

Errors: a refused password or user is a ` + "`*driver.BMCAuthError`" + ` (matching
` + "`driver.ErrBMCAuthentication`" + `), returned at once; a BMC that does not answer,
or answers busy, is tried again (attempts at least 5 s apart, Ironic's
` + "`[ipmi] min_command_interval`" + `) for up to 60 s (` + "`[ipmi] command_retry_timeout`" + `),
then is a ` + "`*driver.BMCUnreachableError`" + ` (` + "`driver.ErrBMCUnreachable`" + `) naming the
BMC's host:port. Both cross the plugin boundary with their fields. The plugin
binary reads the two settings from ` + "`ANVIL_IPMI_COMMAND_RETRY_TIMEOUT`" + ` and
` + "`ANVIL_IPMI_MIN_COMMAND_INTERVAL`" + ` (seconds, or Go durations such as ` + "`1500ms`" + `).

Wrong-machine protection: power, boot device, NMI, step and vendor actions and
the power read (in the same ipmitool session) check the BMC's system GUID against the identity recorded for the
node (` + "`driver_internal_info.bmc_machine_identity`" + `, ` + "`ipmi-guid:<guid>`" + `,
recorded at first contact) and refuse with a ` + "`*driver.IdentityMismatchError`" + `
when it differs. A BMC without Get System GUID reports none, which is accepted.

Serial console: the hardware type lists ` + "`ipmitool-socat`" + ` then ` + "`no-console`" + `, as
Ironic, but the plugin does not serve ` + "`ipmitool-socat`" + `: it runs in the embedding
process (package ` + "`console/ipmisol`" + `), because a console is a long-running
` + "`ipmitool sol activate`" + ` and a TCP port there. Nodes keep ` + "`no-console`" + ` until the
embedder enables ` + "`ipmitool-socat`" + ` by name. ` + "`ipmi_terminal_port`" + ` is its TCP port.

Requires the ` + "`ipmitool`" + ` program (Debian/Ubuntu: ` + "`apt-get install -y ipmitool`" + `).
Without it the plugin still starts and describes itself with every
implementation marked unavailable (the host's ` + "`Status.Unavailable`" + ` and
discovery report give the reason, and ` + "`driver.Available`" + ` returns a
` + "`*driver.UnavailableError`" + `), and every call and validation fails with an
error matching ` + "`driver.ErrUnavailable`" + `: "ipmitool is not installed
(install the ipmitool package)".

Build: ` + "`go install github.com/anvilmetal/anvil/cmd/anvil-driver-ipmi`" + ` puts it beside
anvild, in a directory anvild searches by default; or ` + "`go build -o anvil-driver-ipmi ./plugins/ipmi`" + ` and put the binary in the
host's plugin directory.

Tests against a real IPMI simulator (` + "`ipmi_sim`" + ` from Debian's ` + "`openipmi`" + `,
started by ` + "`internal/ipmisim`" + ` with cipher suite 3) run when
` + "`ANVIL_TEST_IPMI_SIM=1`" + ` and skip otherwise.

This file is generated from the code by ` + "`go test ./plugins/ipmi/ipmitool -run TestREADME -update`" + `;
a test fails when it is out of date.
`

// TestREADME keeps ../README.md equal to what the code describes.
func TestREADME(t *testing.T) {
	d := NewDrivers(Options{IpmitoolPath: "/nonexistent/ipmitool"}) // the README must not depend on the host
	drivertest.CheckGenerated(t, "../README.md", readmeIntro+drivertest.Reference(d.Bundle()), *update,
		"go test ./plugins/ipmi/ipmitool -run TestREADME -update")
}
