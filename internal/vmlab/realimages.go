package vmlab

import (
	"context"
	"debug/pe"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/anvilmetal/anvil/ramdisk"
)

// The OS image's build script is part of its cache key: a change to
// the script builds a new image beside the old one.
//
//go:embed ipa/build-image.sh
var buildImageScript string

// IPATarballEnv names the IPA source tarball the ramdisk is built from;
// .ci/run points it at ../shared/peers/ironic-python-agent-2023.1.tar.gz.
const IPATarballEnv = "ANVIL_TEST_IPA_TARBALL"

// IPAVersion is the version the IPA 2023.1 source reports, written into
// the ramdisk's package metadata (pbr reads it there).
const IPAVersion = ramdisk.DefaultIPAVersion

// IPARamdisk is the stock Ironic Python Agent as a network-bootable
// ramdisk (ramdisk.Image): a Debian kernel and an initramfs of Debian 12
// packages with IPA's source installed as a package and an /init that
// brings the first NIC up with DHCP and runs the agent. IPA reads
// ipa-api-url= (and its other settings) from the kernel command line.
type IPARamdisk = ramdisk.Image

// BuildIPARamdisk returns the IPA ramdisk built from the source tarball
// by ramdisk.Build in the lab's cache. It needs root (debootstrap
// chroots) and Debian's debootstrap, zstd and kmod; without them the
// error wraps ErrUnavailable.
func BuildIPARamdisk(ctx context.Context, c Cache, tarball string) (IPARamdisk, error) {
	if tarball == "" {
		// The lab never downloads: its tests name the peers' tarball.
		return IPARamdisk{}, fmt.Errorf("%w: no IPA source tarball (%s)", ErrUnavailable, IPATarballEnv)
	}
	return ramdisk.Build(ctx, ramdisk.Options{Cache: c, IPATarball: tarball, IPAVersion: IPAVersion})
}

// RescueUserLine is what the IPA ramdisk's /init prints once the
// agent's finalize_rescue wrote the rescue password's hash and it made
// the rescue user (then it runs a login on the serial console).
const RescueUserLine = "anvil-ipa: rescue: user rescue created"

// OSMarkerPrefix starts the line the OS image prints on its serial
// console once it has read the config drive:
//
//	ANVIL-OS-MARKER hostname=<meta_data hostname> user-data=<value>
//
// where value is what follows "anvil-marker:" in user_data (letters,
// digits, '.', '_' and '-' only), "none" for what it did not find.
const OSMarkerPrefix = "ANVIL-OS-MARKER"

// OSDiskLine is what the OS image prints first, so a test can tell the
// machine booted from its disk.
const OSDiskLine = "anvil-os: booted from disk"

// OSImage is the small whole-disk image the lab deploys: an MBR disk
// (96 MiB) with one bootable FAT partition holding SYSLINUX, a Debian
// kernel and a busybox initramfs that reads the config drive IPA writes
// (label config-2) and prints OSMarkerPrefix's line, as raw and qcow2,
// each with its SHA-256 and SHA-512 (hex).
type OSImage struct {
	Raw, QCOW2                   string
	RawSHA256, RawSHA512         string
	QCOW2SHA256, QCOW2SHA512     string
	Built                        bool
	KernelPackage, KernelVersion string
}

