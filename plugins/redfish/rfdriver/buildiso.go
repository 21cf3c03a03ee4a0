package rfdriver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat12"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// Debian's boot loaders, the defaults of BootLoaders.
const (
	// DefaultISOLINUX is ISOLINUX's El Torito boot image (Debian package
	// isolinux).
	DefaultISOLINUX = "/usr/lib/ISOLINUX/isolinux.bin"
	// DefaultLDLinux is the ISOLINUX core module it loads (Debian package
	// syslinux-common).
	DefaultLDLinux = "/usr/lib/syslinux/modules/bios/ldlinux.c32"
	// DefaultGRUBEFI is Debian's monolithic GRUB for CD boot (Debian
	// package grub-efi-amd64-bin): it reads the CD's /boot/grub/grub.cfg.
	DefaultGRUBEFI = "/usr/lib/grub/x86_64-efi/monolithic/gcdx64.efi"
)

// BootISOLabel is the volume label of an ISO that BuildBootISO builds.
const BootISOLabel = "ANVIL_BOOT"

// ErrNoBootLoader is matched when BuildBootISO finds neither a BIOS nor
// a UEFI boot loader to build with.
var ErrNoBootLoader = errors.New("no boot loader to build the boot ISO with")

// BootLoaders are the boot loader files that a boot ISO built from a
// kernel and a ramdisk is made with, as Ironic's isolinux_bin,
// ldlinux_c32 and its EFI boot loader are. An empty field leaves that
// firmware's entry out: without ISOLINUX (or LDLinux) the ISO does not
// boot with BIOS, without GRUBEFI not with UEFI.
type BootLoaders struct {
	ISOLINUX string // isolinux.bin
	LDLinux  string // ldlinux.c32, which isolinux.bin loads
	// GRUBEFI is an x86_64 EFI GRUB image whose prefix is the CD's
	// /boot/grub, so that it reads /boot/grub/grub.cfg there, or else
	// the grub.cfg beside it (Debian's gcdx64.efi does); it becomes
	// EFI/BOOT/BOOTX64.EFI of the EFI system partition image.
	GRUBEFI string
}

// DefaultBootLoaders returns Debian's loaders, each only when its file
// exists.
func DefaultBootLoaders() BootLoaders {
	var l BootLoaders
	if regular(DefaultISOLINUX) && regular(DefaultLDLinux) {
		l.ISOLINUX, l.LDLinux = DefaultISOLINUX, DefaultLDLinux
	}
	if regular(DefaultGRUBEFI) {
		l.GRUBEFI = DefaultGRUBEFI
	}
	return l
}

