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

Build: ` + "`go install github.com/anvilmetal/anvil/cmd/anvil-driver-redfish`" + ` puts it beside
anvild, in a directory anvild searches by default; or ` + "`go build -o anvil-driver-redfish ./plugins/redfish`" + ` and put the binary
in the host's plugin directory.

Several nodes may share one BMC address (and its session): each node's
` + "`redfish_system_id`" + ` (a path or an Id; not needed when the BMC manages one
system) is resolved per node, and the machine's UUID is recorded at the first
contact (` + "`driver_internal_info.bmc_machine_identity`" + `): an action is refused
when the BMC later reports another machine, until the node's ` + "`driver_info`" + `
is updated or the node is inspected. ` + "`redfish_auth_type=auto`" + ` uses a session
when the service root offers one and HTTP Basic otherwise (or when the
session login is refused but Basic is accepted).

Virtual media: the ` + "`redfish-virtual-media`" + ` boot interface gets the node's
ramdisk parameters (the conductor's ` + "`ipa-api-url`" + `, ` + "`ipa-inspection-callback-url`" + `,
and ` + "`kernel_append_params`" + `) to a stock IPA ISO as Ironic does, on the kernel
command line: it fetches the deploy ISO (an http(s) URL or a local path; at
most 2 GiB, 10 minutes; cached by URL and revalidated with a conditional GET),
re-masters it into a per-node ISO whose boot loader configurations (every
` + "`grub.cfg`" + `, ` + "`isolinux.cfg`" + ` and ` + "`syslinux.cfg`" + `, and the ` + "`grub.cfg`" + ` files in
the FAT file system of the UEFI boot image) end each kernel line
(` + "`linux`" + `/` + "`linuxefi`" + `, ` + "`append`" + `) with the parameters, keeping every other file,
the volume label and the El Torito BIOS and UEFI boot entries (with the
isolinux boot info table) as they were, inserts that ISO in the virtual CD
and removes it at clean-up. With ` + "`config_via_removable`" + ` the parameters also go
in ` + "`parameters.txt`" + ` on an ISO 9660 image labelled ` + "`ir-vfd-dev`" + ` in the virtual
USB stick or floppy, with ` + "`boot_method=vmedia`" + ` on the kernel line so IPA reads
it. An agent token is never passed. The plugin publishes the images into the
directory ` + "`ANVIL_REDFISH_HTTP_ROOT`" + `, which the embedder serves at
` + "`ANVIL_REDFISH_HTTP_URL`" + ` (reachable by the BMCs); without them the deploy ISO
is inserted as it is and must carry the parameters.

With no deploy ISO but ` + "`deploy_kernel`" + ` and ` + "`deploy_ramdisk`" + ` (what Metal3 sends),
the interface builds the boot ISO from them as Ironic does: ISOLINUX for BIOS
and an EFI system partition image (FAT, GRUB as ` + "`EFI/BOOT/BOOTX64.EFI`" + `) for
UEFI, both in one El Torito catalog, the parameters baked into
` + "`isolinux.cfg`" + ` and ` + "`grub.cfg`" + `. The loaders are Debian's (packages ` + "`isolinux`" + `,
` + "`syslinux-common`" + `, ` + "`grub-efi-amd64-bin`" + `'s ` + "`gcdx64.efi`" + `), or those named by
` + "`ANVIL_REDFISH_ISOLINUX_BIN`" + `, ` + "`ANVIL_REDFISH_LDLINUX_C32`" + ` and
` + "`ANVIL_REDFISH_GRUB_EFI`" + ` (anvild's ` + "`[DEFAULT]isolinux_bin`" + `, ` + "`ldlinux_c32`" + `,
` + "`[anvil]grub_efi`" + `); ` + "`ANVIL_REDFISH_KERNEL_APPEND_PARAMS`" + ` (` + "`[redfish]kernel_append_params`" + `)
is used when the node has no ` + "`kernel_append_params`" + `. Built ISOs are cached by
their inputs. A ` + "`ramdisk`" + ` deploy (a live ISO) boots its instance from the
virtual CD: ` + "`instance_info.boot_iso`" + ` as it is, or an ISO built from
` + "`instance_info`" + ` ` + "`kernel`" + ` and ` + "`ramdisk`" + `.

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
