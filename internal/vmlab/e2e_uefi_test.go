package vmlab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestVMProvisionUEFI provisions one UEFI machine (OVMF, its own
// variable store kept across power cycles) whose BMC is ipmi_sim,
// through the conductor's public API with the real plugins/ipmi and the
// stock IPA ramdisk, one machine through every phase (TCG is slow):
//   - manage;
//   - inspect: the ipxe boot interface; the NIC has no iPXE ROM, so
//     OVMF's own PXE asks for a boot file with client architecture 7
//     (option 93) and Anvil's boot server hands it the UEFI iPXE binary
//     over TFTP, which fetches the node's script over HTTP;
//   - provide: automated cleaning by the same agent (fast track);
//   - deploy the GPT whole-disk image with an EFI System Partition
//     (BuildUEFIOSImage): the agent writes it, the direct interface's
//     prepare_instance_boot asks the agent for install_bootloader in
//     UEFI mode, IPA's efibootmgr makes the firmware's boot entry from
//     the image's BOOTX64.CSV, and the boot interface's local-boot path
//     sets the boot device to disk persistently. The proof that the OS
//     came from the disk through that entry: after the machine's last
//     power on, OVMF's boot manager loads the boot option IPA made
//     (label anvil-os), the console shows the installed loader (not the
//     removable-media fallback) and then the OS marker with the config
//     drive's hostname, and the boot server recorded nothing;
//   - undeploy with the http-ipxe boot interface: the machine's firmware
//     set to UEFI HTTP boot (PXE off), the boot server hands OVMF the
//     iPXE binary's URL and cleaning erases the disk;
//   - deploy the partition image (BuildPartitionImage) with the agent
//     still up: IPA partitions the disk, writes the root file system and
//     the config drive, install_bootloader runs grub-install and
//     grub-mkconfig in it, and the machine boots that GRUB from its disk;
//   - undeploy with the http boot interface: UEFI HTTP boot hands OVMF
//     the URL of the lab's HTTP boot GRUB (netboot/grubimage,
//     BuildHTTPGRUB), which asks DHCP itself, reads the node's GRUB
//     configuration and loads the agent's kernel and ramdisk over HTTP
//     (no TFTP, no iPXE); the agent looks up, heartbeats and cleaning
//     erases the disk;
//   - software RAID (issue 32, e2e_raid_test.go), the agent still up:
//     manage, a manual clean through the agent RAID interface making the
//     two disks a RAID-1 (IPA's raid.create_configuration, GPT holders
//     with room for an ESP), provide (cleaning keeps it), and the UEFI
//     RAID image deployed onto the md device: install_bootloader makes
//     an ESP on each holder, mirrored, with a boot entry for each, and
//     OVMF boots one, whose GRUB reads the kernel from the md array.
//
// It logs every phase's wall time with its boot stages and steps.
func TestVMProvisionUEFI(t *testing.T) {
	tarball := requireIPMIE2E(t)
	for _, f := range []string{OVMFCode, OVMFVars} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("no %s (Debian package ovmf): the UEFI test is skipped", f)
		}
	}
	n := NewTestNetworkWith(t, NetworkOptions{RouterAdvertisements: true})
	bmc := ipmiBMC()
	bmc.firmware, bmc.partition = UEFI, true
	bmc.options = func(o *LabOptions) { o.SoftwareRAID = true }
	lab := startE2ELab(t, n, tarball, bmc)
	lab.runUEFI(t, true)
}

