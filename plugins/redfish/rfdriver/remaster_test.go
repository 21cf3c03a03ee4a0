package rfdriver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat12"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"

	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
)

// isoContent is what readISO finds in an ISO image.
type isoContent struct {
	files     map[string][]byte // by ISO path
	locations map[string]uint32 // first sector of each non-empty file
	label     string
	et        eltorito
	entries   []BootEntry
}

// readISO reads every file and the El Torito boot catalog of the ISO at p.
func readISO(t *testing.T, p string) isoContent {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	c := isoContent{files: map[string][]byte{}, locations: map[string]uint32{}}
	if c.et, err = readVolumeDescriptors(f); err != nil {
		t.Fatal(err)
	}
	if c.entries, err = readCatalog(f, c.et.catalogLBA); err != nil {
		t.Fatal(err)
	}
	isoFS, err := iso9660.Read(file.New(f, true), st.Size(), 0, 2048)
	if err != nil {
		t.Fatal(err)
	}
	c.label = strings.TrimRight(isoFS.Label(), "\x00 ")
	var walk func(dir string)
	walk = func(dir string) {
		des, err := isoFS.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range des {
			p := path.Join(dir, de.Name())
			if de.IsDir() {
				walk(p)
				continue
			}
			b, err := isoFS.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			c.files[p] = b
			info, _ := de.Info()
			if st, ok := info.Sys().(*iso9660.StatT); ok && len(b) > 0 {
				c.locations[p] = st.Location
			}
		}
	}
	walk(".")
	for i := range c.entries {
		for p, l := range c.locations {
			if l == c.entries[i].LBA {
				c.entries[i].Path = p
			}
		}
		c.entries[i].BootTable = hasBootInfoTable(f, c.entries[i].LBA)
	}
	return c
}

// remasterFile re-masters the ISO at src into a new file and returns its
// path.
func remasterFile(t *testing.T, src, args string) (string, RemasterReport, error) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	st, _ := in.Stat()
	dir := t.TempDir()
	outPath := filepath.Join(dir, "node.iso")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	rep, err := Remaster(context.Background(), in, st.Size(), out, args, filepath.Join(dir, "work"))
	return outPath, rep, err
}

const testArgs = "nofb ipa-api-url=http://127.0.0.1:6385 ipa-inspection-callback-url=http://127.0.0.1:6385/v1/continue_inspection"

