package vmlab

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// The software RAID phases (issue 32, item 4), chained into a machine's
// lifecycle where its node is manageable with the agent up (fast track):
// the BIOS dual-stack machine after its inspection, the UEFI machine at
// the end of its chain. The machine's two disks (root 6 GiB, spare 5 GiB)
// become the holders of one RAID-1 md device, as Ironic documents it:
//
//  1. "raid: manual clean": the node's raid interface set to agent, the
//     target_raid_config softwareRAIDTarget, the root device hint that
//     named the root disk removed (IPA then picks the md device: the
//     smallest disk of at least 4 GiB, as Ironic's documentation says),
//     and a manual clean of raid.delete_configuration,
//     deploy.erase_devices_metadata and raid.create_configuration (IPA's
//     GenericHardwareManager: a partition table on each disk, BIOS msdos
//     from the first free sector, UEFI gpt from 551 MiB to leave room for
//     the ESP, one partition each, mdadm --create RAID-1 metadata 1.2).
//     The node's raid_config is the agent's result; both disk files hold
//     that partition and an md superblock of the same array.
//  2. "provide (raid kept)": automated cleaning's erase_devices_metadata
//     skips the RAID's member disks; the superblocks are still there.
//  3. "deploy onto software RAID": the RAID image (BuildRAIDOSImage, a
//     whole-disk image: IPA 2023.1 supports no partition image on
//     software RAID) written onto the md device with a config drive;
//     prepare_instance_boot's install_bootloader (the node's
//     target_raid_config makes it) puts, in BIOS mode, GRUB on each
//     holder disk (grub-install in the image's root file system) and, in
//     UEFI mode, moves the image's ESP onto an ESP mirror IPA makes on the
//     holders with a boot entry for each. The machine boots it from disk:
//     checkRAIDBoot.

// softwareRAIDTarget is Ironic's software RAID configuration: one RAID-1
// volume over every disk, all of it.
func softwareRAIDTarget() map[string]any {
	return map[string]any{"logical_disks": []any{map[string]any{"size_gb": "MAX", "raid_level": "1", "controller": "software"}}}
}

// mdSuperblock is what the test reads of an md superblock 1.x.
type mdSuperblock struct {
	uuid             [16]byte
	level, raidDisks int32
}

// readMDSuperblock reads the md superblock of the member partition
// starting at byte off of the disk file at path: 1.2 (4 KiB into it,
// what IPA's --metadata=1 makes) or 1.1 (at its start).
func readMDSuperblock(path string, off int64) (mdSuperblock, error) {
	for _, at := range []int64{off + 4096, off} {
		b, err := readAt(path, at, 256)
		if err != nil {
			return mdSuperblock{}, err
		}
		if binary.LittleEndian.Uint32(b[0:4]) != 0xa92b4efc {
			continue
		}
		var sb mdSuperblock
		copy(sb.uuid[:], b[16:32])
		sb.level = int32(binary.LittleEndian.Uint32(b[72:76]))
		sb.raidDisks = int32(binary.LittleEndian.Uint32(b[92:96]))
		return sb, nil
	}
	return mdSuperblock{}, fmt.Errorf("no md superblock 1.1 or 1.2 in the partition at byte %d", off)
}

// gptEntry is one GPT partition entry.
type gptEntry struct {
	typ         [16]byte
	first, last uint64
	name        string
}

// espType is the EFI System Partition's type GUID as stored on disk.
var espType = [16]byte{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b}

// readGPT reads the primary GPT's used entries of the disk file at path.
func readGPT(path string) ([]gptEntry, error) {
	hdr, err := readAt(path, 512, 92)
	if err != nil {
		return nil, err
	}
	if string(hdr[:8]) != "EFI PART" {
		return nil, fmt.Errorf("no GPT header (%q)", hdr[:8])
	}
	lba := binary.LittleEndian.Uint64(hdr[72:80])
	n := binary.LittleEndian.Uint32(hdr[80:84])
	size := binary.LittleEndian.Uint32(hdr[84:88])
	if size < 128 || n > 256 {
		return nil, fmt.Errorf("GPT with %d entries of %d bytes", n, size)
	}
	raw, err := readAt(path, int64(lba)*512, int64(n)*int64(size))
	if err != nil {
		return nil, err
	}
	var out []gptEntry
	for i := 0; i < int(n); i++ {
		e := raw[i*int(size) : (i+1)*int(size)]
		var g gptEntry
		copy(g.typ[:], e[0:16])
		if g.typ == ([16]byte{}) {
			continue
		}
		g.first, g.last = binary.LittleEndian.Uint64(e[32:40]), binary.LittleEndian.Uint64(e[40:48])
		var name []rune
		for j := 56; j+1 < 128; j += 2 {
			c := binary.LittleEndian.Uint16(e[j : j+2])
			if c == 0 {
				break
			}
			name = append(name, rune(c))
		}
		g.name = string(name)
		out = append(out, g)
	}
	return out, nil
}

