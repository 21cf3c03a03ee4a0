package ramdisk

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// The build scripts are part of each image's cache key: a change to a
// script builds a new image beside the old one.
var (
	//go:embed build-root.sh
	buildRootScript string
	//go:embed build-ramdisk.sh
	buildRamdiskScript string
	//go:embed build-iso.sh
	buildISOScript string
)

// ErrUnavailable marks what a machine lacks to build a ramdisk (not
// root, a missing tool, no Debian archive, no IPA release): its message
// says what is missing.
var ErrUnavailable = errors.New("ramdisk: unavailable")

// DefaultIPAVersion is the ironic-python-agent release built when
// Options.IPAVersion is empty: 9.4.3, OpenStack 2023.1's.
const DefaultIPAVersion = "9.4.3"

// DefaultSuite is the Debian suite the root file system comes from.
const DefaultSuite = "bookworm"

// DefaultMirror is the Debian archive debootstrap reads.
const DefaultMirror = "http://deb.debian.org/debian"

// Options say what to build.
type Options struct {
	// Cache keeps the kernel, the downloaded IPA release and the images,
	// keyed by their inputs; its Dir must be set.
	Cache Cache
	// IPATarball is the ironic-python-agent source release (.tar.gz)
	// the agent is installed from. Empty: the release IPAVersion is
	// downloaded from PyPI (PyPIURL) and checked against the SHA-256 the
	// index publishes.
	IPATarball string
	// IPAVersion is the version written into the agent's package
	// metadata, which it reports in its heartbeats (default
	// DefaultIPAVersion); it must be the tarball's.
	IPAVersion string
	// Packages are Debian packages added to the root file system beside
	// the agent's own (a vendor's tools for a hardware manager, say).
	Packages []string
	// ISO also builds the bootable ISO (Image.ISO).
	ISO bool
	// Suite and Mirror: the Debian release and archive (DefaultSuite,
	// DefaultMirror).
	Suite, Mirror string
	// PyPIURL is the package index's base URL (default
	// https://pypi.org); HTTPClient downloads from it (default: a client
	// with a 2-minute timeout).
	PyPIURL    string
	HTTPClient *http.Client
}

// Image is a built ramdisk: the stock Ironic Python Agent on a Debian
// root file system, as a kernel and an initramfs for network boot and,
// when asked for, a bootable ISO.
type Image struct {
	Kernel Kernel
	// Initramfs is the cpio newc archive, zstd-compressed.
	Initramfs string
	// Packages lists the Debian packages and versions inside it.
	Packages string
	// ISO is the bootable ISO 9660 image (BIOS and UEFI) when
	// Options.ISO was set.
	ISO string
	// IPATarball is the agent's source release the image was built
	// from (the downloaded one, when Options.IPATarball was empty).
	IPATarball string
	// Built reports whether this call built the initramfs (false: it
	// came from the cache).
	Built bool
}

