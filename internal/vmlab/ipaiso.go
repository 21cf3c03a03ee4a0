package vmlab

import (
	"context"
	_ "embed"
	"fmt"
	"os/exec"
	"path/filepath"
)

//go:embed ipa/build-iso.sh
var buildISOScript string

// IPAISO is the IPA ramdisk as a bootable ISO (BIOS, ISOLINUX), what the
// redfish-virtual-media boot interface takes as redfish_deploy_iso: its
// isolinux.cfg has one append line (initrd, the serial console,
// rootfstype=ramfs, ipa-debug=1), which the interface's re-master extends
// with the node's parameters; the ramdisk's /init takes a DHCP address
// and the agent reads ipa-api-url from the kernel command line.
type IPAISO struct {
	Path string
	// Built reports whether this call built it (false: from the cache).
	Built bool
}

// BuildIPAISO returns the ISO of rd, building it with xorriso and
// ISOLINUX (Debian packages xorriso, isolinux, syslinux-common; a few
// seconds) when the cache has none for its inputs: the kernel's and
// initramfs's SHA-256, the boot loader files' and the build script.
// Without the tools the error wraps ErrUnavailable.
func BuildIPAISO(ctx context.Context, c Cache, rd IPARamdisk) (IPAISO, error) {
	if _, err := exec.LookPath("xorriso"); err != nil {
		return IPAISO{}, fmt.Errorf("%w: no xorriso to build the IPA ISO (Debian package xorriso)", ErrUnavailable)
	}
	in := Inputs{"kind": "ipa-iso", "script": buildISOScript}
	for name, path := range map[string]string{
		"kernel": rd.Kernel.Path, "initramfs": rd.Initramfs,
		"isolinux": "/usr/lib/ISOLINUX/isolinux.bin", "ldlinux": "/usr/lib/syslinux/modules/bios/ldlinux.c32",
	} {
		sum, err := fileSHA256(path)
		if err != nil {
			return IPAISO{}, fmt.Errorf("%w: %s for the IPA ISO: %v (Debian packages isolinux, syslinux-common)", ErrUnavailable, name, err)
		}
		in[name] = sum
	}
	dir, built, err := c.Get(in, func(dir string) error {
		return runBuildScript(ctx, buildISOScript, dir, rd.Kernel.Path, rd.Initramfs, dir)
	})
	if err != nil {
		return IPAISO{}, err
	}
	return IPAISO{Path: filepath.Join(dir, "ipa.iso"), Built: built}, nil
}