// raidMemberStart is the byte offset of the first partition of the disk
// file at path, which IPA's create_configuration made the RAID member:
// in the MBR (BIOS) or the GPT (UEFI).
func (lab *e2eLab) raidMemberStart(path string) (int64, error) {
	if lab.firmware == UEFI {
		parts, err := readGPT(path)
		if err != nil {
			return 0, err
		}
		for _, p := range parts {
			if p.typ != espType {
				return int64(p.first) * 512, nil
			}
		}
		return 0, fmt.Errorf("no partition but ESPs in the GPT")
	}
	mbr, err := readAt(path, 0, 512)
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(mbr[510:512], []byte{0x55, 0xaa}) {
		return 0, fmt.Errorf("no MBR (signature %x)", mbr[510:512])
	}
	if mbr[446+4] == 0xee {
		return 0, fmt.Errorf("a GPT's protective MBR, not the msdos label IPA makes in BIOS mode")
	}
	return int64(binary.LittleEndian.Uint32(mbr[446+8:446+12])) * 512, nil
}

// checkRAIDHolders checks, from the disk files, that both disks are
// members of one RAID-1 array of two devices (the same array UUID),
// each in its first partition, which starts past the 551 MiB IPA keeps
// for the ESP in UEFI mode. It returns the array's UUID.
func (lab *e2eLab) checkRAIDHolders(t *testing.T, when string) string {
	t.Helper()
	var first mdSuperblock
	for i, disk := range []string{lab.rootImg, lab.spare} {
		off, err := lab.raidMemberStart(disk)
		if err != nil {
			lab.fail(t, "%s: disk %d (%s): %v", when, i, disk, err)
		}
		if lab.firmware == UEFI && off < 551<<20 {
			lab.fail(t, "%s: disk %d's RAID partition starts at %d MiB, before the 551 MiB IPA keeps for the ESP", when, i, off>>20)
		}
		sb, err := readMDSuperblock(disk, off)
		if err != nil {
			lab.fail(t, "%s: disk %d's first partition: %v", when, i, err)
		}
		if sb.level != 1 || sb.raidDisks != 2 {
			lab.fail(t, "%s: disk %d's md superblock says level %d over %d disks, want RAID-1 over 2", when, i, sb.level, sb.raidDisks)
		}
		if i == 0 {
			first = sb
		} else if sb.uuid != first.uuid {
			lab.fail(t, "%s: the disks' md superblocks name two arrays (%x, %x)", when, first.uuid, sb.uuid)
		}
	}
	return fmt.Sprintf("%x", first.uuid)
}