// BuildOSImage returns the OS image, building it (about 30 s) when the
// cache has none for its inputs: the kernel package, busybox's SHA-256
// and the build script. It needs Debian's syslinux, syslinux-common,
// dosfstools, mtools, fdisk, qemu-utils, xz-utils and busybox-static;
// without them the error wraps ErrUnavailable.
func BuildOSImage(ctx context.Context, c Cache) (OSImage, error) {
	for _, tool := range []string{"syslinux", "mkfs.vfat", "mcopy", "sfdisk", "qemu-img", "xz", "depmod", "cpio"} {
		if _, err := exec.LookPath(tool); err != nil {
			return OSImage{}, fmt.Errorf("%w: no %s to build the OS image (Debian packages syslinux syslinux-common dosfstools mtools fdisk qemu-utils xz-utils kmod cpio)", ErrUnavailable, tool)
		}
	}
	bin, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return OSImage{}, fmt.Errorf("%w: %v (Debian package busybox-static)", ErrUnavailable, err)
	}
	if err := checkStatic(bin); err != nil {
		return OSImage{}, fmt.Errorf("%w: %s: %v (install busybox-static)", ErrUnavailable, BusyboxPath, err)
	}
	bsum, err := fileSHA256(BusyboxPath)
	if err != nil {
		return OSImage{}, err
	}
	kernel, err := DebianKernel(ctx, c)
	if err != nil {
		return OSImage{}, err
	}
	in := Inputs{"kind": "os-image", "kernel": kernel.Package + "=" + kernel.Version, "busybox": bsum, "script": buildImageScript}
	dir, built, err := c.Get(in, func(dir string) error {
		return runBuildScript(ctx, buildImageScript, dir, kernel.Deb, BusyboxPath, dir)
	})
	if err != nil {
		return OSImage{}, err
	}
	img := OSImage{Raw: filepath.Join(dir, "disk.raw"), QCOW2: filepath.Join(dir, "disk.qcow2"), Built: built,
		KernelPackage: kernel.Package, KernelVersion: kernel.Version}
	for _, f := range []struct {
		path string
		dst  *string
	}{
		{img.Raw + ".sha256", &img.RawSHA256}, {img.Raw + ".sha512", &img.RawSHA512},
		{img.QCOW2 + ".sha256", &img.QCOW2SHA256}, {img.QCOW2 + ".sha512", &img.QCOW2SHA512},
	} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return OSImage{}, fmt.Errorf("vmlab: OS image: %w", err)
		}
		*f.dst = strings.TrimSpace(string(b))
	}
	return img, nil
}

// buildStopGrace is how long a cancelled build script's processes have
// to exit after SIGTERM before SIGKILL (ramdisk.StopGrace).
const buildStopGrace = ramdisk.StopGrace

// runBuildScript runs an embedded build script with bash in dir
// (ramdisk.RunScript: its own process group, ended as a whole when ctx
// is cancelled).
func runBuildScript(ctx context.Context, script, dir string, args ...string) error {
	return ramdisk.RunScript(ctx, script, dir, nil, args...)
}

// The UEFI OS image's build script, part of its cache key.
//
//go:embed ipa/build-image-gpt.sh
var buildGPTImageScript string

// UEFIOSImage is the whole-disk image for UEFI machines: a GPT disk (96
// MiB) whose EFI System Partition holds the OS image's kernel and
// initramfs (the same marker) and two GRUB loaders, the one IPA's
// install_bootloader makes a boot entry for (EFI/anvil/grubx64.efi,
// named by EFI/anvil/BOOTX64.CSV with the label UEFIBootLabel) and the
// removable-media fallback (EFI/BOOT/BOOTX64.EFI); each prints which
// one it is (UEFILoaderLine) before it boots the kernel.
type UEFIOSImage struct {
	Raw, RawSHA256, RawSHA512 string
	Built                     bool
}

// UEFIBootLabel is the label of the boot entry IPA makes from the UEFI
// OS image's BOOTX64.CSV.
const UEFIBootLabel = "anvil-os"

// The lines the UEFI OS image's loaders print: the installed loader the
// boot entry names, and the removable-media fallback.
const (
	UEFILoaderLine   = "anvil-grub: started "
	UEFIEntryLoader  = UEFILoaderLine + "installed-entry"
	UEFIFallbackLoad = UEFILoaderLine + "removable-fallback"
)

