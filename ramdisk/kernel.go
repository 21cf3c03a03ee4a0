package ramdisk

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
		return fmt.Errorf("ramdisk: apt-get download %s left %d .deb files", pkg, len(debs))
	}
	deb := filepath.Join(dir, "kernel.deb")
	if err := os.Rename(debs[0], deb); err != nil {
		return err
	}
	got, err := FileSHA256(deb)
	if err != nil {
		return err
	}
	if got != sum {
		return fmt.Errorf("ramdisk: %s %s: downloaded archive has SHA-256 %s, the archive index says %s", pkg, version, got, sum)
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
		return fmt.Errorf("ramdisk: dpkg-deb --fsys-tarfile %s: %v: %s", deb, err, lastLine(stderr.Bytes()))
	}
	if extractErr != nil {
		return extractErr
	}
	if !found {
		return fmt.Errorf("ramdisk: %s %s has no boot/vmlinuz-*", pkg, version)
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
			return false, fmt.Errorf("ramdisk: kernel package: %w", err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if h.Typeflag != tar.TypeReg || !strings.HasPrefix(name, "boot/vmlinuz-") {
			continue
		}
		if h.Size > 256<<20 {
			return false, fmt.Errorf("ramdisk: kernel package: %s is %d bytes", name, h.Size)
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

// FileSHA256 is the hex SHA-256 of the file's contents.
func FileSHA256(path string) (string, error) {
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