// buildSoftwareRAID is phase 1: the manual clean that builds the RAID
// on the manageable node nd, its agent up.
func (lab *e2eLab) buildSoftwareRAID(t *testing.T, nd *baremetal.Node, phase func(string, time.Time)) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	if _, err := lab.cond.Update(ctx, nd.UUID, func(n *baremetal.Node) error {
		n.RAIDInterface = agentdeploy.RAIDName
		// The md device is the deploy's target: no hint names a disk.
		delete(n.Properties, "root_device")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := lab.cond.SetTargetRAIDConfig(ctx, nd.UUID, softwareRAIDTarget()); err != nil {
		t.Fatal(err)
	}
	clean, err := steps.ParseUserSteps(steps.Clean, []byte(`[{"interface": "raid", "step": "delete_configuration"},
		{"interface": "deploy", "step": "erase_devices_metadata"}, {"interface": "raid", "step": "create_configuration"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.cond.Clean(ctx, nd.UUID, clean, conductor.CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	got := lab.waitState(t, statemachine.Manageable, 20*time.Minute)
	if got.LastError != "" {
		lab.fail(t, "the RAID's manual clean: %s", got.LastError)
	}
	lds, _ := got.RAIDConfig["logical_disks"].([]any)
	ld, _ := func() (map[string]any, bool) {
		if len(lds) != 1 {
			return nil, false
		}
		m, ok := lds[0].(map[string]any)
		return m, ok
	}()
	if ld["controller"] != "software" || ld["raid_level"] != "1" || got.RAIDConfig["last_updated"] == nil {
		lab.fail(t, "raid_config %v after create_configuration, want the agent's software RAID-1", got.RAIDConfig)
	}
	lab.checkStepsRan(t, start, "clean_step=raid.delete_configuration", "clean_step=deploy.erase_devices_metadata", "clean_step=raid.create_configuration")
	array := lab.checkRAIDHolders(t, "after create_configuration")
	t.Logf("software RAID built: raid_config %v; both disks hold a member of md array %s", got.RAIDConfig["logical_disks"], array)
	phase("raid: manual clean (delete_configuration, erase_devices_metadata, create_configuration)", start)
}

// provideKeepingRAID is phase 2: provide, whose automated cleaning
// leaves the RAID's members alone.
func (lab *e2eLab) provideKeepingRAID(t *testing.T, nd *baremetal.Node, phase func(string, time.Time)) {
	t.Helper()
	start := time.Now()
	if err := lab.cond.Provide(context.Background(), nd.UUID); err != nil {
		t.Fatal(err)
	}
	lab.waitState(t, statemachine.Available, 20*time.Minute)
	lab.checkStepsRan(t, start, "clean_step=deploy.erase_devices_metadata")
	lab.checkRAIDHolders(t, "after provide")
	phase("provide (raid kept)", start)
}

// deploySoftwareRAID is phase 3: the RAID image deployed onto the md
// device, with a config drive, and booted from the disks. check, if not
// nil, runs after the boot's checks (the dual-stack machine checks the
// image came over IPv6).
func (lab *e2eLab) deploySoftwareRAID(t *testing.T, nd *baremetal.Node, phase func(string, time.Time), check func(start time.Time)) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	if _, err := lab.cond.Update(ctx, nd.UUID, func(n *baremetal.Node) error {
		n.InstanceInfo = lab.RAIDInstanceInfo()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	userData := "e2e-raid-" + string(lab.firmware)
	if err := lab.cond.Deploy(ctx, nd.UUID, conductor.DeployOptions{ConfigDrive: configDrive(t, userData)}); err != nil {
		t.Fatal(err)
	}
	got := lab.waitState(t, statemachine.Active, 25*time.Minute)
	marker := lab.osMarker(t, start, userData, 10*time.Minute)
	t.Logf("active on software RAID (power %s); OS marker %.1fs after the deploy began: %q", got.PowerState, marker.At.Sub(start).Seconds(), marker.Text)
	lab.checkStepsRan(t, start, "deploy_step=deploy.write_image", "deploy_step=deploy.prepare_instance_boot")
	lab.checkRAIDBoot(t, start, marker)
	if check != nil {
		check(start)
	}
	phase(fmt.Sprintf("deploy onto software RAID (%s, install_bootloader on the holders)", lab.firmware), start)
}

// grubMDDevice matches a GRUB device on an md array: GRUB's diskfilter
// names one md/<array name> (the UEFI loader's search found
// "(md//dev/md0,gpt1)": IPA names the array /dev/md0) or
// mduuid/<uuid> (grub-install writes that into the BIOS core image's
// prefix), with the partition after a comma.
var grubMDDevice = regexp.MustCompile(`\((md|mduuid)/[^),]+,[^)]+\)`)

// grubOnMD matches a console line in which what follows prefix names a
// GRUB device on an md array (grubMDDevice).
func grubOnMD(prefix string) func(string) bool {
	return func(s string) bool {
		i := strings.Index(s, prefix)
		return i >= 0 && grubMDDevice.MatchString(s[i:])
	}
}

// mdstatMembers matches the OS's /proc/mdstat line of a RAID-1 over the
// two disks' first partitions.
var mdstatMembers = regexp.MustCompile(`md\d+ : active (\(auto-read-only\) )?raid1 (vd[ab]1\[\d\] ?){2}`)

// checkRAIDBoot checks that the OS whose marker is marker came up from
// the software RAID, with nothing from the network, after the machine's
// last power on:
//   - BIOS: GRUB's grub.cfg, which grub-mkconfig wrote in the image's
//     root file system, was read from the md array (its prefix names a
//     partition of an md device), and its menu entry loaded Linux;
//     both disks' boot sectors hold GRUB's (install_bootloader put it
//     on each holder);
//   - UEFI: OVMF loaded a boot entry IPA made for a holder's ESP
//     ("anvil-raid (RAID, partN)"), whose loader found the root file
//     system on the md array; IPA logged an entry for each holder, and
//     each disk has an ESP IPA made ("uefi-holder-N") holding the
//     image's ESP (its FAT label);
//   - both: the OS's /init assembled the array (mdstat: raid1 over vda1
//     and vdb1), its root= is the RAID image's root file system and is
//     on an md device, and it read the config drive (the marker's
//     hostname) from the array, since no disk shows it outside one;
//   - the boot server recorded nothing since the last power on.
func (lab *e2eLab) checkRAIDBoot(t *testing.T, from time.Time, marker Line) {
	t.Helper()
	starts := lab.m.Starts()
	if len(starts) == 0 || starts[len(starts)-1].Before(from) {
		lab.fail(t, "the machine was not powered on during the deploy")
	}
	last := starts[len(starts)-1]
	var lines []Line
	for _, l := range lab.m.serial().Lines() {
		if !l.At.Before(last) && !l.At.After(marker.At) {
			lines = append(lines, l)
		}
	}
	find := func(what string, match func(string) bool) Line {
		t.Helper()
		for _, l := range lines {
			if match(l.Text) {
				return l
			}
		}
		var ours []string // the lines the images print, for the failure
		for _, l := range lines {
			if strings.Contains(l.Text, "anvil-") || strings.Contains(l.Text, "BdsDxe") {
				ours = append(ours, truncate(l.Text, 160))
			}
		}
		lab.fail(t, "since the last power on the console shows no %s before the OS marker; the boot's own lines: %q", what, ours)
		return Line{}
	}
	has := func(s string) func(string) bool { return func(text string) bool { return strings.Contains(text, s) } }
	var seen []string
	if lab.firmware == UEFI {
		entry := find(`OVMF loading a boot entry IPA made ("`+RAIDBootLabel+` (RAID, part")`, func(s string) bool {
			return strings.Contains(s, "BdsDxe: loading Boot") && strings.Contains(s, `"`+RAIDBootLabel+" (RAID, part")
		})
		loader := find(RAIDEntryLoader, has(RAIDEntryLoader))
		root := find(RAIDGRUBRoot+"<an md array's partition>", grubOnMD(RAIDGRUBRoot))
		seen = append(seen, entry.Text, loader.Text, root.Text)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, part := range []string{"part0", "part1"} {
			if _, err := lab.m.serial().WaitForAfter(ctx, from, "with label "+RAIDBootLabel+" (RAID, "+part+")"); err != nil {
				lab.fail(t, "IPA never logged the boot entry for the ESP copy %s: %v", part, err)
			}
		}
		for i, disk := range []string{lab.rootImg, lab.spare} {
			parts, err := readGPT(disk)
			if err != nil {
				lab.fail(t, "disk %d: %v", i, err)
			}
			var esp *gptEntry
			for j := range parts {
				if parts[j].typ == espType && strings.HasPrefix(parts[j].name, "uefi-holder-") {
					esp = &parts[j]
				}
			}
			if esp == nil {
				lab.fail(t, "disk %d has no ESP IPA made (uefi-holder-N): %+v", i, parts)
			}
			boot, err := readAt(disk, int64(esp.first)*512, 512)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(boot, []byte("ANVILESP")) {
				lab.fail(t, "disk %d's ESP %q does not hold the image's ESP (no ANVILESP label in its boot sector)", i, esp.name)
			}
		}
	} else {
		cfg := find(GRUBConfigFrom+"<an md array's partition>", grubOnMD(GRUBConfigFrom))
		linux := find(`GRUB's menu entry ("Loading Linux")`, has("Loading Linux"))
		seen = append(seen, cfg.Text, linux.Text)
		for i, disk := range []string{lab.rootImg, lab.spare} {
			mbr, err := readAt(disk, 0, 512)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(mbr[:440], []byte("GRUB")) {
				lab.fail(t, "disk %d's boot sector holds no GRUB: install_bootloader did not install it on every holder", i)
			}
		}
	}
	mdstat := find("/proc/mdstat line of a RAID-1 over vda1 and vdb1", func(s string) bool {
		return strings.Contains(s, OSMDStatLine) && mdstatMembers.MatchString(s)
	})
	rootLine := OSRootLine + "UUID=" + lab.raidImg.RootFSUUID + " is /dev/md"
	root := find(fmt.Sprintf("%q", rootLine), has(rootLine))
	seen = append(seen, mdstat.Text, root.Text)
	for _, e := range lab.tl.between(last, marker.At) {
		if e.Source == "netboot" {
			lab.fail(t, "the boot server recorded %q between the last power on and the OS marker", e.What)
		}
	}
	t.Logf("booted from the software RAID, the marker %.1fs after the last power on, no boot server record since: %q", marker.At.Sub(last).Seconds(), seen)
}