// BuildUEFIOSImage returns the UEFI OS image, built from the OS image
// (BuildOSImage) with Debian's grub-efi-amd64-bin, dosfstools, mtools and
// fdisk, or taken from the cache (keyed by the OS image's SHA-256, the
// GRUB package's version and the script). Missing tools wrap
// ErrUnavailable.
func BuildUEFIOSImage(ctx context.Context, c Cache, osImg OSImage) (UEFIOSImage, error) {
	for _, tool := range []string{"grub-mkimage", "mkfs.vfat", "mcopy", "sfdisk", "iconv"} {
		if _, err := exec.LookPath(tool); err != nil {
			return UEFIOSImage{}, fmt.Errorf("%w: no %s to build the UEFI OS image (Debian packages grub-efi-amd64-bin dosfstools mtools fdisk)", ErrUnavailable, tool)
		}
	}
	if _, err := os.Stat("/usr/lib/grub/x86_64-efi/linux.mod"); err != nil {
		return UEFIOSImage{}, fmt.Errorf("%w: no GRUB EFI modules (Debian package grub-efi-amd64-bin)", ErrUnavailable)
	}
	grubVersion, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Version}", "grub-efi-amd64-bin").Output()
	if err != nil {
		return UEFIOSImage{}, fmt.Errorf("%w: grub-efi-amd64-bin is not installed: %v", ErrUnavailable, err)
	}
	in := Inputs{"kind": "os-image-uefi", "os-image": osImg.RawSHA256, "grub": string(grubVersion), "script": buildGPTImageScript}
	dir, built, err := c.Get(in, func(dir string) error {
		return runBuildScript(ctx, buildGPTImageScript, dir, osImg.Raw, dir)
	})
	if err != nil {
		return UEFIOSImage{}, err
	}
	img := UEFIOSImage{Raw: filepath.Join(dir, "disk.raw"), Built: built}
	for _, f := range []struct {
		path string
		dst  *string
	}{{img.Raw + ".sha256", &img.RawSHA256}, {img.Raw + ".sha512", &img.RawSHA512}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return UEFIOSImage{}, fmt.Errorf("vmlab: UEFI OS image: %w", err)
		}
		*f.dst = strings.TrimSpace(string(b))
	}
	return img, nil
}

// The secure boot OS image's build script, part of its cache key.
//
//go:embed ipa/build-image-sb.sh
var buildSBImageScript string

// Debian's signed boot chain the secure boot OS image holds: shim signed
// by Microsoft (shim-signed), which OVMF's secure boot firmware with
// Microsoft's keys starts, and GRUB signed by Debian
// (grub-efi-amd64-signed), which shim trusts; its prefix is /EFI/debian.
const (
	SignedShim = "/usr/lib/shim/shimx64.efi.signed"
	SignedGRUB = "/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed"
)

// SecureBootLoader is the loader the secure boot OS image's BOOTX64.CSV
// names, as the firmware's boot entry IPA makes from it loads it: the
// signed shim.
const SecureBootLoader = `\EFI\debian\shimx64.efi`