// packageName is a Debian package name (Debian Policy 5.6.1).
var packageName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// Build returns the ramdisk of o, building what the cache does not hold:
// the kernel package linux-image-amd64 depends on (apt-get download),
// and a root file system from debootstrap (minbase, the agent's Python
// dependencies and the programs it runs, o.Packages) with the agent
// installed from its source release and byte-compiled, the kernel
// modules a machine needs, and an /init that brings the first NIC up
// with DHCP (DHCPv6 for an IPv6 ipa-api-url, see the package documentation)
// and runs the agent, which reads ipa-api-url= and its other
// settings from the kernel command line. A first build takes minutes
// (debootstrap); the cache key is every input: the release's SHA-256,
// the kernel package, the build scripts, the suite, the mirror, the
// extra packages and the candidate versions of the packages that matter
// most to the agent. The root file system is cached on its own, so a new
// agent release or a new /init reuses it and takes a minute or two. It
// needs root (debootstrap chroots) and Debian's debootstrap, zstd, kmod
// and cpio; without them the error wraps ErrUnavailable and names what
// is missing.
func Build(ctx context.Context, o Options) (Image, error) {
	if o.Cache.Dir == "" {
		return Image{}, errors.New("ramdisk: Options.Cache has no directory")
	}
	version := o.IPAVersion
	if version == "" {
		version = DefaultIPAVersion
	}
	if !regexp.MustCompile(`^[0-9A-Za-z.+-]+$`).MatchString(version) {
		return Image{}, fmt.Errorf("ramdisk: IPA version %q: want a release version such as %s", version, DefaultIPAVersion)
	}
	for _, p := range o.Packages {
		if !packageName.MatchString(p) {
			return Image{}, fmt.Errorf("ramdisk: extra package %q: want a Debian package name", p)
		}
	}
	suite, mirror := o.Suite, o.Mirror
	if suite == "" {
		suite = DefaultSuite
	}
	if mirror == "" {
		mirror = DefaultMirror
	}
	if os.Geteuid() != 0 {
		return Image{}, fmt.Errorf("%w: building the IPA ramdisk needs root (debootstrap)", ErrUnavailable)
	}
	for _, tool := range []string{"debootstrap", "zstd", "depmod", "cpio", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			return Image{}, fmt.Errorf("%w: no %s to build the IPA ramdisk (Debian packages debootstrap zstd kmod cpio python3)", ErrUnavailable, tool)
		}
	}
	tarball := o.IPATarball
	if tarball == "" {
		var err error
		if tarball, err = FetchIPA(ctx, o.Cache, o.HTTPClient, o.PyPIURL, version); err != nil {
			return Image{}, err
		}
	}
	sum, err := FileSHA256(tarball)
	if err != nil {
		return Image{}, fmt.Errorf("%w: IPA source: %v", ErrUnavailable, err)
	}
	kernel, err := DebianKernel(ctx, o.Cache)
	if err != nil {
		return Image{}, err
	}
	// The root file system (debootstrap, the slow part) is cached apart
	// from what goes on it, so a change of the agent or of /init does not
	// run debootstrap again.
	rootIn := Inputs{"kind": "ipa-root", "script": buildRootScript, "suite": suite, "packages": strings.Join(o.Packages, ",")}
	if mirror != DefaultMirror {
		rootIn["mirror"] = mirror
	}
	versions, err := aptVersions(ctx, "python3", "python3-ironic-lib", "python3-oslo.service", "qemu-utils", "parted", "util-linux")
	if err != nil {
		return Image{}, err
	}
	for pkg, v := range versions {
		rootIn["pkg:"+pkg] = v
	}
	rootEnv := []string{"ANVIL_DEBIAN_SUITE=" + suite, "ANVIL_DEBIAN_MIRROR=" + mirror, "ANVIL_EXTRA_PACKAGES=" + strings.Join(o.Packages, ",")}
	rootDir, _, err := o.Cache.Get(rootIn, func(dir string) error {
		return RunScript(ctx, buildRootScript, dir, rootEnv, dir)
	})
	if err != nil {
		return Image{}, err
	}
	in := Inputs{
		"kind": "ipa-ramdisk", "root": rootIn.Key(), "ipa-sha256": sum, "ipa-version": version,
		"kernel": kernel.Package + "=" + kernel.Version, "script": buildRamdiskScript,
	}
	dir, built, err := o.Cache.Get(in, func(dir string) error {
		return RunScript(ctx, buildRamdiskScript, dir, []string{"ANVIL_IPA_VERSION=" + version},
			tarball, kernel.Deb, filepath.Join(rootDir, "root.tar.zst"), dir)
	})
	if err != nil {
		return Image{}, err
	}
	img := Image{Kernel: kernel, Initramfs: filepath.Join(dir, "initramfs"), Packages: filepath.Join(rootDir, "packages"),
		IPATarball: tarball, Built: built}
	if o.ISO {
		iso, err := BuildISO(ctx, o.Cache, img)
		if err != nil {
			return Image{}, err
		}
		img.ISO = iso.Path
	}
	return img, nil
}