// TestVMProvisionUEFIRedfish is TestVMProvisionUEFI's first phases on a
// UEFI machine whose BMC is the lab's Redfish service (RedfishMachine)
// with the real plugins/redfish and the redfish-virtual-media boot
// interface: the IPA ISO (ISOLINUX and an El Torito EFI image with GRUB)
// re-mastered with the node's kernel parameters, inserted as the BMC's
// virtual CD with the boot override Cd (BootSourceOverrideMode UEFI),
// and booted by OVMF from the CD (no network boot at all); manage,
// inspect, provide, and the GPT image deployed and booted from its disk
// through the boot entry IPA made (persistent Hdd at the end).
func TestVMProvisionUEFIRedfish(t *testing.T) {
	if os.Getenv(EnvVME2E) != "1" {
		t.Skip(EnvVME2E + "=1 not set: VM end-to-end provisioning test skipped")
	}
	tarball := os.Getenv(IPATarballEnv)
	if tarball == "" {
		t.Skip(IPATarballEnv + " not set: VM end-to-end provisioning test skipped")
	}
	for _, f := range []string{OVMFCode, OVMFVars} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("no %s (Debian package ovmf): the UEFI test is skipped", f)
		}
	}
	n := NewTestNetworkWith(t, NetworkOptions{RouterAdvertisements: true})
	bmc := redfishBMC()
	bmc.firmware = UEFI
	bmc.LabBMC.Start = redfishStarter(RedfishMachineOptions{Name: "vm-redfish-uefi", Password: "vm-bmc-pw-3", Firmware: UEFI, NoROM: true})
	lab := startE2ELab(t, n, tarball, bmc)
	lab.runUEFI(t, false)
}

