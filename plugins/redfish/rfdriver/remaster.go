package rfdriver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/fat12"
	"github.com/diskfs/go-diskfs/filesystem/fat16"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	"github.com/diskfs/go-diskfs/partition/mbr"

	"github.com/anvilmetal/anvil/driver"
)

// ErrRemaster is matched by every failure to re-master a deploy ISO that
// is the ISO's fault (not an ISO 9660 image, no El Torito boot catalog, no
// kernel line in its boot loader configuration).
var ErrRemaster = errors.New("cannot re-master the deploy ISO")

// DefaultMaxDeployISOSize is the largest deploy ISO the
// redfish-virtual-media boot interface fetches and re-masters when
// Options.MaxDeployISOSize is unset: 2 GiB, four times a stock IPA ISO,
// while a re-master needs about three times the ISO's size of scratch
// disk (the cached ISO, its extracted tree and the per-node ISO).
const DefaultMaxDeployISOSize int64 = 2 << 30

// DeployISOTooLargeError refuses a deploy ISO over
// Options.MaxDeployISOSize, naming the node, the driver_info field that
// named the ISO and the limit. Size is what the server announced or what
// the file measures, or -1 when a download without a length passed the
// limit.
type DeployISOTooLargeError struct {
	Node  string
	Field string // "driver_info"
	Key   string // "redfish_deploy_iso", "deploy_iso", "deploy_kernel", ...
	Limit int64
	Size  int64
}

func (e *DeployISOTooLargeError) Error() string {
	size := "more than the limit"
	if e.Size >= 0 {
		size = fmt.Sprintf("%d bytes", e.Size)
	}
	what := "deploy ISO"
	if e.Key != "redfish_deploy_iso" && e.Key != "deploy_iso" {
		what = "image"
	}
	return fmt.Sprintf("redfish: node %s: the %s named by %s[%q] is %s, over the limit of %d bytes (Options.MaxDeployISOSize)", what,
		e.Node, e.Field, e.Key, size, e.Limit)
}

// Unwrap gives the driver.InvalidParameterError it amounts to (the
// node's input is at fault), so errors.Is(err, driver.ErrInvalidParameter)
// holds and the plugin protocol carries it as an invalid parameter.
func (e *DeployISOTooLargeError) Unwrap() error {
	return &driver.InvalidParameterError{Node: e.Node, Kind: driver.KindBoot, Impl: ImplVirtualMedia, Field: e.Field, Key: e.Key,
		Expected: fmt.Sprintf("a deploy ISO of at most %d bytes (Options.MaxDeployISOSize)", e.Limit)}
}

// Limits on what is read from a deploy ISO before it is trusted.
const (
	maxISOEntries     = 200000  // files and directories in the tree
	maxBootConfigSize = 1 << 20 // a grub.cfg or isolinux.cfg that is patched
	maxCatalogBytes   = 4 * 2048
	isoSector         = 2048
)

// RemasterReport says what a re-master changed: the boot loader
// configurations patched (ISO paths) and how many kernel lines got the
// parameters, and the El Torito entries carried over.
type RemasterReport struct {
	Configs     []string
	KernelLines int
	BootEntries []BootEntry
	Label       string
}

// BootEntry is one El Torito boot catalog entry as a re-master reads and
// writes it: the platform (0 BIOS, 0xef UEFI), the emulation, the load
// segment, the system type, the sector count (512-byte sectors loaded by
// the firmware), the image's first sector, and the ISO path of the file
// that starts there ("" when the image is not a file of the tree).
type BootEntry struct {
	Platform  byte
	Emulation byte
	LoadSeg   uint16
	SysType   byte
	Count     uint16
	LBA       uint32
	Path      string
	BootTable bool
}

// eltorito is what readVolumeDescriptors finds in an ISO's volume
// descriptor set.
type eltorito struct {
	catalogLBA uint32
	joliet     bool
}

