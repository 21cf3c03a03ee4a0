package vmlab

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// KernelMeta is the Debian package a guest kernel comes from.
const KernelMeta = "linux-image-amd64"

// Kernel is a Debian kernel, unpacked from its package into the cache.
type Kernel struct {
	// Package and Version are the Debian package's (the version
	// linux-image-amd64 depends on today, e.g. linux-image-6.1.0-57-amd64
	// 6.1.192-3).
	Package, Version string
	// Path is the kernel image (vmlinuz).
	Path string
	// Deb is the downloaded package, kept beside it for the modules a
	// bigger ramdisk needs.
	Deb string
}

// DebianKernel returns the kernel of the package Debian's
// linux-image-amd64 depends on, downloaded with `apt-get download` (no
// installation) and cached by package, version and the archive's SHA-256.
// Without apt, or when the package cannot be downloaded, the error wraps
// ErrUnavailable.
func DebianKernel(ctx context.Context, c Cache) (Kernel, error) {
	for _, tool := range []string{"apt-cache", "apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			return Kernel{}, fmt.Errorf("%w: no %s to fetch a Debian kernel", ErrUnavailable, tool)
		}
	}
	pkg, err := kernelPackage(ctx)
	if err != nil {
		return Kernel{}, err
	}
	fields, err := aptShow(ctx, pkg)
	if err != nil {
		return Kernel{}, err
	}
	version, sum := fields["Version"], strings.ToLower(fields["SHA256"])
	if version == "" || len(sum) != 64 {
		return Kernel{}, fmt.Errorf("%w: apt-cache show %s gave no Version or SHA256", ErrUnavailable, pkg)
	}
	in := Inputs{"kind": "kernel", "package": pkg, "version": version, "sha256": sum}
	dir, _, err := c.Get(in, func(dir string) error {
		return buildKernel(ctx, dir, pkg, version, sum)
	})
	if err != nil {
		return Kernel{}, err
	}
	return Kernel{Package: pkg, Version: version, Path: filepath.Join(dir, "vmlinuz"), Deb: filepath.Join(dir, "kernel.deb")}, nil
}

// kernelPackage resolves the versioned kernel package the meta package
// depends on ("linux-image-6.1.0-57-amd64").
func kernelPackage(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "depends", KernelMeta).Output()
	if err != nil {
		return "", fmt.Errorf("%w: apt-cache depends %s: %v", ErrUnavailable, KernelMeta, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		dep, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Depends: ")
		if ok && strings.HasPrefix(dep, "linux-image-") && strings.HasSuffix(dep, "-amd64") {
			return dep, nil
		}
	}
	return "", fmt.Errorf("%w: apt-cache depends %s names no linux-image-*-amd64", ErrUnavailable, KernelMeta)
}

// aptShow returns the candidate version's control fields.
func aptShow(ctx context.Context, pkg string) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, "apt-cache", "show", "--no-all-versions", pkg).Output()
	if err != nil {
		return nil, fmt.Errorf("%w: apt-cache show %s: %v", ErrUnavailable, pkg, err)
	}
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break // the first stanza only
		}
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(k, " ") {
			fields[k] = v
		}
	}
	return fields, nil
}

func buildKernel(ctx context.Context, dir, pkg, version, sum string) error {
	cmd := exec.CommandContext(ctx, "apt-get", "download", "-qq", pkg+"="+version)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: apt-get download %s=%s: %v: %s", ErrUnavailable, pkg, version, err, lastLine(out))
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("vmlab: apt-get download %s left %d .deb files", pkg, len(debs))
	}
	deb := filepath.Join(dir, "kernel.deb")
	if err := os.Rename(debs[0], deb); err != nil {
		return err
	}
	got, err := fileSHA256(deb)
	if err != nil {
		return err
	}
	if got != sum {
		return fmt.Errorf("vmlab: %s %s: downloaded archive has SHA-256 %s, the archive index says %s", pkg, version, got, sum)
	}
	// dpkg-deb unpacks the package's data (whatever its compression) as a
	// tar stream; only the kernel image is taken from it.
	x := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	stdout, err := x.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	x.Stderr = &stderr
	if err := x.Start(); err != nil {
		return err
	}
	found, extractErr := extractVmlinuz(stdout, filepath.Join(dir, "vmlinuz"))
	_, _ = io.Copy(io.Discard, stdout)
	if err := x.Wait(); err != nil {
		return fmt.Errorf("vmlab: dpkg-deb --fsys-tarfile %s: %v: %s", deb, err, lastLine(stderr.Bytes()))
	}
	if extractErr != nil {
		return extractErr
	}
	if !found {
		return fmt.Errorf("vmlab: %s %s has no boot/vmlinuz-*", pkg, version)
	}
	return nil
}