// runUEFI runs the UEFI phases; full adds the http-ipxe undeploy (the
// machine must be a *BMCMachine, whose firmware setting it changes), the
// partition image, the http undeploy and the software RAID (the lab
// must serve its images: LabOptions.SoftwareRAID).
func (lab *e2eLab) runUEFI(t *testing.T, full bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ph := lab.phases(t)
	phase := ph.end
	defer ph.log("")

	start := time.Now()
	nd, err := lab.EnrollNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go lab.trackSteps(ctx)
	if err := lab.cond.Manage(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	lab.waitState(t, statemachine.Manageable, 2*time.Minute)
	phase("manage", start)

	// Inspect: OVMF's PXE (no iPXE ROM) gets the UEFI iPXE binary by
	// its architecture, over TFTP.
	start = time.Now()
	if err := lab.cond.Inspect(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Manageable, 25*time.Minute)
	if got := fmt.Sprint(nd.Properties["cpu_arch"]); got != "x86_64" {
		lab.fail(t, "inspected cpu_arch %q, want x86_64", got)
	}
	if lab.bmc.LabBMC.Boot == rfdriver.ImplVirtualMedia {
		lab.checkVirtualMediaBoot(t, start, time.Now())
		phase("inspect (UEFI virtual media)", start)
	} else {
		lab.checkNetboot(t, start, time.Now(), []string{"(efi-x86_64)", "TFTP snponly.efi sent", "boot script", "ramdisk downloaded"}, nil)
		phase("inspect (UEFI PXE, ipxe)", start)
	}

	start = time.Now()
	if err := lab.cond.Provide(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Available, 20*time.Minute)
	lab.checkErased(t, "after provide")
	phase("provide", start)

	// Deploy the GPT image; IPA's install_bootloader makes the boot
	// entry; the machine boots it from the disk.
	start = time.Now()
	if err := lab.cond.Deploy(ctx, nd.UUID, conductor.DeployOptions{ConfigDrive: configDrive(t, "e2e-uefi")}); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Active, 20*time.Minute)
	marker := lab.osMarker(t, start, "e2e-uefi", 10*time.Minute)
	t.Logf("active (power %s); OS marker %.1fs after the deploy began: %q", nd.PowerState, marker.At.Sub(start).Seconds(), marker.Text)
	lab.checkStepsRan(t, start, "deploy_step=deploy.prepare_instance_boot")
	lab.checkBootedFromDisk(t, start, marker)
	lab.checkGPTWritten(t)
	phase("deploy-gpt (install_bootloader, disk boot)", start)
	if !full {
		return
	}
	m, ok := lab.m.(*BMCMachine)
	if !ok {
		t.Fatalf("the UEFI lab's machine is a %T, want *BMCMachine", lab.m)
	}

	// Undeploy with http-ipxe: the firmware boots the NIC by UEFI HTTP
	// boot only, and gets the iPXE binary's URL.
	start = time.Now()
	if _, err := lab.cond.Update(ctx, nd.UUID, func(n *baremetal.Node) error {
		n.BootInterface = pxe.NameHTTPIPXE
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	m.SetHTTPBoot(true)
	if err := lab.cond.Undeploy(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	lab.waitState(t, statemachine.Available, 25*time.Minute)
	lab.checkErased(t, "after undeploy")
	lab.checkNetboot(t, start, time.Now(), []string{"(efi-x86_64-http)", "/ipxe/snponly.efi", "boot script", "ramdisk downloaded"}, []string{"TFTP"})
	phase("undeploy (UEFI HTTP boot, http-ipxe)", start)

	// The partition image: the agent (still up: fast track) partitions
	// the disk (EFI System Partition, root, config drive), writes the
	// root file system, and install_bootloader runs grub-install and
	// grub-mkconfig in it; the machine boots that GRUB from its disk.
	start = time.Now()
	if _, err := lab.cond.Update(ctx, nd.UUID, func(n *baremetal.Node) error {
		n.InstanceInfo = lab.PartitionInstanceInfo()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := lab.cond.Deploy(ctx, nd.UUID, conductor.DeployOptions{ConfigDrive: configDrive(t, "e2e-part-uefi")}); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Active, 25*time.Minute)
	marker = lab.osMarker(t, start, "e2e-part-uefi", 10*time.Minute)
	t.Logf("partition image active (power %s); OS marker %.1fs after the deploy began: %q", nd.PowerState, marker.At.Sub(start).Seconds(), marker.Text)
	lab.checkPartitionBoot(t, start, marker)
	phase("deploy-partition (UEFI, grub-install)", start)

	// Undeploy with http: UEFI HTTP boot of the HTTP boot GRUB, which
	// takes its network from its own DHCP and loads the agent over HTTP.
	start = time.Now()
	if _, err := lab.cond.Update(ctx, nd.UUID, func(n *baremetal.Node) error {
		n.BootInterface = pxe.NameHTTP
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := lab.cond.Undeploy(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	lab.waitState(t, statemachine.Available, 25*time.Minute)
	lab.checkErased(t, "after undeploy (http)")
	lab.checkNetboot(t, start, time.Now(),
		[]string{"(efi-x86_64-http)", "HTTP /grub/grubhttpx64.efi sent", "DHCP acknowledged", "HTTP /grub/grub.cfg sent", "/grub.cfg fetched",
			"kernel downloaded", "ramdisk downloaded"},
		[]string{"TFTP", "snponly", "boot.ipxe"})
	lab.checkAgentCalled(t, start, time.Now(), "/v1/lookup", "/v1/heartbeat/")
	if _, err := lab.m.serial().WaitForAfter(ctx, start, "anvil-grub-http: reading"); err != nil {
		lab.fail(t, "the HTTP boot GRUB's embedded configuration never reported on the console: %v", err)
	}
	phase("undeploy (UEFI HTTP boot, http: GRUB)", start)

	// Software RAID on the two disks, with the agent still up (fast
	// track), then the RAID image deployed onto it and booted.
	if err := lab.cond.Manage(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	lab.waitState(t, statemachine.Manageable, 2*time.Minute)
	lab.buildSoftwareRAID(t, nd, phase)
	lab.provideKeepingRAID(t, nd, phase)
	lab.deploySoftwareRAID(t, nd, phase, nil)
}

// checkPartitionBoot checks that the partition image's OS came up from
// the disk through the GRUB that install_bootloader installed: after
// the machine's last power on, the console shows the menu entry
// grub-mkconfig wrote ("Loading Linux") before the marker, and the boot
// server recorded nothing; the disk has a partition table IPA wrote.
func (lab *e2eLab) checkPartitionBoot(t *testing.T, from time.Time, marker Line) {
	t.Helper()
	starts := lab.m.Starts()
	if len(starts) == 0 || starts[len(starts)-1].Before(from) {
		lab.fail(t, "the machine was not powered on during the deploy")
	}
	last := starts[len(starts)-1]
	var entry Line
	for _, l := range lab.m.serial().Lines() {
		if !l.At.Before(last) && !l.At.After(marker.At) && strings.Contains(l.Text, "Loading Linux") && entry.Text == "" {
			entry = l
		}
	}
	if entry.Text == "" {
		lab.fail(t, "no GRUB menu entry (\"Loading Linux\", from grub-mkconfig) on the console between the last power on and the marker")
	}
	for _, e := range lab.tl.between(last, marker.At) {
		if e.Source == "netboot" {
			lab.fail(t, "the boot server recorded %q between the last power on and the OS marker", e.What)
		}
	}
	if lab.firmware == UEFI {
		if hdr, _ := readAt(lab.rootImg, 512, 8); string(hdr) != "EFI PART" {
			lab.fail(t, "no GPT on the root disk after the partition deploy: %q", hdr)
		}
	} else if b, _ := readAt(lab.rootImg, 510, 2); !bytes.Equal(b, []byte{0x55, 0xaa}) {
		lab.fail(t, "no MBR on the root disk after the partition deploy: %x", b)
	}
	t.Logf("partition image booted from disk: %q %.1fs and the marker %.1fs after the last power on; no boot server record since",
		entry.Text, entry.At.Sub(last).Seconds(), marker.At.Sub(last).Seconds())
}

// checkVirtualMediaBoot checks that between from and to the ramdisk
// booted from the BMC's virtual CD: the media server served the node's
// re-mastered ISO, OVMF loaded its CD-ROM boot option, the boot server
// served no boot program, script, kernel or ramdisk (the ramdisk's own
// DHCP is all it saw), and the agent posted its inspection.
func (lab *e2eLab) checkVirtualMediaBoot(t *testing.T, from, to time.Time) {
	t.Helper()
	var media bool
	for _, e := range lab.tl.between(from, to) {
		media = media || e.Source == "media" && strings.Contains(e.What, ".iso") && strings.HasSuffix(e.What, "→ 200")
	}
	if !media {
		lab.fail(t, "the BMC never fetched the node's boot ISO from the media server")
	}
	var cd Line
	for _, l := range lab.m.serial().Lines() {
		if !l.At.Before(from) && !l.At.After(to) && strings.Contains(l.Text, "BdsDxe: loading Boot") {
			cd = l
			break
		}
	}
	if !strings.Contains(cd.Text, "DVD-ROM") && !strings.Contains(cd.Text, "CD-ROM") {
		lab.fail(t, "OVMF first loaded %q, want the virtual CD's boot option", cd.Text)
	}
	lab.checkNetboot(t, from, to, nil, []string{"TFTP", "boot script", "kernel", "ramdisk"})
	lab.checkAgentCalled(t, from, to, "/v1/continue_inspection")
	t.Logf("booted from the virtual CD: %q", truncate(cd.Text, 160))
}

// checkAgentCalled checks that the agent API answered a request to each
// of paths, in order, between from and to (after the netboot records:
// the agent booted and called back).
func (lab *e2eLab) checkAgentCalled(t *testing.T, from, to time.Time, paths ...string) {
	t.Helper()
	i := 0
	for _, e := range lab.tl.between(from, to) {
		if i < len(paths) && e.Source == "agent-api" && strings.Contains(e.What, paths[i]) && strings.Contains(e.What, "→ 2") {
			i++
		}
	}
	if i < len(paths) {
		lab.fail(t, "the agent API never answered %s (in order %q) between %s and %s", paths[i], paths, from.Format(time.TimeOnly), to.Format(time.TimeOnly))
	}
}

// checkNetboot checks the boot server's records between from and to:
// each of want appears in one, in order, and none holds any of not. (The
// ramdisk's own DHCP client sends no option 93: the server takes it for
// BIOS and offers undionly.kpxe, which it never fetches.)
func (lab *e2eLab) checkNetboot(t *testing.T, from, to time.Time, want, not []string) {
	t.Helper()
	var seen []string
	i := 0
	for _, e := range lab.tl.between(from, to) {
		if e.Source != "netboot" {
			continue
		}
		seen = append(seen, e.What)
		for _, bad := range not {
			if strings.Contains(e.What, bad) {
				lab.fail(t, "the boot server recorded %q (want none with %q); records: %q", e.What, bad, seen)
			}
		}
		if i < len(want) && strings.Contains(e.What, want[i]) {
			i++
		}
	}
	if i < len(want) {
		lab.fail(t, "the boot server never recorded %q (in order %q); records: %q", want[i], want, seen)
	}
}

// checkBootedFromDisk checks that the OS marker came from the disk
// through the boot entry IPA made: the machine was powered on once more
// after install_bootloader, and since that last power on the console
// shows the installed loader (not the removable-media fallback) before
// the marker, and the boot server recorded nothing (no DHCP, TFTP or
// HTTP: the firmware never tried the network).
func (lab *e2eLab) checkBootedFromDisk(t *testing.T, from time.Time, marker Line) {
	t.Helper()
	starts := lab.m.Starts()
	if len(starts) == 0 || starts[len(starts)-1].Before(from) {
		lab.fail(t, "the machine was not powered on during the deploy")
	}
	last := starts[len(starts)-1]
	var loader, entry Line
	for _, l := range lab.m.serial().Lines() {
		if l.At.Before(last) || l.At.After(marker.At) {
			continue
		}
		if strings.Contains(l.Text, UEFILoaderLine) && loader.Text == "" {
			loader = l
		}
		// OVMF's boot manager names the boot option it loads.
		if strings.Contains(l.Text, "BdsDxe: loading Boot") && entry.Text == "" {
			entry = l
		}
	}
	if !strings.Contains(entry.Text, `"`+UEFIBootLabel+`"`) {
		lab.fail(t, "since the last power on OVMF first loaded %q, want the boot option %q IPA made", entry.Text, UEFIBootLabel)
	}
	if !strings.Contains(loader.Text, UEFIEntryLoader) {
		lab.fail(t, "since the last power on the console shows loader line %q, want %q (the boot entry IPA made)", loader.Text, UEFIEntryLoader)
	}
	for _, e := range lab.tl.between(last, marker.At) {
		if e.Source == "netboot" {
			lab.fail(t, "the boot server recorded %q between the last power on and the OS marker: the OS did not come from the disk alone", e.What)
		}
	}
	// IPA logs the entry it adds (efi_utils), with the CSV's label.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := lab.m.serial().WaitForAfter(ctx, from, "with label "+UEFIBootLabel); err != nil {
		lab.fail(t, "IPA never logged adding the boot entry %q: %v", UEFIBootLabel, err)
	}
	t.Logf("booted from disk: %q, %q %.1fs and the marker %.1fs after the last power on; no boot server record since",
		truncate(entry.Text, 120), loader.Text, loader.At.Sub(last).Seconds(), marker.At.Sub(last).Seconds())
}

// checkGPTWritten checks the root disk holds the UEFI image: its GPT
// header and its EFI System Partition's files (IPA adds the config
// drive partition at the disk's end), and the spare disk untouched.
func (lab *e2eLab) checkGPTWritten(t *testing.T) {
	t.Helper()
	hdr, err := readAt(lab.rootImg, 512, 8)
	if err != nil {
		t.Fatal(err)
	}
	if string(hdr) != "EFI PART" {
		lab.fail(t, "the root disk has no GPT header after the deploy: %q", hdr)
	}
	// The ESP file by file: IPA's mount rewrites access dates (espFiles).
	const espFrom, espSize = 1 << 20, 64 << 20
	want, err := espFiles(lab.uefiImg.Raw, espFrom, espSize)
	if err != nil {
		t.Fatal(err)
	}
	got, err := espFiles(lab.rootImg, espFrom, espSize)
	if err != nil {
		lab.fail(t, "the root disk's EFI System Partition is unreadable: %v", err)
	}
	if d := espDiff(want, got); d != "" {
		lab.fail(t, "the root disk's EFI System Partition differs from the image's: %s", d)
	}
	spare, err := readAt(lab.spare, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !allZero(spare) {
		lab.fail(t, "the spare disk (no hint names it) was written")
	}
}