// BuildSecureBootOSImage returns the secure boot variant of the UEFI OS
// image: the same GPT disk layout (a 64 MiB EFI System Partition from 1
// MiB) and the OS image's kernel and initramfs (the same marker), booted
// through Debian's signed chain laid out as Debian installs it:
// EFI/debian/shimx64.efi (SignedShim, the loader EFI/debian/BOOTX64.CSV
// names with the label UEFIBootLabel, so that IPA's install_bootloader
// makes the boot entry for it), EFI/debian/grubx64.efi (SignedGRUB) and
// EFI/debian/grub.cfg, which prints UEFIEntryLoader (UEFIFallbackLoad
// when GRUB was loaded from EFI/BOOT) and boots the kernel; and the same
// shim and GRUB as the removable-media fallback (EFI/BOOT/BOOTX64.EFI and
// EFI/BOOT/grubx64.efi). The kernel (Debian's, from DebianKernel),
// the shim and the GRUB must carry an Authenticode signature; the
// firmware, shim and GRUB check them at boot. It is built with Debian's
// dosfstools, mtools and fdisk, or taken from the cache (keyed by the OS
// image's SHA-256, the shim-signed and grub-efi-amd64-signed versions and
// the script). Missing tools or packages wrap ErrUnavailable.
func BuildSecureBootOSImage(ctx context.Context, c Cache, osImg OSImage) (UEFIOSImage, error) {
	for _, tool := range []string{"mkfs.vfat", "mcopy", "sfdisk", "iconv"} {
		if _, err := exec.LookPath(tool); err != nil {
			return UEFIOSImage{}, fmt.Errorf("%w: no %s to build the secure boot OS image (Debian packages dosfstools mtools fdisk)", ErrUnavailable, tool)
		}
	}
	in := Inputs{"kind": "os-image-uefi-secureboot", "os-image": osImg.RawSHA256, "script": buildSBImageScript}
	for _, p := range []struct{ pkg, file string }{{"shim-signed", SignedShim}, {"grub-efi-amd64-signed", SignedGRUB}} {
		if _, err := os.Stat(p.file); err != nil {
			return UEFIOSImage{}, fmt.Errorf("%w: no %s (Debian package %s)", ErrUnavailable, p.file, p.pkg)
		}
		v, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Version}", p.pkg).Output()
		if err != nil {
			return UEFIOSImage{}, fmt.Errorf("%w: %s is not installed: %v", ErrUnavailable, p.pkg, err)
		}
		in[p.pkg] = string(v)
	}
	kernel, err := DebianKernel(ctx, c)
	if err != nil {
		return UEFIOSImage{}, err
	}
	for _, f := range []string{SignedShim, SignedGRUB, kernel.Path} {
		if err := checkSignedPE(f); err != nil {
			return UEFIOSImage{}, fmt.Errorf("vmlab: secure boot OS image: %w", err)
		}
	}
	dir, built, err := c.Get(in, func(dir string) error {
		return runBuildScript(ctx, buildSBImageScript, dir, osImg.Raw, SignedShim, SignedGRUB, dir)
	})
	if err != nil {
		return UEFIOSImage{}, err
	}
	img := UEFIOSImage{Raw: filepath.Join(dir, "disk.raw"), Built: built}
	for _, f := range []struct {
		path string
		dst  *string
	}{{img.Raw + ".sha256", &img.RawSHA256}, {img.Raw + ".sha512", &img.RawSHA512}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return UEFIOSImage{}, fmt.Errorf("vmlab: secure boot OS image: %w", err)
		}
		*f.dst = strings.TrimSpace(string(b))
	}
	return img, nil
}

// checkSignedPE checks that path is a 64-bit PE image (an EFI program,
// or a Linux kernel with its EFI stub) with an Authenticode signature
// attached: its certificate table is not empty. Whether the signature is
// trusted is the firmware's and shim's to say at boot.
func checkSignedPE(path string) error {
	f, err := pe.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	oh, ok := f.OptionalHeader.(*pe.OptionalHeader64)
	if !ok {
		return fmt.Errorf("%s: not a 64-bit PE image", path)
	}
	if d := oh.DataDirectory[pe.IMAGE_DIRECTORY_ENTRY_SECURITY]; d.Size == 0 {
		return fmt.Errorf("%s is not signed (no Authenticode certificate table)", path)
	}
	return nil
}

// The partition image's build script, part of its cache key.
//
//go:embed ipa/build-image-partition.sh
var buildPartitionImageScript string

// PartitionImage is the lab's partition image (image_type partition): an
// ext4 root file system of Debian 12 packages with GRUB for BIOS and
// UEFI and no boot loader installed, whose /boot holds the OS image's
// kernel and initramfs (the same marker), as qcow2 with its checksums;
// Kernel and Ramdisk are the same kernel and initramfs as files, which
// instance_info names as Ironic requires for partition images. IPA's
// install_bootloader installs GRUB from it (grub-install, grub-mkconfig
// in a chroot); PartitionGRUBEntry is what GRUB's menu shows.
type PartitionImage struct {
	QCOW2, QCOW2SHA256, QCOW2SHA512 string
	Kernel, Ramdisk                 string
	Built                           bool
}

