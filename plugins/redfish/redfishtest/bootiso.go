package redfishtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// BootISOLabel is the volume label of the ISO WriteBootISO builds.
const BootISOLabel = "ANVIL_IPA_TEST"

// BootISOFiles returns the files of the ISO that WriteBootISO builds,
// by ISO path: a small stand-in for a stock IPA ISO, laid out as
// diskimage-builder lays one out, with an isolinux configuration (two
// labels with append lines, one without), a grub configuration for UEFI
// (linux and linuxefi lines), an isolinux.bin and an EFI system
// partition image that the El Torito entries point at, a kernel, a
// ramdisk and a file that merely mentions "append" and "linux".
func BootISOFiles() map[string][]byte {
	// isolinux.bin gets a boot info table at byte 8..63, so it must be
	// larger than 64 bytes; the pattern makes any shifted copy visible.
	bin := bytes.Repeat([]byte("ISOLINUX"), 1024)
	esp := bytes.Repeat([]byte{0xeb, 0x3c, 0x90, 'E', 'F', 'I', 0, 1}, 4096)
	return map[string][]byte{
		"isolinux/isolinux.bin": bin,
		"isolinux/isolinux.cfg": []byte("default deploy\r\nprompt 0\r\ntimeout 5\r\n\r\nlabel deploy\r\n  kernel /vmlinuz\r\n  append initrd=/initrd ipa-insecure=1 nofb\r\n\r\nlabel local\r\n  localboot 0\r\n\r\nlabel debug\r\n\tkernel /vmlinuz\r\n\tAPPEND initrd=/initrd ipa-debug=1  \r\n"),
		"boot/grub/grub.cfg":    []byte("set default=0\nset timeout=5\n# linux lines below get the node's parameters\nmenuentry \"deploy\" {\n    linux /vmlinuz ipa-insecure=1 nofb\n    initrd /initrd\n}\nmenuentry \"legacy\" {\n\tlinuxefi /vmlinuz\n\tinitrdefi /initrd\n}\n"),
		"EFI/BOOT/grub.cfg":     []byte("search --no-floppy --set=root --label " + BootISOLabel + "\nconfigfile /boot/grub/grub.cfg\n"),
		"images/efiboot.img":    esp,
		"vmlinuz":               bytes.Repeat([]byte("kernel"), 3000),
		"initrd":                bytes.Repeat([]byte("ramdisk"), 5000),
		"README.txt":            []byte("append this; linux that\n"),
	}
}

// WriteBootISO writes to path an ISO 9660 image with Rock Ridge and
// Joliet of BootISOFiles, labelled BootISOLabel, with an El Torito boot
// catalog at isolinux/boot.cat: a BIOS no-emulation entry for
// isolinux/isolinux.bin (load size 4, with a boot info table, as
// isolinux needs) and a UEFI no-emulation entry for images/efiboot.img.
func WriteBootISO(path string) error {
	scratch, err := os.MkdirTemp("", "redfishtest-bootiso-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	tree := filepath.Join(scratch, "tree")
	for p, b := range BootISOFiles() {
		local := filepath.Join(tree, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(local, b, 0o644); err != nil {
			return err
		}
	}
	out, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	fs, err := iso9660.Create(file.New(out, false), 0, 0, 2048, tree)
	if err != nil {
		return fmt.Errorf("redfishtest: boot ISO: %w", err)
	}
	bios := &iso9660.ElToritoEntry{Platform: iso9660.BIOS, Emulation: iso9660.NoEmulation, BootFile: "/isolinux/isolinux.bin", BootTable: true}
	bios.SetLoadSize(4)
	efi := &iso9660.ElToritoEntry{Platform: iso9660.EFI, Emulation: iso9660.NoEmulation, BootFile: "/images/efiboot.img"}
	if err := fs.Finalize(iso9660.FinalizeOptions{RockRidge: true, Joliet: true, VolumeIdentifier: BootISOLabel,
		ElTorito: &iso9660.ElTorito{BootCatalog: "/isolinux/boot.cat", Entries: []*iso9660.ElToritoEntry{bios, efi}}}); err != nil {
		return fmt.Errorf("redfishtest: boot ISO: %w", err)
	}
	return out.Close()
}
