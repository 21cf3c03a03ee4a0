package vmlab

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The build scripts are part of each image's cache key: a change to a
// script builds a new image beside the old one.
var (
	//go:embed ipa/build-ramdisk.sh
	buildRamdiskScript string
	//go:embed ipa/build-image.sh
	buildImageScript string
)

// IPATarballEnv names the IPA source tarball the ramdisk is built from;
// .ci/run points it at ../shared/peers/ironic-python-agent-2023.1.tar.gz.
const IPATarballEnv = "ANVIL_TEST_IPA_TARBALL"

// IPAVersion is the version the IPA 2023.1 source reports, written into
// the ramdisk's package metadata (pbr reads it there).
const IPAVersion = "9.4.3"

// IPARamdisk is the stock Ironic Python Agent as a network-bootable
// ramdisk: a Debian kernel and an initramfs of Debian 12 packages with
// IPA's source installed as a package and an /init that brings the first
// NIC up with DHCP and runs the agent. IPA reads ipa-api-url= (and its
// other settings) from the kernel command line.
type IPARamdisk struct {
	Kernel Kernel
	// Initramfs is the cpio newc archive, zstd-compressed.
	Initramfs string
	// Packages lists the Debian packages and versions inside it.
	Packages string
	// Built reports whether this call built it (false: from the cache).
	Built bool
}

// BuildIPARamdisk returns the IPA ramdisk built from the source tarball
// with the kernel DebianKernel gives, building it (debootstrap, about 2
// minutes on a quiet 2-core machine, 10 under load) when the cache has
// none for these inputs: the tarball's SHA-256, the kernel package, the
// build script, the Debian suite and the candidate versions of the
// packages that matter most to IPA. It needs root (debootstrap chroots)
// and Debian's debootstrap, zstd and kmod; without them the error wraps
// ErrUnavailable.
func BuildIPARamdisk(ctx context.Context, c Cache, tarball string) (IPARamdisk, error) {
	if os.Geteuid() != 0 {
		return IPARamdisk{}, fmt.Errorf("%w: building the IPA ramdisk needs root (debootstrap)", ErrUnavailable)
	}
	for _, tool := range []string{"debootstrap", "zstd", "depmod", "cpio", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			return IPARamdisk{}, fmt.Errorf("%w: no %s to build the IPA ramdisk (Debian packages debootstrap zstd kmod cpio python3)", ErrUnavailable, tool)
		}
	}
	sum, err := fileSHA256(tarball)
	if err != nil {
		return IPARamdisk{}, fmt.Errorf("%w: IPA source: %v", ErrUnavailable, err)
	}
	kernel, err := DebianKernel(ctx, c)
	if err != nil {
		return IPARamdisk{}, err
	}
	in := Inputs{
		"kind": "ipa-ramdisk", "ipa-sha256": sum, "ipa-version": IPAVersion,
		"kernel": kernel.Package + "=" + kernel.Version, "script": buildRamdiskScript,
		"suite": debianSuite(),
	}
	versions, err := aptVersions(ctx, "python3", "python3-ironic-lib", "python3-oslo.service", "qemu-utils", "parted", "util-linux")
	if err != nil {
		return IPARamdisk{}, err
	}
	for pkg, v := range versions {
		in["pkg:"+pkg] = v
	}
	dir, built, err := c.Get(in, func(dir string) error {
		return runBuildScript(ctx, buildRamdiskScript, dir, tarball, kernel.Deb, dir)
	})
	if err != nil {
		return IPARamdisk{}, err
	}
	return IPARamdisk{Kernel: kernel, Initramfs: filepath.Join(dir, "initramfs"), Packages: filepath.Join(dir, "packages"), Built: built}, nil
}

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

// aptVersions returns the candidate version of each package, from one
// apt-cache call.
func aptVersions(ctx context.Context, pkgs ...string) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", append([]string{"show", "--no-all-versions"}, pkgs...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("%w: apt-cache show %s: %v", ErrUnavailable, strings.Join(pkgs, " "), err)
	}
	versions := map[string]string{}
	var pkg string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "Package: "); ok {
			pkg = v
		} else if v, ok := strings.CutPrefix(line, "Version: "); ok && pkg != "" {
			versions[pkg] = v
		}
	}
	for _, p := range pkgs {
		if versions[p] == "" {
			return nil, fmt.Errorf("%w: apt-cache show gave no version of %s", ErrUnavailable, p)
		}
	}
	return versions, nil
}

// debianSuite is the suite the images are built from.
func debianSuite() string {
	if s := os.Getenv("ANVIL_DEBIAN_SUITE"); s != "" {
		return s
	}
	return "bookworm"
}

// buildStopGrace is how long a cancelled build script's processes have
// to exit after SIGTERM before SIGKILL.
const buildStopGrace = 20 * time.Second

// waitGroupGone waits up to d for process group pgid to have no process
// left (kill with signal 0 fails with ESRCH).
func waitGroupGone(pgid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runBuildScript runs an embedded build script with bash in dir, keeping
// the last lines of its output for the error.
func runBuildScript(ctx context.Context, script, dir string, args ...string) error {
	path := filepath.Join(dir, ".build.sh")
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		return err
	}
	defer os.Remove(path)
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The script's children (debootstrap, dpkg in the chroot) stay in
	// its process group, which a cancelled build ends as a whole: killing
	// bash alone left debootstrap running into the build directory the
	// cache removes, and its work directory in /tmp behind. SIGTERM
	// first, so the script's EXIT trap removes its work directory; the
	// group's processes still there after buildStopGrace get SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	exited := make(chan struct{})
	cmd.Cancel = func() error {
		pgid := cmd.Process.Pid
		err := syscall.Kill(-pgid, syscall.SIGTERM)
		go func() {
			select {
			case <-exited:
			case <-time.After(buildStopGrace):
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
		}()
		return err
	}
	cmd.WaitDelay = buildStopGrace + 5*time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		// Until the group is gone (bash's children may outlive it).
		waitGroupGone(cmd.Process.Pid, buildStopGrace+5*time.Second)
	}
	close(exited)
	if err == nil {
		return nil
	}
	tail := out.String()
	if len(tail) > 4000 {
		tail = tail[len(tail)-4000:]
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 { // a tool is missing
		return fmt.Errorf("%w: %s", ErrUnavailable, strings.TrimSpace(tail))
	}
	return fmt.Errorf("vmlab: %s: %v: %s", filepath.Base(args[len(args)-1]), err, strings.TrimSpace(tail))
}
