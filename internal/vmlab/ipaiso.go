package vmlab

import (
	"context"

	"github.com/anvilmetal/anvil/ramdisk"
)

// IPAISO is the IPA ramdisk as a bootable ISO (BIOS, ISOLINUX), what the
// redfish-virtual-media boot interface takes as redfish_deploy_iso: its
// isolinux.cfg has one append line (initrd, the serial console,
// rootfstype=ramfs, ipa-debug=1), which the interface's re-master extends
// with the node's parameters; the ramdisk's /init takes a DHCP address
// and the agent reads ipa-api-url from the kernel command line.
type IPAISO = ramdisk.ISO

// BuildIPAISO returns the ISO of rd (ramdisk.BuildISO), building it when
// the cache has none for its inputs. Without xorriso or ISOLINUX the
// error wraps ErrUnavailable.
func BuildIPAISO(ctx context.Context, c Cache, rd IPARamdisk) (IPAISO, error) {
	return ramdisk.BuildISO(ctx, c, rd)
}