// TestRemasterAppendsParametersToEveryKernelLine re-masters a
// bootable-looking ISO (isolinux and grub configurations, BIOS and UEFI
// El Torito entries) and reads it back: every kernel line ends with the
// node's parameters, every other file is byte-identical, no file is lost
// or added but the regenerated boot catalog in its old place, the label
// is kept, and the El Torito entries are the same (platform, emulation,
// load size) and point at the same files, isolinux.bin with a boot info
// table that is right for the new image.
func TestRemasterAppendsParametersToEveryKernelLine(t *testing.T) {
	src := filepath.Join(t.TempDir(), "ipa.iso")
	if err := redfishtest.WriteBootISO(src); err != nil {
		t.Fatal(err)
	}
	dst, rep, err := remasterFile(t, src, testArgs)
	if err != nil {
		t.Fatal(err)
	}
	want := redfishtest.BootISOFiles()
	want["isolinux/isolinux.cfg"] = []byte("default deploy\r\nprompt 0\r\ntimeout 5\r\n\r\nlabel deploy\r\n  kernel /vmlinuz\r\n  append initrd=/initrd ipa-insecure=1 nofb " + testArgs + "\r\n\r\nlabel local\r\n  localboot 0\r\n\r\nlabel debug\r\n\tkernel /vmlinuz\r\n\tAPPEND initrd=/initrd ipa-debug=1 " + testArgs + "\r\n")
	want["boot/grub/grub.cfg"] = []byte("set default=0\nset timeout=5\n# linux lines below get the node's parameters\nmenuentry \"deploy\" {\n    linux /vmlinuz ipa-insecure=1 nofb " + testArgs + "\n    initrd /initrd\n}\nmenuentry \"legacy\" {\n\tlinuxefi /vmlinuz " + testArgs + "\n\tinitrdefi /initrd\n}\n")
	orig, got := readISO(t, src), readISO(t, dst)
	for p, b := range want {
		g := got.files[p]
		if p == "isolinux/isolinux.bin" && len(g) == len(b) {
			// Bytes 8 to 63 hold the boot info table, which names the
			// image's new sectors (checked below).
			g = slices.Concat(g[:8], b[8:64], g[64:])
		}
		if !bytes.Equal(g, b) {
			if len(b) > 1024 {
				t.Errorf("%s: %d bytes differ from the original's %d", p, len(g), len(b))
			} else {
				t.Errorf("%s:\n got %q\nwant %q", p, g, b)
			}
		}
	}
	// The only other file is the boot catalog, in its old place.
	extra := slices.Sorted(maps.Keys(got.files))
	extra = slices.DeleteFunc(extra, func(p string) bool { _, ok := want[p]; return ok })
	if !slices.Equal(extra, []string{"isolinux/boot.cat"}) {
		t.Errorf("files beyond the original ones: %v", extra)
	}
	if got.locations["isolinux/boot.cat"] != got.et.catalogLBA {
		t.Errorf("boot catalog at sector %d, isolinux/boot.cat at %d", got.et.catalogLBA, got.locations["isolinux/boot.cat"])
	}
	if got.label != redfishtest.BootISOLabel || !got.et.joliet {
		t.Errorf("label %q (want %q), Joliet %v (want true)", got.label, redfishtest.BootISOLabel, got.et.joliet)
	}
	if len(orig.entries) != 2 || len(got.entries) != len(orig.entries) {
		t.Fatalf("El Torito entries: original %+v, re-mastered %+v", orig.entries, got.entries)
	}
	for i, o := range orig.entries {
		g := got.entries[i]
		if g.Platform != o.Platform || g.Emulation != o.Emulation || g.Count != o.Count || g.LoadSeg != o.LoadSeg ||
			g.SysType != o.SysType || g.Path != o.Path || g.Path == "" || g.BootTable != o.BootTable {
			t.Errorf("El Torito entry %d: original %+v, re-mastered %+v", i, o, g)
		}
	}
	if p := []byte{orig.entries[0].Platform, orig.entries[1].Platform}; !bytes.Equal(p, []byte{0, 0xef}) || !got.entries[0].BootTable {
		t.Errorf("want a BIOS entry with a boot info table and a UEFI entry, got %+v", got.entries)
	}
	// The boot info table describes the new image: the primary volume
	// descriptor, isolinux.bin's sector and length, and the checksum of
	// its bytes from 64 on.
	img, _ := os.ReadFile(dst)
	bin := want["isolinux/isolinux.bin"]
	off := int(got.entries[0].LBA) * 2048
	tbl := img[off+8 : off+24]
	var sum uint32
	for i := 64; i < len(bin); i += 4 {
		sum += binary.LittleEndian.Uint32(bin[i : i+4])
	}
	if binary.LittleEndian.Uint32(tbl[0:]) != 16 || binary.LittleEndian.Uint32(tbl[4:]) != got.entries[0].LBA ||
		binary.LittleEndian.Uint32(tbl[8:]) != uint32(len(bin)) || binary.LittleEndian.Uint32(tbl[12:]) != sum {
		t.Errorf("boot info table %x", tbl)
	}
	if !bytes.Equal(img[off+64:off+len(bin)], bin[64:]) || !bytes.Equal(img[off:off+8], bin[:8]) {
		t.Error("isolinux.bin's sectors differ beyond the boot info table")
	}
	if !slices.Equal(rep.Configs, []string{"boot/grub/grub.cfg", "isolinux/isolinux.cfg"}) || rep.KernelLines != 4 {
		t.Errorf("report %+v", rep)
	}
	// Both grub kernel lines, and nothing else, carry the parameters.
	if strings.Count(string(got.files["boot/grub/grub.cfg"]), testArgs) != 2 {
		t.Error("grub.cfg: want the parameters on both kernel lines")
	}
}