// PartitionGRUBDistributor is the partition image's GRUB_DISTRIBUTOR:
// grub-mkconfig's menu entry and grub-install's EFI directory name it.
const PartitionGRUBDistributor = "anvil-partition"

// BuildPartitionImage returns the partition image, building it (debootstrap,
// minutes) when the cache has none for its inputs: the OS image, the
// kernel package, the Debian suite and mirror and the script. It needs
// root and Debian's debootstrap, e2fsprogs, mtools and qemu-utils;
// without them the error wraps ErrUnavailable.
func BuildPartitionImage(ctx context.Context, c Cache, osImg OSImage) (PartitionImage, error) {
	if os.Geteuid() != 0 {
		return PartitionImage{}, fmt.Errorf("%w: building the partition image needs root (debootstrap)", ErrUnavailable)
	}
	for _, tool := range []string{"debootstrap", "mkfs.ext4", "mcopy", "qemu-img"} {
		if _, err := exec.LookPath(tool); err != nil {
			return PartitionImage{}, fmt.Errorf("%w: no %s to build the partition image (Debian packages debootstrap e2fsprogs mtools qemu-utils)", ErrUnavailable, tool)
		}
	}
	kernel, err := DebianKernel(ctx, c)
	if err != nil {
		return PartitionImage{}, err
	}
	in := Inputs{"kind": "os-image-partition", "os-image": osImg.RawSHA256, "kernel": kernel.Package + "=" + kernel.Version,
		"suite": ramdisk.DefaultSuite, "mirror": ramdisk.DefaultMirror, "script": buildPartitionImageScript}
	dir, built, err := c.Get(in, func(dir string) error {
		if err := runBuildScript(ctx, buildPartitionImageScript, dir, kernel.Deb, osImg.Raw, dir); err != nil {
			return err
		}
		// The kernel and initramfs instance_info names, as files.
		return exec.CommandContext(ctx, "mcopy", "-i", osImg.Raw+"@@1048576", "::vmlinuz", "::initrd", dir).Run()
	})
	if err != nil {
		return PartitionImage{}, err
	}
	img := PartitionImage{QCOW2: filepath.Join(dir, "root.qcow2"), Kernel: filepath.Join(dir, "vmlinuz"),
		Ramdisk: filepath.Join(dir, "initrd"), Built: built}
	for _, f := range []struct {
		path string
		dst  *string
	}{{img.QCOW2 + ".sha256", &img.QCOW2SHA256}, {img.QCOW2 + ".sha512", &img.QCOW2SHA512}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return PartitionImage{}, fmt.Errorf("vmlab: partition image: %w", err)
		}
		*f.dst = strings.TrimSpace(string(b))
	}
	return img, nil
}

// The software RAID images' build script, part of their cache key.
//
//go:embed ipa/build-image-raid.sh
var buildRAIDImageScript string

// RAIDOSImage is the lab's whole-disk images for a deploy onto a
// software RAID (an md device), made of the partition image's root file
// system, which Ironic wants as the first partition: BIOS an MBR disk
// with no boot code (IPA's install_bootloader runs grub-install on each
// holder disk and grub-mkconfig, from the md device's first partition),
// UEFI a GPT disk with an EFI System Partition after the root whose
// loader, named by BOOTX64.CSV with the label RAIDBootLabel, finds the
// root file system by RootFSUUID through GRUB's md support (IPA moves
// that ESP onto a mirror on the holders and makes a boot entry for each
// copy). Both boot the partition image's kernel and initramfs, whose
// /init assembles the arrays (mdadm), prints /proc/mdstat and the device
// of its root= and then the OS marker. As qcow2, with checksums.
type RAIDOSImage struct {
	BIOS, BIOSSHA256 string
	UEFI, UEFISHA256 string
	RootFSUUID       string
	Built            bool
}