// readVolumeDescriptors reads the volume descriptor set: the El Torito
// boot record's catalog sector and whether a Joliet supplementary
// descriptor is present.
func readVolumeDescriptors(r io.ReaderAt) (eltorito, error) {
	var et eltorito
	found := false
	buf := make([]byte, isoSector)
	for i := int64(16); i < 16+64; i++ {
		if _, err := r.ReadAt(buf, i*isoSector); err != nil {
			return et, fmt.Errorf("%w: volume descriptor %d: %v", ErrRemaster, i, err)
		}
		if string(buf[1:6]) != "CD001" {
			return et, fmt.Errorf("%w: sector %d is not an ISO 9660 volume descriptor", ErrRemaster, i)
		}
		switch buf[0] {
		case 0:
			if strings.TrimRight(string(buf[7:39]), "\x00") == "EL TORITO SPECIFICATION" {
				et.catalogLBA = binary.LittleEndian.Uint32(buf[0x47:0x4b])
				found = true
			}
		case 2:
			if esc := string(buf[88:91]); esc == "%/@" || esc == "%/C" || esc == "%/E" {
				et.joliet = true
			}
		case 255:
			if !found {
				return et, fmt.Errorf("%w: no El Torito boot record (the ISO is not bootable)", ErrRemaster)
			}
			return et, nil
		}
	}
	return et, fmt.Errorf("%w: no volume descriptor set terminator in 64 sectors", ErrRemaster)
}