func regular(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// BIOS reports whether the loaders give the ISO a BIOS boot entry.
func (l BootLoaders) BIOS() bool { return l.ISOLINUX != "" && l.LDLinux != "" }

// UEFI reports whether the loaders give the ISO a UEFI boot entry.
func (l BootLoaders) UEFI() bool { return l.GRUBEFI != "" }

// Paths of the files of a built boot ISO.
const (
	bootISOKernel   = "/vmlinuz"
	bootISORamdisk  = "/initrd"
	bootISOLinuxBin = "/isolinux/isolinux.bin"
	bootISOLinuxCfg = "/isolinux/isolinux.cfg"
	bootISOGrubCfg  = "/boot/grub/grub.cfg"
	bootISOESP      = "/boot/esp.img"
	bootISOCatalog  = "/boot/boot.cat"
	espBootLoader   = "/EFI/BOOT/BOOTX64.EFI"
	espGrubCfg      = "/EFI/BOOT/grub.cfg"
)

// isolinuxConfig is the BIOS boot configuration of a built ISO: one
// entry, booted at once, with the kernel parameters on its append line.
func isolinuxConfig(args string) string {
	return "default boot\nprompt 0\ntimeout 0\n\nlabel boot\n  kernel " + bootISOKernel + "\n  append initrd=" + bootISORamdisk +
		strings.TrimRight(" "+args, " ") + "\n"
}

// grubConfig is the UEFI boot configuration of a built ISO. root is
// searched for first (the ISO's label), so that the same file also works
// when GRUB reads the copy in the EFI system partition.
func grubConfig(args string) string {
	return "search --no-floppy --set=root --label " + BootISOLabel + "\nset default=0\nset timeout=0\n\nmenuentry \"boot\" {\n  linux " +
		bootISOKernel + strings.TrimRight(" "+args, " ") + "\n  initrd " + bootISORamdisk + "\n}\n"
}

// BootISOReport says what BuildBootISO wrote: the firmware it boots
// with and the size of the EFI system partition image (0 without UEFI).
type BootISOReport struct {
	BIOS, UEFI bool
	ESPSize    int64
}

// BuildBootISO writes to dst a bootable ISO 9660 image (Rock Ridge,
// labelled BootISOLabel) of kernel and ramdisk, as Ironic builds one for
// virtual media from deploy_kernel and deploy_ramdisk: an El Torito boot
// catalog with a BIOS no-emulation entry for ISOLINUX (load size 4, with
// a boot info table) whose isolinux.cfg boots the kernel with args, and
// a UEFI entry for an EFI system partition image (FAT12) holding GRUB as
// EFI/BOOT/BOOTX64.EFI and a grub.cfg, GRUB reading the ISO's
// /boot/grub/grub.cfg whose linux line carries the same args. The
// entries present are those the loaders allow (ErrNoBootLoader with
// neither). work is a scratch directory, emptied again.
func BuildBootISO(ctx context.Context, kernel, ramdisk io.Reader, args string, l BootLoaders, work string, dst *os.File) (BootISOReport, error) {
	var rep BootISOReport
	if strings.ContainsAny(args, "\r\n") {
		return rep, fmt.Errorf("redfish: boot ISO: kernel arguments contain a line break")
	}
	if !l.BIOS() && !l.UEFI() {
		return rep, fmt.Errorf("redfish: boot ISO: %w (ISOLINUX with ldlinux.c32, or GRUB for EFI: Debian packages isolinux, syslinux-common, grub-efi-amd64-bin)", ErrNoBootLoader)
	}
	tree, err := os.MkdirTemp(work, "bootiso-")
	if err != nil {
		return rep, fmt.Errorf("redfish: boot ISO: %w", err)
	}
	defer os.RemoveAll(tree)
	put := func(p string, r io.Reader) error {
		local := filepath.Join(tree, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(local, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, ctxReader{ctx, r})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	}
	putFile := func(p, src string) error {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		return put(p, f)
	}
	if err := put(bootISOKernel, kernel); err != nil {
		return rep, fmt.Errorf("redfish: boot ISO: the kernel: %w", err)
	}
	if err := put(bootISORamdisk, ramdisk); err != nil {
		return rep, fmt.Errorf("redfish: boot ISO: the ramdisk: %w", err)
	}
	// The boot catalog's directory, whichever entries there are.
	if err := os.MkdirAll(filepath.Join(tree, filepath.Dir(filepath.FromSlash(bootISOCatalog))), 0o755); err != nil {
		return rep, fmt.Errorf("redfish: boot ISO: %w", err)
	}
	et := &iso9660.ElTorito{BootCatalog: bootISOCatalog}
	if l.BIOS() {
		if err := putFile(bootISOLinuxBin, l.ISOLINUX); err != nil {
			return rep, fmt.Errorf("redfish: boot ISO: ISOLINUX: %w", err)
		}
		if err := putFile("/isolinux/ldlinux.c32", l.LDLinux); err != nil {
			return rep, fmt.Errorf("redfish: boot ISO: ISOLINUX: %w", err)
		}
		if err := put(bootISOLinuxCfg, strings.NewReader(isolinuxConfig(args))); err != nil {
			return rep, fmt.Errorf("redfish: boot ISO: %w", err)
		}
		bios := &iso9660.ElToritoEntry{Platform: iso9660.BIOS, Emulation: iso9660.NoEmulation, BootFile: bootISOLinuxBin, BootTable: true}
		bios.SetLoadSize(4)
		et.Entries = append(et.Entries, bios)
		rep.BIOS = true
	}
	if l.UEFI() {
		cfg := grubConfig(args)
		if err := put(bootISOGrubCfg, strings.NewReader(cfg)); err != nil {
			return rep, fmt.Errorf("redfish: boot ISO: %w", err)
		}
		size, err := writeESP(filepath.Join(tree, filepath.FromSlash(bootISOESP)), l.GRUBEFI, cfg)
		if err != nil {
			return rep, fmt.Errorf("redfish: boot ISO: EFI system partition: %w", err)
		}
		et.Entries = append(et.Entries, &iso9660.ElToritoEntry{Platform: iso9660.EFI, Emulation: iso9660.NoEmulation, BootFile: bootISOESP})
		rep.UEFI, rep.ESPSize = true, size
	}
	// Fixed file times: what the ISO holds depends on its inputs alone.
	epoch := time.Unix(1700000000, 0)
	if err := filepath.Walk(tree, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, epoch, epoch)
	}); err != nil {
		return rep, fmt.Errorf("redfish: boot ISO: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if err := dst.Truncate(0); err != nil {
		return rep, fmt.Errorf("redfish: boot ISO: %w", err)
	}
	out, err := iso9660.Create(file.New(dst, false), 0, 0, isoSector, tree)
	if err != nil {
		return rep, fmt.Errorf("redfish: boot ISO: %w", err)
	}
	if err := out.Finalize(iso9660.FinalizeOptions{RockRidge: true, DeepDirectories: true, ElTorito: et, VolumeIdentifier: BootISOLabel}); err != nil {
		return rep, fmt.Errorf("redfish: boot ISO: write the ISO: %w", err)
	}
	if err := placeBootRecord(dst); err != nil {
		return rep, fmt.Errorf("redfish: boot ISO: %w", err)
	}
	return rep, nil
}

// writeESP writes the EFI system partition image: a FAT12 file system
// (reproducible volume id) with grubEFI as EFI/BOOT/BOOTX64.EFI and cfg
// as EFI/BOOT/grub.cfg, sized to its content rounded up to 1 MiB with
// room to spare. It returns the image's size.
func writeESP(local, grubEFI, cfg string) (int64, error) {
	grub, err := os.ReadFile(grubEFI)
	if err != nil {
		return 0, err
	}
	const mib = 1 << 20
	size := (int64(len(grub)+len(cfg))+512<<10+mib-1)/mib*mib + mib
	if size > fat12.Fat12MaxSize {
		return 0, fmt.Errorf("GRUB image %s is %d bytes, too large for the EFI image", grubEFI, len(grub))
	}
	f, err := os.OpenFile(local, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return 0, err
	}
	fs, err := fat12.Create(file.New(f, false), size, 0, 512, "ANVIL_ESP", true)
	if err != nil {
		return 0, err
	}
	if err := fs.Mkdir("/EFI/BOOT"); err != nil {
		return 0, err
	}
	for _, w := range []struct {
		p string
		b []byte
	}{{espBootLoader, grub}, {espGrubCfg, []byte(cfg)}} {
		out, err := fs.OpenFile(w.p, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", w.p, err)
		}
		_, err = out.Write(w.b)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", w.p, err)
		}
	}
	if st, err := f.Stat(); err != nil || st.Size() != size {
		return 0, fmt.Errorf("the FAT file system outgrew its %d-byte image", size)
	}
	return size, f.Close()
}

