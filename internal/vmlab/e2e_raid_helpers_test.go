package vmlab

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The software RAID phases read the disk files themselves: a GPT that
// sfdisk wrote (an ESP named as IPA names the holders' ESPs, then a
// Linux partition) and an md superblock 1.2 where mdadm puts it, 4 KiB
// into the member partition; a partition without one is refused.
func TestRAIDDiskReaders(t *testing.T) {
	if _, err := exec.LookPath("sfdisk"); err != nil {
		t.Skip("no sfdisk (Debian package fdisk)")
	}
	disk := filepath.Join(t.TempDir(), "disk.raw")
	if err := sparseFile(disk, 16<<20); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sfdisk", "-q", disk)
	cmd.Stdin = strings.NewReader("label: gpt\nstart=2048, size=4096, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=\"uefi-holder-0\"\nstart=8192, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk: %v: %s", err, out)
	}
	parts, err := readGPT(disk)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 2 || parts[0].typ != espType || parts[0].name != "uefi-holder-0" || parts[0].first != 2048 || parts[0].last != 6143 ||
		parts[1].typ == espType || parts[1].first != 8192 {
		t.Fatalf("GPT entries %+v", parts)
	}
	lab := &e2eLab{Lab: &Lab{firmware: UEFI}}
	off, err := lab.raidMemberStart(disk)
	if err != nil || off != 8192*512 {
		t.Fatalf("RAID member at %d (%v), want the Linux partition's %d", off, err, 8192*512)
	}
	if _, err := readMDSuperblock(disk, off); err == nil {
		t.Fatal("a superblock read where there is none")
	}
	sb := make([]byte, 256)
	binary.LittleEndian.PutUint32(sb[0:], 0xa92b4efc)
	binary.LittleEndian.PutUint32(sb[4:], 1)
	copy(sb[16:32], "0123456789abcdef")
	binary.LittleEndian.PutUint32(sb[72:], 1)
	binary.LittleEndian.PutUint32(sb[92:], 2)
	if err := writeAt(disk, sb, off+4096); err != nil {
		t.Fatal(err)
	}
	got, err := readMDSuperblock(disk, off)
	if err != nil || got.level != 1 || got.raidDisks != 2 || string(got.uuid[:]) != "0123456789abcdef" {
		t.Fatalf("superblock %+v, %v", got, err)
	}
	if _, err := readGPT(os.DevNull); err == nil {
		t.Fatal("a GPT read from an empty file")
	}
	// BIOS: IPA's msdos label, the member from the first free sector.
	mbr := filepath.Join(t.TempDir(), "mbr.raw")
	if err := sparseFile(mbr, 16<<20); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command("sfdisk", "-q", mbr)
	cmd.Stdin = strings.NewReader("label: dos\nstart=2048, type=fd\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk: %v: %s", err, out)
	}
	lab.firmware = BIOS
	if off, err := lab.raidMemberStart(mbr); err != nil || off != 1<<20 {
		t.Fatalf("BIOS RAID member at %d (%v), want 1 MiB", off, err)
	}
	if _, err := lab.raidMemberStart(disk); err == nil {
		t.Fatal("the GPT disk's protective MBR taken for an msdos label")
	}
}

// GRUB names a device on an md array md/<name> or mduuid/<uuid>, with
// its partition: the lines the RAID images printed in the lab.
func TestGRUBOnMD(t *testing.T) {
	for _, tc := range []struct {
		prefix, line string
		want         bool
	}{
		{GRUBConfigFrom, "anvil-grub: grub.cfg from (mduuid/6098ab791449ebed89b88b8a8e306249,1)/boot/grub", true},
		{RAIDGRUBRoot, "anvil-grub: root (md//dev/md0,gpt1)", true},
		{GRUBConfigFrom, "anvil-grub: grub.cfg from (hd0,msdos1)/boot/grub", false},
		{RAIDGRUBRoot, "anvil-grub: root (hd0,gpt1)", false},
		{RAIDGRUBRoot, "anvil-grub: root (md/ipa-ramdisk:esp)", false},
		{RAIDGRUBRoot, "(md/x,gpt1) anvil-grub: root (hd1,gpt2)", false},
	} {
		if got := grubOnMD(tc.prefix)(tc.line); got != tc.want {
			t.Errorf("%q after %q: %v, want %v", tc.line, tc.prefix, got, tc.want)
		}
	}
}