// readCatalog parses the El Torito boot catalog at lba: the validation
// entry, the initial entry and every section's entries. Only bootable
// entries are returned.
func readCatalog(r io.ReaderAt, lba uint32) ([]BootEntry, error) {
	b := make([]byte, maxCatalogBytes)
	n, err := r.ReadAt(b, int64(lba)*isoSector)
	if n < 64 {
		return nil, fmt.Errorf("%w: boot catalog at sector %d: %v", ErrRemaster, lba, err)
	}
	b = b[:n]
	var sum uint16
	for i := 0; i < 32; i += 2 {
		sum += binary.LittleEndian.Uint16(b[i : i+2])
	}
	if b[0] != 1 || b[30] != 0x55 || b[31] != 0xaa || sum != 0 {
		return nil, fmt.Errorf("%w: boot catalog at sector %d has no valid validation entry", ErrRemaster, lba)
	}
	entry := func(e []byte, platform byte) BootEntry {
		return BootEntry{Platform: platform, Emulation: e[1] & 0x0f, LoadSeg: binary.LittleEndian.Uint16(e[2:4]),
			SysType: e[4], Count: binary.LittleEndian.Uint16(e[6:8]), LBA: binary.LittleEndian.Uint32(e[8:12])}
	}
	var out []BootEntry
	if b[32] == 0x88 {
		out = append(out, entry(b[32:64], b[1]))
	}
	for off := 64; off+32 <= len(b); {
		h := b[off : off+32]
		if h[0] != 0x90 && h[0] != 0x91 {
			break
		}
		platform, count := h[1], int(binary.LittleEndian.Uint16(h[2:4]))
		off += 32
		for k := 0; k < count && off+32 <= len(b); off += 32 {
			e := b[off : off+32]
			if e[0] == 0x44 { // An extension record belongs to the entry before it.
				continue
			}
			if e[0] == 0x88 {
				out = append(out, entry(e, platform))
			}
			k++
		}
		if h[0] == 0x91 {
			break
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: the boot catalog has no bootable entry", ErrRemaster)
	}
	return out, nil
}

// isBootConfig reports whether an ISO path names a boot loader
// configuration that a re-master patches, and whether it is grub's.
func isBootConfig(p string) (ok, grub bool) {
	switch strings.ToLower(path.Base(p)) {
	case "grub.cfg":
		return true, true
	case "isolinux.cfg", "syslinux.cfg":
		return true, false
	}
	return false, false
}

// appendKernelArgs appends args to every kernel line of a boot loader
// configuration: grub's linux and linuxefi lines, isolinux's and
// syslinux's append lines. Everything else, line endings included, is
// kept byte for byte. A grub line continued with a backslash is left
// alone (the arguments would land on the next line's command).
func appendKernelArgs(text []byte, grub bool, args string) ([]byte, int) {
	lines := bytes.SplitAfter(text, []byte("\n"))
	n := 0
	for i, l := range lines {
		body := bytes.TrimRight(l, "\r\n")
		eol := l[len(body):]
		fields := bytes.Fields(body)
		if len(fields) == 0 {
			continue
		}
		word := string(fields[0])
		kernel := grub && (word == "linux" || word == "linuxefi") || !grub && strings.EqualFold(word, "append")
		if !kernel || (grub && len(fields) < 2) {
			continue
		}
		body = bytes.TrimRight(body, " \t")
		if bytes.HasSuffix(body, []byte(`\`)) {
			continue
		}
		lines[i] = append(append(append(append([]byte{}, body...), ' '), args...), eol...)
		n++
	}
	return bytes.Join(lines, nil), n
}

// ctxReader stops a long copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Remaster writes to dst a copy of the bootable ISO src (size bytes) whose
// boot loader configurations (every grub.cfg, isolinux.cfg and
// syslinux.cfg of the tree, and every grub.cfg in the FAT file system of
// a UEFI boot image, where a UEFI grub loaded from it looks first) have
// args appended to each kernel line, as Ironic's per-node boot ISO
// carries the node's kernel parameters. Every
// other file is copied unchanged with its Rock Ridge mode and times, the
// volume label is kept, and the El Torito boot catalog is rebuilt with
// the same entries (platform, emulation, load segment, system type,
// sector count) pointing at the same images, the isolinux boot info
// table included when the original had one. An image that is not a file
// of the tree (a hidden EFI image) is carried over as a hidden file of
// its sector count. The system area (an isohybrid MBR or GPT for USB
// sticks) is not carried over: a virtual CD boots through El Torito.
// work is a scratch directory that Remaster empties.
func Remaster(ctx context.Context, src *os.File, size int64, dst *os.File, args, work string) (RemasterReport, error) {
	var rep RemasterReport
	if strings.ContainsAny(args, "\r\n") {
		return rep, fmt.Errorf("redfish: re-master: kernel arguments contain a line break")
	}
	et, err := readVolumeDescriptors(src)
	if err != nil {
		return rep, err
	}
	entries, err := readCatalog(src, et.catalogLBA)
	if err != nil {
		return rep, err
	}
	isoFS, err := iso9660.Read(file.New(src, true), size, 0, isoSector)
	if err != nil {
		return rep, fmt.Errorf("%w: %v", ErrRemaster, err)
	}
	rep.Label = strings.TrimRight(isoFS.Label(), "\x00 ")
	tree := filepath.Join(work, "tree")
	if err := os.RemoveAll(tree); err != nil {
		return rep, fmt.Errorf("redfish: re-master: %w", err)
	}
	if err := os.MkdirAll(tree, 0o700); err != nil {
		return rep, fmt.Errorf("redfish: re-master: %w", err)
	}
	defer os.RemoveAll(tree)

	byLBA := map[uint32]string{}
	count := 0
	var walk func(dir string) error
	walk = func(dir string) error {
		des, err := isoFS.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("%w: read directory %s: %v", ErrRemaster, dir, err)
		}
		for _, de := range des {
			if err := ctx.Err(); err != nil {
				return err
			}
			if count++; count > maxISOEntries {
				return fmt.Errorf("%w: more than %d files", ErrRemaster, maxISOEntries)
			}
			name := de.Name()
			if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
				return fmt.Errorf("%w: invalid file name %q in %s", ErrRemaster, name, dir)
			}
			p := path.Join(dir, name)
			local := filepath.Join(tree, filepath.FromSlash(p))
			info, err := de.Info()
			if err != nil {
				return fmt.Errorf("%w: %s: %v", ErrRemaster, p, err)
			}
			st, _ := info.Sys().(*iso9660.StatT)
			mode := info.Mode()
			switch {
			case mode.IsDir():
				if err := os.Mkdir(local, 0o755); err != nil {
					return fmt.Errorf("redfish: re-master: %w", err)
				}
				if err := walk(p); err != nil {
					return err
				}
				_ = os.Chtimes(local, info.ModTime(), info.ModTime())
			case mode&fs.ModeSymlink != 0:
				if st == nil || st.LinkTarget == "" {
					return fmt.Errorf("%w: symbolic link %s without a target", ErrRemaster, p)
				}
				if err := os.Symlink(st.LinkTarget, local); err != nil {
					return fmt.Errorf("redfish: re-master: %w", err)
				}
			default:
				if err := extractFile(ctx, isoFS, p, local, info); err != nil {
					return err
				}
				if st != nil && info.Size() > 0 {
					if _, dup := byLBA[st.Location]; !dup {
						byLBA[st.Location] = p
					}
				}
				if ok, grub := isBootConfig(p); ok {
					n, err := patchConfig(local, grub, args)
					if err != nil {
						return fmt.Errorf("redfish: re-master: %s: %w", p, err)
					}
					if n > 0 {
						rep.Configs = append(rep.Configs, p)
						rep.KernelLines += n
					}
				}
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		return rep, err
	}
	opts := &iso9660.ElTorito{}
	// The old catalog is regenerated in its place (or hidden, as it was).
	if p, ok := byLBA[et.catalogLBA]; ok {
		if err := os.Remove(filepath.Join(tree, filepath.FromSlash(p))); err != nil {
			return rep, fmt.Errorf("redfish: re-master: %w", err)
		}
		opts.BootCatalog = "/" + p
	} else {
		opts.BootCatalog = "/boot.catalog"
		opts.HideBootCatalog = true
	}
	for i, e := range entries {
		p, ok := byLBA[e.LBA]
		hidden := !ok
		if hidden {
			if e.Count == 0 {
				return rep, fmt.Errorf("%w: boot entry %d (sector %d) is neither a file of the ISO nor of a known size", ErrRemaster, i, e.LBA)
			}
			p = fmt.Sprintf("anvil-eltorito-%d.img", i)
			if err := extractSectors(src, e.LBA, int64(e.Count)*512, filepath.Join(tree, p)); err != nil {
				return rep, err
			}
		} else {
			e.Path = p
		}
		e.BootTable = hasBootInfoTable(src, e.LBA)
		if e.Platform == byte(iso9660.EFI) {
			// UEFI grub often reads the grub.cfg of the EFI system
			// partition it was loaded from, not the ISO's.
			cfgs, n, err := patchESP(ctx, filepath.Join(tree, filepath.FromSlash(p)), args)
			if err != nil {
				return rep, fmt.Errorf("redfish: re-master: EFI image %s: %w", p, err)
			}
			for _, c := range cfgs {
				rep.Configs = append(rep.Configs, p+":"+c)
			}
			rep.KernelLines += n
		}
		rep.BootEntries = append(rep.BootEntries, e)
		ent := &iso9660.ElToritoEntry{Platform: iso9660.Platform(e.Platform), Emulation: iso9660.Emulation(e.Emulation),
			BootFile: "/" + p, HideBootFile: hidden, LoadSegment: e.LoadSeg, BootTable: e.BootTable, SystemType: mbr.Type(e.SysType)}
		ent.SetLoadSize(e.Count)
		opts.Entries = append(opts.Entries, ent)
	}
	if rep.KernelLines == 0 {
		return rep, fmt.Errorf("%w: no kernel line (grub linux/linuxefi, isolinux append) in any grub.cfg, isolinux.cfg or syslinux.cfg, nor in the EFI image's grub.cfg", ErrRemaster)
	}
	out, err := iso9660.Create(file.New(dst, false), 0, 0, isoSector, tree)
	if err != nil {
		return rep, fmt.Errorf("redfish: re-master: %w", err)
	}
	if err := out.Finalize(iso9660.FinalizeOptions{RockRidge: true, Joliet: et.joliet, DeepDirectories: true,
		ElTorito: opts, VolumeIdentifier: rep.Label}); err != nil {
		return rep, fmt.Errorf("redfish: re-master: write the ISO: %w", err)
	}
	if err := placeBootRecord(dst); err != nil {
		return rep, fmt.Errorf("redfish: re-master: %w", err)
	}
	return rep, nil
}

// bootRecordSector is where El Torito puts the boot record volume
// descriptor: sector 17, right after the primary volume descriptor.
// Firmware reads that sector and no other (SeaBIOS fails a CD boot with
// "Could not read from CDROM (code 0004)" when it holds anything else).
const bootRecordSector = 17

// placeBootRecord moves the El Torito boot record of the ISO in f to
// sector 17 when the writer put it later in the volume descriptor set
// (go-diskfs writes the Joliet supplementary descriptor first), shifting
// the descriptors between up by one: descriptors do not refer to their
// own position, only the set's order changes.
func placeBootRecord(f *os.File) error {
	var set [][]byte
	boot := -1
	for i := 0; i < 64; i++ {
		buf := make([]byte, isoSector)
		if _, err := f.ReadAt(buf, int64(16+i)*isoSector); err != nil {
			return fmt.Errorf("volume descriptor %d: %w", 16+i, err)
		}
		if string(buf[1:6]) != "CD001" {
			return fmt.Errorf("sector %d is not an ISO 9660 volume descriptor", 16+i)
		}
		set = append(set, buf)
		if buf[0] == 0 && boot < 0 {
			boot = i
		}
		if buf[0] == 255 {
			break
		}
	}
	if set[len(set)-1][0] != 255 {
		return errors.New("no volume descriptor set terminator in 64 sectors")
	}
	first := bootRecordSector - 16
	if boot < 0 {
		return errors.New("the written ISO has no El Torito boot record")
	}
	if boot == first {
		return nil
	}
	if boot < first || set[0][0] != 1 {
		return fmt.Errorf("unexpected volume descriptor order (boot record at sector %d, sector 16 of type %d)", 16+boot, set[0][0])
	}
	br := set[boot]
	copy(set[first+1:boot+1], set[first:boot])
	set[first] = br
	for i := first; i <= boot; i++ {
		if _, err := f.WriteAt(set[i], int64(16+i)*isoSector); err != nil {
			return fmt.Errorf("volume descriptor %d: %w", 16+i, err)
		}
	}
	return nil
}

// maxESPSize is the largest EFI system partition image whose grub.cfg
// files a re-master patches.
const maxESPSize = 512 << 20

// patchESP appends args to the kernel lines of every grub.cfg in the
// FAT12, FAT16 or FAT32 file system of the EFI boot image at local (in
// place, through go-diskfs; the image keeps its size) and returns the
// paths patched and the number of lines. An image that is not a FAT file
// system is left alone.
func patchESP(ctx context.Context, local, args string) (cfgs []string, lines int, err error) {
	f, err := os.OpenFile(local, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if st.Size() < 4096 || st.Size() > maxESPSize || !looksFAT(f) {
		return nil, 0, nil
	}
	// A malformed image must not bring the conductor down with it.
	defer func() {
		if r := recover(); r != nil {
			cfgs, lines, err = nil, 0, fmt.Errorf("%w: malformed FAT file system: %v", ErrRemaster, r)
		}
	}()
	b := file.New(f, false)
	var fat filesystem.FileSystem
	if fs12, err := fat12.Read(b, st.Size(), 0, 512); err == nil {
		fat = fs12
	} else if fs16, err := fat16.Read(b, st.Size(), 0, 512); err == nil {
		fat = fs16
	} else if fs32, err := fat32.Read(b, st.Size(), 0, 512); err == nil {
		fat = fs32
	} else {
		return nil, 0, nil
	}
	count := 0
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		if depth > 16 {
			return fmt.Errorf("%w: FAT directories nested deeper than 16", ErrRemaster)
		}
		des, err := fat.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("%w: FAT directory %s: %v", ErrRemaster, dir, err)
		}
		for _, de := range des {
			if err := ctx.Err(); err != nil {
				return err
			}
			if count++; count > maxISOEntries {
				return fmt.Errorf("%w: more than %d FAT entries", ErrRemaster, maxISOEntries)
			}
			name := de.Name()
			if name == "." || name == ".." || name == "" {
				continue
			}
			p := path.Join(dir, name)
			if de.IsDir() {
				if err := walk(p, depth+1); err != nil {
					return err
				}
				continue
			}
			if !strings.EqualFold(name, "grub.cfg") {
				continue
			}
			info, err := de.Info()
			if err != nil || info.Size() > maxBootConfigSize {
				return fmt.Errorf("%w: FAT file %s: over %d bytes or unreadable (%v)", ErrRemaster, p, maxBootConfigSize, err)
			}
			text, err := fat.ReadFile(p)
			if err != nil {
				return fmt.Errorf("%w: FAT file %s: %v", ErrRemaster, p, err)
			}
			nb, n := appendKernelArgs(text, true, args)
			if n == 0 {
				continue
			}
			w, err := fat.OpenFile(p, os.O_RDWR)
			if err != nil {
				return fmt.Errorf("redfish: re-master: FAT file %s: %w", p, err)
			}
			_, err = w.Write(nb)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("redfish: re-master: write FAT file %s: %w", p, err)
			}
			cfgs = append(cfgs, p)
			lines += n
		}
		return nil
	}
	if err := walk(".", 0); err != nil {
		return nil, 0, err
	}
	// The firmware loads the El Torito image by its sector count: the
	// file system must have stayed inside the image.
	if after, err := f.Stat(); err != nil || after.Size() != st.Size() {
		return nil, 0, fmt.Errorf("%w: the EFI image's FAT file system is larger than the image (%d bytes)", ErrRemaster, st.Size())
	}
	return cfgs, lines, nil
}

// looksFAT reports whether a boot sector has the signature and the BIOS
// parameter block fields of a FAT file system, before a FAT reader is
// given it.
func looksFAT(r io.ReaderAt) bool {
	b := make([]byte, 512)
	if _, err := r.ReadAt(b, 0); err != nil {
		return false
	}
	bps := binary.LittleEndian.Uint16(b[11:13])
	spc := b[13]
	return b[510] == 0x55 && b[511] == 0xaa && (bps == 512 || bps == 1024 || bps == 2048 || bps == 4096) &&
		spc != 0 && spc&(spc-1) == 0 && b[16] != 0 && binary.LittleEndian.Uint16(b[14:16]) != 0
}

// extractFile copies the ISO file p to local with its mode and times.
func extractFile(ctx context.Context, isoFS *iso9660.FileSystem, p, local string, info fs.FileInfo) error {
	in, err := isoFS.Open(p)
	if err != nil {
		return fmt.Errorf("%w: open %s: %v", ErrRemaster, p, err)
	}
	defer in.Close()
	perm := info.Mode().Perm()
	if perm == 0 {
		perm = 0o644
	}
	out, err := os.OpenFile(local, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm|0o600)
	if err != nil {
		return fmt.Errorf("redfish: re-master: %w", err)
	}
	n, err := io.Copy(out, io.LimitReader(ctxReader{ctx, in}, info.Size()))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("redfish: re-master: copy %s: %w", p, err)
	}
	if n != info.Size() {
		return fmt.Errorf("%w: %s: read %d of %d bytes", ErrRemaster, p, n, info.Size())
	}
	_ = os.Chtimes(local, info.ModTime(), info.ModTime())
	return nil
}

// patchConfig appends args to the kernel lines of the configuration file
// at local and returns how many it changed.
func patchConfig(local string, grub bool, args string) (int, error) {
	st, err := os.Stat(local)
	if err != nil {
		return 0, err
	}
	if st.Size() > maxBootConfigSize {
		return 0, fmt.Errorf("%w: boot configuration of %d bytes is over %d", ErrRemaster, st.Size(), maxBootConfigSize)
	}
	b, err := os.ReadFile(local)
	if err != nil {
		return 0, err
	}
	nb, n := appendKernelArgs(b, grub, args)
	if n == 0 {
		return 0, nil
	}
	if err := os.WriteFile(local, nb, st.Mode().Perm()|0o600); err != nil {
		return 0, err
	}
	_ = os.Chtimes(local, st.ModTime(), st.ModTime())
	return n, nil
}

// extractSectors copies n bytes from sector lba of src to local.
func extractSectors(src io.ReaderAt, lba uint32, n int64, local string) error {
	out, err := os.OpenFile(local, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("redfish: re-master: %w", err)
	}
	got, err := io.Copy(out, io.NewSectionReader(src, int64(lba)*isoSector, n))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil || got != n {
		return fmt.Errorf("%w: hidden boot image at sector %d: read %d of %d bytes: %v", ErrRemaster, lba, got, n, err)
	}
	return nil
}

// hasBootInfoTable reports whether the boot image at lba carries an
// El Torito boot info table (mkisofs -boot-info-table, which isolinux
// needs): the primary volume descriptor's sector (16) at byte 8 and the
// image's own sector at byte 12.
func hasBootInfoTable(src io.ReaderAt, lba uint32) bool {
	b := make([]byte, 8)
	if _, err := src.ReadAt(b, int64(lba)*isoSector+8); err != nil {
		return false
	}
	return binary.LittleEndian.Uint32(b[0:4]) == 16 && binary.LittleEndian.Uint32(b[4:8]) == lba
}