// TestAppendKernelArgs is the table of which boot loader lines get the
// node's parameters.
func TestAppendKernelArgs(t *testing.T) {
	for _, c := range []struct {
		name string
		grub bool
		in   string
		want string
		n    int
	}{
		{"grub linux", true, "  linux /vmlinuz a=1\n", "  linux /vmlinuz a=1 X=1\n", 1},
		{"grub linuxefi, tab, CRLF", true, "\tlinuxefi /vmlinuz\r\n", "\tlinuxefi /vmlinuz X=1\r\n", 1},
		{"grub no newline at the end", true, "linux /k", "linux /k X=1", 1},
		{"grub trailing blanks", true, "linux /k  \t\n", "linux /k X=1\n", 1},
		{"grub initrd and comments untouched", true, "initrd /i\n# linux /k\nlinux16 /k\necho linux\n", "initrd /i\n# linux /k\nlinux16 /k\necho linux\n", 0},
		{"grub bare linux word", true, "linux\n", "linux\n", 0},
		{"grub continued line", true, "linux /k \\\n  a=1\n", "linux /k \\\n  a=1\n", 0},
		{"grub two entries", true, "linux /a\nlinux /b\n", "linux /a X=1\nlinux /b X=1\n", 2},
		{"isolinux append", false, "label x\n  append initrd=/i\n", "label x\n  append initrd=/i X=1\n", 1},
		{"isolinux APPEND upper case", false, "APPEND initrd=/i\n", "APPEND initrd=/i X=1\n", 1},
		{"isolinux kernel line untouched", false, "kernel /k\n# append x\n", "kernel /k\n# append x\n", 0},
		{"isolinux grub words ignored", false, "linux /k\n", "linux /k\n", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, n := appendKernelArgs([]byte(c.in), c.grub, "X=1")
			if string(got) != c.want || n != c.n {
				t.Fatalf("got %q (%d lines), want %q (%d)", got, n, c.want, c.n)
			}
		})
	}
}

// TestRemasterRefusesWhatItCannotBoot checks that an image that is not
// an ISO, an ISO without a boot catalog and a bootable ISO without a
// kernel line are refused with ErrRemaster, not re-mastered into an ISO
// that would boot without the node's parameters.
func TestRemasterRefusesWhatItCannotBoot(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.iso")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("x"), 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	plain, err := paramsImage("a=b\n") // ISO 9660, no El Torito
	if err != nil {
		t.Fatal(err)
	}
	plainPath := filepath.Join(dir, "plain.iso")
	if err := os.WriteFile(plainPath, plain, 0o644); err != nil {
		t.Fatal(err)
	}
	noKernel := filepath.Join(dir, "nokernel.iso")
	if err := writeISO(dir, noKernel, map[string]string{"isolinux/isolinux.bin": strings.Repeat("B", 4096), "isolinux/isolinux.cfg": "default local\nlabel local\n localboot 0\n"}, ""); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]string{"not an ISO": junk, "no boot catalog": plainPath, "no kernel line": noKernel} {
		if _, _, err := remasterFile(t, p, testArgs); !errors.Is(err, ErrRemaster) {
			t.Errorf("%s: want ErrRemaster, got %v", name, err)
		}
	}
}