// bootISOKey is the cache key of a built boot ISO: a digest of what it
// is built from (the identities of the kernel and the ramdisk, the
// arguments, the loader files' names, sizes and times, the format).
func bootISOKey(kernelID, ramdiskID, args string, l BootLoaders) string {
	h := sha256.New()
	parts := []string{"anvil-boot-iso-v1", kernelID, ramdiskID, args}
	for _, p := range []string{l.ISOLINUX, l.LDLinux, l.GRUBEFI} {
		parts = append(parts, fileID(p))
	}
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// fileID identifies a local file by its path, size and modification
// time ("" for ""; the error for a file that cannot be read).
func fileID(p string) string {
	if p == "" {
		return ""
	}
	st, err := os.Stat(p)
	if err != nil {
		return p + ":" + err.Error()
	}
	return fmt.Sprintf("%s:%d:%d", p, st.Size(), st.ModTime().UnixNano())
}

// maxBuiltISOs is how many built boot ISOs the cache keeps; the least
// recently used one beyond it is removed.
const maxBuiltISOs = 8

// bootISOSource is a kernel or ramdisk reference, its key and the field
// that holds it ("driver_info" when empty, or "instance_info").
type bootISOSource struct{ key, ref, field string }

// open fetches s through c.open, naming s's field in a
// DeployISOTooLargeError.
func (s bootISOSource) open(ctx context.Context, c *isoCache, node string) (*os.File, string, error) {
	f, _, sum, err := c.open(ctx, node, s.key, s.ref)
	var tl *DeployISOTooLargeError
	if errors.As(err, &tl) && s.field != "" {
		tl.Field = s.field
	}
	return f, sum, err
}

// builtISO returns the boot ISO of kernel and ramdisk with args, from
// the cache when it was built from the same inputs (BuildBootISO
// otherwise), opened for reading, and whether it was built now. The
// kernel and the ramdisk are fetched through the download cache
// (bounded, revalidated) and identified by their SHA-256, or a local
// file by its path, size and time.
func (c *isoCache) builtISO(ctx context.Context, node string, kernel, ramdisk bootISOSource, args string, l BootLoaders) (*os.File, bool, error) {
	kf, ksum, err := kernel.open(ctx, c, node)
	if err != nil {
		return nil, false, err
	}
	defer kf.Close()
	rf, rsum, err := ramdisk.open(ctx, c, node)
	if err != nil {
		return nil, false, err
	}
	defer rf.Close()
	id := func(sum, ref string) string {
		if sum != "" {
			return "sha256:" + sum
		}
		return "file:" + fileID(localPath(ref))
	}
	key := bootISOKey(id(ksum, kernel.ref), id(rsum, ramdisk.ref), args, l)
	unlock := c.lock("boot-iso:" + key)
	defer unlock()
	dir, err := c.scratch()
	if err != nil {
		return nil, false, err
	}
	final := filepath.Join(dir, "boot-"+key+".iso")
	if f, err := os.Open(final); err == nil {
		now := time.Now()
		_ = os.Chtimes(final, now, now)
		return f, false, nil
	}
	work, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return nil, false, fmt.Errorf("redfish: boot ISO: %w", err)
	}
	defer os.RemoveAll(work)
	out, err := os.Create(filepath.Join(work, "boot.iso"))
	if err != nil {
		return nil, false, fmt.Errorf("redfish: boot ISO: %w", err)
	}
	defer out.Close()
	if _, err := BuildBootISO(ctx, kf, rf, args, l, work, out); err != nil {
		return nil, false, err
	}
	if err := out.Close(); err != nil {
		return nil, false, fmt.Errorf("redfish: boot ISO: %w", err)
	}
	if err := os.Rename(out.Name(), final); err != nil {
		return nil, false, fmt.Errorf("redfish: boot ISO: %w", err)
	}
	c.pruneBuilt(dir)
	f, err := os.Open(final)
	if err != nil {
		return nil, false, fmt.Errorf("redfish: boot ISO: %w", err)
	}
	return f, true, nil
}

// pruneBuilt removes the least recently used built ISOs beyond
// maxBuiltISOs (an open one stays readable until it is closed).
func (c *isoCache) pruneBuilt(dir string) {
	all, _ := filepath.Glob(filepath.Join(dir, "boot-*.iso"))
	if len(all) <= maxBuiltISOs {
		return
	}
	type aged struct {
		p string
		t time.Time
	}
	var list []aged
	for _, p := range all {
		if st, err := os.Stat(p); err == nil {
			list = append(list, aged{p, st.ModTime()})
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].t.After(list[j].t) })
	for _, a := range list[min(maxBuiltISOs, len(list)):] {
		_ = os.Remove(a.p)
	}
}
