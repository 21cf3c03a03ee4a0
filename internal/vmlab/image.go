package vmlab

import (
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
	"path/filepath"

	"github.com/anvilmetal/anvil/ramdisk"
)

// KernelMeta is the Debian package a guest kernel comes from.
const KernelMeta = ramdisk.KernelMeta

// Kernel is a Debian kernel, unpacked from its package into the cache.
type Kernel = ramdisk.Kernel

// DebianKernel returns the kernel of the package Debian's
// linux-image-amd64 depends on (ramdisk.DebianKernel).
func DebianKernel(ctx context.Context, c Cache) (Kernel, error) { return ramdisk.DebianKernel(ctx, c) }

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

func fileSHA256(path string) (string, error) { return ramdisk.FileSHA256(path) }