// writeISO builds a BIOS-bootable ISO of files (isolinux/isolinux.bin is
// the boot image) at dst; with efi "file", efiboot.img is also a UEFI boot
// image, with efi "hidden" one that is not a file of the tree (as some
// ISOs carry their EFI system partition).
func writeISO(scratch, dst string, files map[string]string, efi string) error {
	tree, err := os.MkdirTemp(scratch, "tree-")
	if err != nil {
		return err
	}
	for p, s := range files {
		local := filepath.Join(tree, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(local, []byte(s), 0o644); err != nil {
			return err
		}
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	isoFS, err := iso9660.Create(file.New(out, false), 0, 0, 2048, tree)
	if err != nil {
		return err
	}
	entries := []*iso9660.ElToritoEntry{{Platform: iso9660.BIOS, Emulation: iso9660.NoEmulation, BootFile: "/isolinux/isolinux.bin", BootTable: true}}
	if efi != "" {
		entries = append(entries, &iso9660.ElToritoEntry{Platform: iso9660.EFI, Emulation: iso9660.NoEmulation, BootFile: "/efiboot.img", HideBootFile: efi == "hidden"})
	}
	return isoFS.Finalize(iso9660.FinalizeOptions{RockRidge: true, ElTorito: &iso9660.ElTorito{Entries: entries}})
}

// TestRemasterKeepsHiddenBootImage checks that a UEFI boot image that is
// not a file of the ISO tree is carried over by its sector count: the
// re-mastered catalog's UEFI entry loads the same bytes, and the image
// stays out of the tree.
func TestRemasterKeepsHiddenBootImage(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "hidden.iso")
	esp := strings.Repeat("ESP-IMAGE", 1000)
	if err := writeISO(dir, src, map[string]string{"isolinux/isolinux.bin": strings.Repeat("B", 4096),
		"isolinux/isolinux.cfg": "label x\n append initrd=/i\n", "efiboot.img": esp}, "hidden"); err != nil {
		t.Fatal(err)
	}
	dst, rep, err := remasterFile(t, src, testArgs)
	if err != nil {
		t.Fatal(err)
	}
	got := readISO(t, dst)
	if _, ok := got.files["efiboot.img"]; ok || len(got.entries) != 2 || got.entries[1].Platform != 0xef || got.entries[1].Path != "" {
		t.Fatalf("entries %+v, files %v", got.entries, slices.Sorted(maps.Keys(got.files)))
	}
	img, _ := os.ReadFile(dst)
	e := got.entries[1]
	if n := int(e.Count) * 512; n < len(esp) || string(img[int(e.LBA)*2048:int(e.LBA)*2048+len(esp)]) != esp {
		t.Fatalf("UEFI entry loads %d bytes at sector %d, not the original image", n, e.LBA)
	}
	if rep.KernelLines != 1 || !strings.Contains(string(got.files["isolinux/isolinux.cfg"]), "append initrd=/i "+testArgs+"\n") {
		t.Fatalf("isolinux.cfg %q", got.files["isolinux/isolinux.cfg"])
	}
}

// TestRemasteredISOSeenByXorriso has xorriso, an independent ISO
// implementation, build the deploy ISO as mkisofs-style tools build
// stock IPA ISOs (-b isolinux.bin -boot-info-table, -e efiboot.img) and
// read the re-mastered one back: the same El Torito report (catalog
// path, BIOS and UEFI entries, load sizes, image paths, boot-info-table)
// but for the sectors, and the parameters on grub.cfg's kernel lines.
func TestRemasteredISOSeenByXorriso(t *testing.T) {
	x, err := exec.LookPath("xorriso")
	if err != nil {
		t.Skip("xorriso not installed (apt-get install xorriso)")
	}
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	for p, b := range redfishtest.BootISOFiles() {
		local := filepath.Join(tree, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(local, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		out, err := exec.Command(x, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("xorriso %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	src := filepath.Join(dir, "ipa.iso")
	run("-as", "mkisofs", "-quiet", "-R", "-J", "-V", redfishtest.BootISOLabel, "-o", src,
		"-c", "isolinux/boot.cat", "-b", "isolinux/isolinux.bin", "-no-emul-boot", "-boot-load-size", "4", "-boot-info-table",
		"-eltorito-alt-boot", "-e", "images/efiboot.img", "-no-emul-boot", tree)
	dst, rep, err := remasterFile(t, src, testArgs)
	if err != nil {
		t.Fatal(err)
	}
	report := func(p string) []string {
		var lines []string
		for _, l := range strings.Split(run("-indev", p, "-report_el_torito", "plain"), "\n") {
			switch {
			case strings.HasPrefix(l, "El Torito boot img :"):
				f := strings.Fields(l) // The last column, the sector, moves.
				lines = append(lines, strings.Join(f[:len(f)-1], " "))
			case strings.HasPrefix(l, "El Torito") && !strings.HasPrefix(l, "El Torito catalog  :"):
				lines = append(lines, strings.Join(strings.Fields(l), " "))
			case strings.HasPrefix(l, "Volume id"):
				lines = append(lines, l)
			}
		}
		return lines
	}
	orig, got := report(src), report(dst)
	joined := strings.Join(got, "\n")
	if !slices.Equal(got, orig) || !strings.Contains(joined, "BIOS") || !strings.Contains(joined, "UEFI") ||
		!strings.Contains(joined, "boot-info-table") || !strings.Contains(joined, "/isolinux/boot.cat") {
		t.Fatalf("xorriso El Torito report:\n original %q\n re-mastered %q", orig, got)
	}
	if len(rep.BootEntries) != 2 || rep.KernelLines != 4 {
		t.Fatalf("report %+v", rep)
	}
	out := filepath.Join(dir, "grub.cfg")
	run("-osirrox", "on", "-indev", dst, "-extract", "/boot/grub/grub.cfg", out)
	b, err := os.ReadFile(out)
	if err != nil || strings.Count(string(b), " "+testArgs+"\n") != 2 {
		t.Fatalf("grub.cfg as xorriso reads it: %q %v", b, err)
	}
}

// espGrub is an EFI system partition's grub.cfg that boots the kernel
// itself, longer than one 512-byte cluster once the parameters are
// appended.
var espGrub = "set timeout=5\n" + strings.Repeat("# padding to fill the first cluster\n", 10) +
	"menuentry \"deploy\" {\n  linuxefi /vmlinuz ipa-insecure=1\n  initrdefi /initrd\n}\n"

// TestRemasterPatchesTheEFIImagesGrubCfg checks that the grub.cfg inside
// a FAT EFI system partition image (where a UEFI grub loaded from it
// looks first) gets the parameters too, growing past its cluster, while
// the image keeps its size and its other files.
func TestRemasterPatchesTheEFIImagesGrubCfg(t *testing.T) {
	dir := t.TempDir()
	espPath := filepath.Join(dir, "esp.img")
	loader := strings.Repeat("MZ-grubx64", 1000)
	f, err := os.Create(espPath)
	if err != nil {
		t.Fatal(err)
	}
	fat, err := fat12.Create(file.New(f, false), 2880*512, 0, 512, "EFIBOOT", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := fat.Mkdir("/EFI/BOOT"); err != nil {
		t.Fatal(err)
	}
	for p, content := range map[string]string{"/EFI/BOOT/grub.cfg": espGrub, "/EFI/BOOT/BOOTX64.EFI": loader} {
		w, err := fat.OpenFile(p, os.O_CREATE|os.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	// A real EFI image has the full size of its file system.
	if err := f.Truncate(2880 * 512); err != nil {
		t.Fatal(err)
	}
	f.Close()
	checkESP(t, dir, espPath, loader, "EFI/BOOT/grub.cfg")

	t.Run("mkfs.fat and mtools", func(t *testing.T) {
		for _, tool := range []string{"mkfs.fat", "mmd", "mcopy", "mtype", "fsck.fat"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skip(tool + " not installed (apt-get install dosfstools mtools)")
			}
		}
		dir := t.TempDir()
		img := filepath.Join(dir, "esp.img")
		for _, name := range []string{"grub.cfg", "BOOTX64.EFI"} {
			content := map[string]string{"grub.cfg": espGrub, "BOOTX64.EFI": loader}[name]
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{{"mkfs.fat", "-C", img, "1440"}, {"mmd", "-i", img, "::EFI", "::EFI/BOOT"},
			{"mcopy", "-i", img, filepath.Join(dir, "grub.cfg"), filepath.Join(dir, "BOOTX64.EFI"), "::EFI/BOOT/"}} {
			if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out)
			}
		}
		patched := checkESP(t, dir, img, loader, "EFI/BOOT/grub.cfg")
		// Independent readers: fsck finds the file system consistent and
		// mtools reads the grown grub.cfg.
		if out, err := exec.Command("fsck.fat", "-n", patched).CombinedOutput(); err != nil {
			t.Fatalf("fsck.fat -n: %v\n%s", err, out)
		}
		out, err := exec.Command("mtype", "-i", patched, "::EFI/BOOT/grub.cfg").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "linuxefi /vmlinuz ipa-insecure=1 "+testArgs+"\n") {
			t.Fatalf("mtype: %v\n%s", err, out)
		}
	})
}

// checkESP builds an ISO whose UEFI boot image is the FAT image esp,
// re-masters it and checks the image in the result: cfg has the
// parameters on its kernel line, BOOTX64.EFI is unchanged, the size is
// the same. It returns the re-mastered image's path.
func checkESP(t *testing.T, dir, esp, loader, cfg string) string {
	t.Helper()
	raw, err := os.ReadFile(esp)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "esp.iso")
	if err := writeISO(dir, src, map[string]string{"isolinux/isolinux.bin": strings.Repeat("B", 4096), "efiboot.img": string(raw)}, "file"); err != nil {
		t.Fatal(err)
	}
	dst, rep, err := remasterFile(t, src, testArgs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Configs, []string{"efiboot.img:" + cfg}) || rep.KernelLines != 1 {
		t.Fatalf("report %+v", rep)
	}
	img := readISO(t, dst).files["efiboot.img"]
	if len(img) != len(raw) {
		t.Fatalf("EFI image of %d bytes, was %d", len(img), len(raw))
	}
	out := filepath.Join(dir, "patched-esp.img")
	if err := os.WriteFile(out, img, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fat, err := fat12.Read(file.New(f, true), int64(len(img)), 0, 512)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(espGrub, "ipa-insecure=1\n", "ipa-insecure=1 "+testArgs+"\n", 1)
	if b, err := fat.ReadFile(cfg); err != nil || string(b) != want {
		t.Fatalf("%s in the EFI image: %q %v", cfg, b, err)
	}
	if b, err := fat.ReadFile("EFI/BOOT/BOOTX64.EFI"); err != nil || string(b) != loader {
		t.Fatalf("BOOTX64.EFI changed: %d bytes, %v", len(b), err)
	}
	return out
}

// BenchmarkRemaster measures a re-master of an ISO shaped like a stock
// IPA ISO, with a 64 MiB ramdisk (bytes per second of source ISO).
func BenchmarkRemaster(b *testing.B) {
	dir := b.TempDir()
	src := filepath.Join(dir, "ipa.iso")
	files := map[string]string{"isolinux/isolinux.bin": strings.Repeat("B", 4096),
		"isolinux/isolinux.cfg": "label deploy\n  kernel /vmlinuz\n  append initrd=/initrd nofb\n",
		"boot/grub/grub.cfg":    "menuentry deploy {\n  linux /vmlinuz nofb\n  initrd /initrd\n}\n",
		"vmlinuz":               strings.Repeat("k", 12<<20), "initrd": strings.Repeat("r", 64<<20)}
	if err := writeISO(dir, src, files, ""); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(src)
	b.SetBytes(st.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in, _ := os.Open(src)
		out, _ := os.Create(filepath.Join(dir, "node.iso"))
		if _, err := Remaster(context.Background(), in, st.Size(), out, testArgs, filepath.Join(dir, "work")); err != nil {
			b.Fatal(err)
		}
		in.Close()
		out.Close()
	}
}

// TestRemasterPutsTheBootRecordAtSector17 re-masters an ISO with Joliet
// (which go-diskfs writes before the boot record) and checks the boot
// record volume descriptor is at sector 17, where El Torito puts it and
// firmware reads it: SeaBIOS failed to boot the re-mastered IPA ISO
// ("Could not read from CDROM (code 0004)") with it at sector 18. The
// rest of the set is kept: the primary descriptor first, Joliet's, the
// terminator.
func TestRemasterPutsTheBootRecordAtSector17(t *testing.T) {
	src := filepath.Join(t.TempDir(), "ipa.iso")
	if err := redfishtest.WriteBootISO(src); err != nil {
		t.Fatal(err)
	}
	dst, _, err := remasterFile(t, src, testArgs)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var types []byte
	buf := make([]byte, 2048)
	for s := int64(16); len(types) == 0 || types[len(types)-1] != 255; s++ {
		if _, err := f.ReadAt(buf, s*2048); err != nil {
			t.Fatal(err)
		}
		if string(buf[1:6]) != "CD001" {
			t.Fatalf("sector %d is not a volume descriptor", s)
		}
		if s == 17 && strings.TrimRight(string(buf[7:39]), "\x00") != "EL TORITO SPECIFICATION" {
			t.Errorf("sector 17 is a volume descriptor of type %d (%q), not the El Torito boot record", buf[0], buf[7:39])
		}
		types = append(types, buf[0])
	}
	if !bytes.Equal(types, []byte{1, 0, 2, 255}) {
		t.Errorf("volume descriptor types %v, want [1 0 2 255] (primary, boot record, Joliet, terminator)", types)
	}
	// Still readable, catalog and all.
	et, err := readVolumeDescriptors(f)
	if err != nil || !et.joliet {
		t.Fatalf("re-read: %+v, %v", et, err)
	}
	if _, err := readCatalog(f, et.catalogLBA); err != nil {
		t.Fatal(err)
	}
}