// RAIDBootLabel is the label of the UEFI RAID image's boot entries: IPA
// adds " (RAID, part<N>)" for each holder's copy of the ESP.
const RAIDBootLabel = "anvil-raid"

// Lines the RAID images print on the way to the OS: the UEFI loader the
// boot entry names (then "anvil-grub: root (<device>)"), the BIOS
// grub.cfg's origin (the partition image's /etc/grub.d/01_anvil), and the
// OS /init's lines for the arrays and its root.
const (
	RAIDEntryLoader = UEFILoaderLine + "raid-entry"
	RAIDGRUBRoot    = "anvil-grub: root ("
	GRUBConfigFrom  = "anvil-grub: grub.cfg from "
	OSMDStatLine    = "anvil-os: mdstat: "
	OSRootLine      = "anvil-os: root "
)

// BuildRAIDOSImage returns the software RAID images, built from the
// partition image (BuildPartitionImage) with qemu-utils, util-linux's
// blkid, fdisk, dosfstools, mtools and grub-efi-amd64-bin, or taken from
// the cache (keyed by the partition image's SHA-256, the kernel, the
// GRUB package's version and the script). Missing tools wrap
// ErrUnavailable.
func BuildRAIDOSImage(ctx context.Context, c Cache, part PartitionImage) (RAIDOSImage, error) {
	for _, tool := range []string{"qemu-img", "blkid", "sfdisk", "mkfs.vfat", "mcopy", "grub-mkimage", "iconv"} {
		if _, err := exec.LookPath(tool); err != nil {
			return RAIDOSImage{}, fmt.Errorf("%w: no %s to build the software RAID images (Debian packages qemu-utils util-linux fdisk dosfstools mtools grub-efi-amd64-bin)", ErrUnavailable, tool)
		}
	}
	if _, err := os.Stat("/usr/lib/grub/x86_64-efi/mdraid1x.mod"); err != nil {
		return RAIDOSImage{}, fmt.Errorf("%w: no GRUB EFI modules (Debian package grub-efi-amd64-bin)", ErrUnavailable)
	}
	grubVersion, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Version}", "grub-efi-amd64-bin").Output()
	if err != nil {
		return RAIDOSImage{}, fmt.Errorf("%w: grub-efi-amd64-bin is not installed: %v", ErrUnavailable, err)
	}
	kernel, err := DebianKernel(ctx, c)
	if err != nil {
		return RAIDOSImage{}, err
	}
	kver := strings.TrimPrefix(kernel.Package, "linux-image-")
	in := Inputs{"kind": "os-image-raid", "partition-image": part.QCOW2SHA256, "kernel": kver, "grub": string(grubVersion),
		"script": buildRAIDImageScript}
	dir, built, err := c.Get(in, func(dir string) error {
		return runBuildScript(ctx, buildRAIDImageScript, dir, part.QCOW2, kver, dir)
	})
	if err != nil {
		return RAIDOSImage{}, err
	}
	img := RAIDOSImage{BIOS: filepath.Join(dir, "raid-bios.qcow2"), UEFI: filepath.Join(dir, "raid-uefi.qcow2"), Built: built}
	for _, f := range []struct {
		path string
		dst  *string
	}{{img.BIOS + ".sha256", &img.BIOSSHA256}, {img.UEFI + ".sha256", &img.UEFISHA256}, {filepath.Join(dir, "rootfs-uuid"), &img.RootFSUUID}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return RAIDOSImage{}, fmt.Errorf("vmlab: software RAID images: %w", err)
		}
		*f.dst = strings.TrimSpace(string(b))
	}
	return img, nil
}