func extractVmlinuz(r io.Reader, dst string) (bool, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("vmlab: kernel package: %w", err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if h.Typeflag != tar.TypeReg || !strings.HasPrefix(name, "boot/vmlinuz-") {
			continue
		}
		if h.Size > 256<<20 {
			return false, fmt.Errorf("vmlab: kernel package: %s is %d bytes", name, h.Size)
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return false, err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return false, err
		}
		return true, f.Close()
	}
}

// MarkerPrefix starts the line the marker initramfs prints on the serial
// console, followed by the value of the kernel parameter anvil.marker=.
const MarkerPrefix = "ANVIL-NETBOOT-OK"

// CmdlinePrefix starts the line with the whole kernel command line.
const CmdlinePrefix = "ANVIL-CMDLINE"

// markerInit is the marker initramfs's /init. The console lines go to
// /dev/console (the kernel's console= device), and poweroff -f ends the
// VM at once (QEMU runs with -no-reboot). The kernel still prints to the
// same serial port while /init runs (a clock source switch, a late
// driver), and such a message lands in the middle of a line written by
// /init; so /init first lowers the console log level to emergencies
// only, and the lines it prints are whole.
const markerInit = `#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
echo 1 > /proc/sys/kernel/printk
marker=
for word in $(cat /proc/cmdline); do
	case "$word" in
	anvil.marker=*) marker="${word#anvil.marker=}" ;;
	esac
done
echo "` + MarkerPrefix + ` $marker"
echo "` + CmdlinePrefix + ` $(cat /proc/cmdline)"
poweroff -f
`

// busyboxApplets are the applets markerInit uses.
var busyboxApplets = []string{"sh", "mount", "cat", "echo", "poweroff"}

// BusyboxPath is where Debian's busybox-static puts its static binary.
const BusyboxPath = "/bin/busybox"

// MarkerInitramfs returns a gzip'd newc initramfs holding a static busybox
// and an /init that prints MarkerPrefix and the anvil.marker= value, then
// the kernel command line after CmdlinePrefix, and powers the machine
// off. It is cached by busybox's SHA-256 and the init script; the same
// inputs give the same bytes.
func MarkerInitramfs(c Cache, busybox string) (string, error) {
	if busybox == "" {
		busybox = BusyboxPath
	}
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return "", fmt.Errorf("%w: %v (Debian package busybox-static)", ErrUnavailable, err)
	}
	if err := checkStatic(bin); err != nil {
		return "", fmt.Errorf("%w: %s: %v (install busybox-static)", ErrUnavailable, busybox, err)
	}
	sum := sha256.Sum256(bin)
	in := Inputs{"kind": "marker-initramfs", "busybox": hex.EncodeToString(sum[:]), "init": markerInit, "format": "newc+gzip/1"}
	dir, _, err := c.Get(in, func(dir string) error {
		var buf bytes.Buffer
		if err := writeMarkerInitramfs(&buf, bin); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "initrd.gz"), buf.Bytes(), 0o644)
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "initrd.gz"), nil
}

func writeMarkerInitramfs(w io.Writer, busybox []byte) error {
	entries := []cpioEntry{
		{Name: "bin", Mode: fs.ModeDir | 0o755},
		{Name: "dev", Mode: fs.ModeDir | 0o755},
		// The kernel opens /dev/console for init's standard streams
		// before it runs /init; without the node init prints nowhere.
		{Name: "dev/console", Mode: fs.ModeDevice | fs.ModeCharDevice | 0o600, RdevMajor: 5, RdevMinor: 1},
		{Name: "proc", Mode: fs.ModeDir | 0o755},
		{Name: "sys", Mode: fs.ModeDir | 0o755},
		{Name: "bin/busybox", Mode: 0o755, Data: busybox},
	}
	for _, a := range busyboxApplets {
		entries = append(entries, cpioEntry{Name: "bin/" + a, Mode: fs.ModeSymlink | 0o777, Data: []byte("busybox")})
	}
	entries = append(entries, cpioEntry{Name: "init", Mode: 0o755, Data: []byte(markerInit)})
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	// The gzip header carries no name and a zero time: deterministic.
	if err := writeNewc(zw, entries); err != nil {
		return err
	}
	return zw.Close()
}

// checkStatic refuses a dynamically linked binary: the initramfs has no
// libc.
func checkStatic(bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("not an ELF binary: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked")
		}
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