// BuildISO returns the ISO of img, building it with xorriso, ISOLINUX
// and GRUB (Debian packages xorriso, isolinux, syslinux-common,
// grub-efi-amd64-bin, dosfstools, mtools; seconds) when the cache has
// none for its inputs: the kernel's and initramfs's SHA-256, the boot
// loaders' and the build script. It boots from a CD with BIOS (ISOLINUX)
// and UEFI (El Torito EFI image, GRUB); isolinux.cfg's append line and
// grub.cfg's linux line have the same parameters (the serial console,
// rootfstype=ramfs, ipa-debug=1), which a re-master (the
// redfish-virtual-media boot interface) extends with the node's. Without
// the tools the error wraps ErrUnavailable.
func BuildISO(ctx context.Context, c Cache, img Image) (ISO, error) {
	if _, err := exec.LookPath("xorriso"); err != nil {
		return ISO{}, fmt.Errorf("%w: no xorriso to build the IPA ISO (Debian package xorriso)", ErrUnavailable)
	}
	in := Inputs{"kind": "ipa-iso", "script": buildISOScript}
	for name, path := range map[string]string{
		"kernel": img.Kernel.Path, "initramfs": img.Initramfs,
		"isolinux": "/usr/lib/ISOLINUX/isolinux.bin", "ldlinux": "/usr/lib/syslinux/modules/bios/ldlinux.c32",
		"grub": "/usr/lib/grub/x86_64-efi/kernel.img",
	} {
		sum, err := FileSHA256(path)
		if err != nil {
			return ISO{}, fmt.Errorf("%w: %s for the IPA ISO: %v (Debian packages isolinux, syslinux-common, grub-efi-amd64-bin)", ErrUnavailable, name, err)
		}
		in[name] = sum
	}
	dir, built, err := c.Get(in, func(dir string) error {
		return RunScript(ctx, buildISOScript, dir, nil, img.Kernel.Path, img.Initramfs, dir)
	})
	if err != nil {
		return ISO{}, err
	}
	return ISO{Path: filepath.Join(dir, "ipa.iso"), Built: built}, nil
}

// ISO is a built ISO image.
type ISO struct {
	Path string
	// Built reports whether this call built it (false: from the cache).
	Built bool
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

// StopGrace is how long a cancelled build script's processes have to
// exit after SIGTERM before SIGKILL.
const StopGrace = 20 * time.Second

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

// RunScript runs a build script with bash in dir, with env added to the
// environment, keeping the last lines of its output for the error; an
// exit code of 3 (a tool is missing) wraps ErrUnavailable. The script
// and its children (debootstrap, dpkg in the chroot) run in a process
// group of their own, which a cancelled ctx ends as a whole: SIGTERM
// first, so the script's EXIT trap removes its work directory, SIGKILL
// to what is left after StopGrace; RunScript returns once the group is
// gone.
func RunScript(ctx context.Context, script, dir string, env []string, args ...string) error {
	path := filepath.Join(dir, ".build.sh")
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		return err
	}
	defer os.Remove(path)
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	exited := make(chan struct{})
	cmd.Cancel = func() error {
		pgid := cmd.Process.Pid
		err := syscall.Kill(-pgid, syscall.SIGTERM)
		go func() {
			select {
			case <-exited:
			case <-time.After(StopGrace):
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
		}()
		return err
	}
	cmd.WaitDelay = StopGrace + 5*time.Second
	err := cmd.Run()
	if ctx.Err() != nil && cmd.Process != nil {
		// Until the group is gone (bash's children may outlive it).
		waitGroupGone(cmd.Process.Pid, StopGrace+5*time.Second)
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
	name := "build"
	if len(args) > 0 {
		name = filepath.Base(args[len(args)-1])
	}
	return fmt.Errorf("ramdisk: %s: %v: %s", name, err, strings.TrimSpace(tail))
}
