package vmlab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/statemachine"
)

// familyCase is one machine lifecycle on a network of one address
// family: its firmware, its network boot, and what the boot server must
// record while the ramdisk boots for inspection.
type familyCase struct {
	family   Family
	firmware Firmware
	// httpBoot: the UEFI machine boots the NIC by UEFI HTTP boot only
	// (OVMF's PXE off) and the node's boot interface is http-ipxe.
	httpBoot bool
	// inspectBoot are what the boot server records while the machine
	// boots the ramdisk to be inspected, in order (substrings of the
	// records' phrases); notBoot are substrings none may hold.
	inspectBoot, notBoot []string
	// softwareRAID: after the inspection the agent builds a RAID-1 of
	// the two disks (buildSoftwareRAID), cleaning keeps it, and the
	// deploy is of the RAID image onto it (e2e_raid_test.go).
	softwareRAID bool
}

// TestVMProvisionIPv6UEFIHTTP provisions one UEFI machine (OVMF, its
// BMC ipmi_sim) on an IPv6-only provisioning network: the bridge holds
// only a unique local /64 address, no DHCPv4 server runs, and the boot
// server sends router advertisements with the managed flag and answers
// DHCPv6. OVMF's UEFI HTTP boot over IPv6 asks DHCPv6 for a boot file
// URL (option 59) and gets iPXE's, http://[fd61:6e76:696c::1]:8080/...;
// iPXE configures IPv6 itself (the advertisement, stateful DHCPv6) and
// fetches the node's script, the kernel and the ramdisk over IPv6; the
// ramdisk takes its address by DHCPv6 and the agent's lookup and
// heartbeats reach ipa-api-url=http://[fd61:6e76:696c::1]:6385. Then
// cleaning, the GPT image deployed over IPv6 and booted from the disk
// through the boot entry IPA made. One machine lifecycle, its phases
// timed (the "phases:" line).
func TestVMProvisionIPv6UEFIHTTP(t *testing.T) {
	runFamilyCase(t, familyCase{
		family: IPv6, firmware: UEFI, httpBoot: true,
		inspectBoot: []string{"DHCPv6 solicit from " + e2eMAC + " (efi-x86_64-http)", "DHCPv6 leased fd61:6e76:696c::", "snponly.efi sent",
			"DHCPv6 leased fd61:6e76:696c::", "boot script", "kernel downloaded", "ramdisk downloaded", "DHCPv6 leased fd61:6e76:696c::"},
		notBoot: []string{"TFTP", "192.0.2."},
	})
}

// TestVMProvisionIPv6BIOS is TestVMProvisionIPv6UEFIHTTP's lifecycle on
// a BIOS machine (SeaBIOS with the NIC's iPXE ROM) on the IPv6-only
// network: iPXE configures IPv6 from the router advertisement and
// stateful DHCPv6 and gets the node's script URL by option 59; the raw
// image is deployed and the machine boots it from the disk.
func TestVMProvisionIPv6BIOS(t *testing.T) {
	runFamilyCase(t, familyCase{
		family: IPv6, firmware: BIOS,
		inspectBoot: []string{"DHCPv6 leased fd61:6e76:696c::", "boot script", "kernel downloaded", "ramdisk downloaded", "DHCPv6 leased fd61:6e76:696c::"},
		notBoot:     []string{"TFTP", "192.0.2."},
	})
}

// TestVMProvisionDualStack is the lifecycle of a BIOS machine (iPXE
// ROM) on a dual-stack network: the boot server answers DHCPv4 and
// DHCPv6 and advertises the IPv6 prefix; the ramdisk runs both
// (anvil.dhcp=4,6) and the agent is given the IPv6 ipa-api-url, so its
// lookup and heartbeats, and the image download, go over IPv6 on a
// network where IPv4 works too (metal3-io/baremetal-operator #1664's
// case). Its deploy is onto a software RAID (issue 32): after the
// inspection a manual clean through the agent RAID interface makes the
// two disks a RAID-1 (IPA's raid.create_configuration), cleaning keeps
// it, the RAID image is written onto the md device and
// install_bootloader puts GRUB on both disks, and the machine boots it.
func TestVMProvisionDualStack(t *testing.T) {
	runFamilyCase(t, familyCase{
		family: Dual, firmware: BIOS, softwareRAID: true,
		inspectBoot: []string{"DHCP acknowledged 192.0.2.", "boot script", "kernel downloaded", "ramdisk downloaded", "DHCPv6 leased fd61:6e76:696c::"},
	})
}

// runFamilyCase starts the lab of fc (ipmi_sim, the ipmi plugin) and
// takes its machine through manage, inspect, provide (cleaning), deploy
// and the boot from its disk, checking that the agent spoke to the
// conductor and fetched the image over IPv6.
func runFamilyCase(t *testing.T, fc familyCase) {
	tarball := requireIPMIE2E(t)
	if fc.firmware == UEFI {
		for _, f := range []string{OVMFCode, OVMFVars} {
			if _, err := os.Stat(f); err != nil {
				t.Skipf("no %s (Debian package ovmf): the UEFI test is skipped", f)
			}
		}
	}
	n := NewTestNetworkWith(t, NetworkOptions{Family: fc.family})
	bmc := e2eBMC{LabBMC: IPMILabBMC(), plugin: ipmiPlugin, firmware: fc.firmware}
	if fc.softwareRAID {
		bmc.options = func(o *LabOptions) { o.SoftwareRAID = true }
	}
	if fc.httpBoot {
		node := bmc.Node
		bmc.Node = func(lab *Lab, nd *baremetal.Node) {
			node(lab, nd)
			nd.BootInterface = pxe.NameHTTPIPXE
		}
	}
	lab := startE2ELab(t, n, tarball, bmc)
	if fc.httpBoot {
		m, ok := lab.m.(*BMCMachine)
		if !ok {
			t.Fatalf("the lab's machine is a %T, want *BMCMachine", lab.m)
		}
		m.SetHTTPBoot(true) // from its first power on
	}
	lab.runFamily(t, fc)
}

func (lab *e2eLab) runFamily(t *testing.T, fc familyCase) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ph := lab.phases(t)
	phase := ph.end
	defer ph.log(fmt.Sprintf(" (%s network, %s)", fc.family, fc.firmware))
	prefix6 := lab.n.Prefix6()

	start := time.Now()
	nd, err := lab.EnrollNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go lab.trackSteps(ctx)
	if err := lab.cond.Manage(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Manageable, 2*time.Minute)
	if nd.PowerState != driver.PowerOff || lab.m.Powered() {
		lab.fail(t, "verification recorded power %q (QEMU running: %v); the machine is off", nd.PowerState, lab.m.Powered())
	}
	phase("manage", start)

	boot := "ipxe"
	if fc.httpBoot {
		boot = "UEFI HTTP boot, http-ipxe"
	}
	start = time.Now()
	if err := lab.cond.Inspect(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Manageable, 25*time.Minute)
	if got := fmt.Sprint(nd.Properties["cpu_arch"]); got != "x86_64" {
		lab.fail(t, "inspected cpu_arch %q, want x86_64", got)
	}
	if inv, err := lab.cond.NodeInventory(ctx, nd.UUID); err != nil || inv == nil {
		lab.fail(t, "no stored inventory: %v", err)
	}
	lab.checkNetboot(t, start, time.Now(), fc.inspectBoot, fc.notBoot)
	// The agent posts the inventory (continue_inspection) before its
	// lookup; with fast track it looks up and heartbeats afterwards.
	lab.checkAgentOverIPv6(t, start, prefix6, "/v1/continue_inspection")
	inspected := start
	phase(fmt.Sprintf("inspect (%s)", boot), start)

	if fc.softwareRAID {
		lab.buildSoftwareRAID(t, nd, phase)
		lab.provideKeepingRAID(t, nd, phase)
		lab.checkAgentOverIPv6(t, inspected, prefix6, "/v1/lookup", "/heartbeat/")
		lab.deploySoftwareRAID(t, nd, phase, func(start time.Time) { lab.checkImageOverIPv6(t, start, prefix6) })
		return
	}

	start = time.Now()
	if err := lab.cond.Provide(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Available, 20*time.Minute)
	lab.checkErased(t, "after provide")
	lab.checkStepsRan(t, start, "clean_step=deploy.erase_devices_metadata")
	lab.checkAgentOverIPv6(t, inspected, prefix6, "/v1/lookup", "/heartbeat/")
	phase("provide (cleaning)", start)

	start = time.Now()
	userData := "e2e-" + string(fc.family)
	if err := lab.cond.Deploy(ctx, nd.UUID, conductor.DeployOptions{ConfigDrive: configDrive(t, userData)}); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Active, 20*time.Minute)
	marker := lab.osMarker(t, start, userData, 10*time.Minute)
	t.Logf("active (power %s); OS marker %.1fs after the deploy began: %q", nd.PowerState, marker.At.Sub(start).Seconds(), marker.Text)
	lab.checkImageOverIPv6(t, start, prefix6)
	if fc.firmware == UEFI {
		lab.checkBootedFromDisk(t, start, marker)
		lab.checkGPTWritten(t)
	} else {
		lab.checkImageWritten(t)
		lab.checkNoNetbootSinceLastStart(t, start, marker)
	}
	phase("deploy and boot from disk", start)
}

// checkAgentOverIPv6 checks that, since from, the agent API got a
// request for each of paths (substrings), and that every request came
// from an address in prefix: the agent reached ipa-api-url over IPv6.
func (lab *e2eLab) checkAgentOverIPv6(t *testing.T, from time.Time, prefix netip.Prefix, paths ...string) {
	t.Helper()
	seen := map[string]netip.Addr{}
	for _, e := range lab.tl.between(from, time.Now()) {
		if e.Source != "agent-api" {
			continue
		}
		if !prefix.Contains(e.Peer) {
			lab.fail(t, "the agent API got %q from %v, outside %v", e.What, e.Peer, prefix)
		}
		for _, p := range paths {
			if strings.Contains(e.What, p) {
				seen[p] = e.Peer
			}
		}
	}
	for _, p := range paths {
		if !seen[p].IsValid() {
			lab.fail(t, "the agent API got no request for %s since %s", p, from.Format(time.TimeOnly))
		}
	}
	t.Logf("the agent's requests came from %v (%v)", seen, prefix)
}

// checkImageOverIPv6 checks the agent downloaded the image, since from,
// from an address in prefix.
func (lab *e2eLab) checkImageOverIPv6(t *testing.T, from time.Time, prefix netip.Prefix) {
	t.Helper()
	var got []string
	for _, e := range lab.tl.between(from, time.Now()) {
		if e.Source != "images" {
			continue
		}
		if !prefix.Contains(e.Peer) {
			lab.fail(t, "the image server got %q from %v, outside %v", e.What, e.Peer, prefix)
		}
		got = append(got, e.What+" from "+e.Peer.String())
	}
	if len(got) == 0 {
		lab.fail(t, "the image server got no request during the deploy")
	}
	t.Logf("image requests: %q", got)
}

// checkNoNetbootSinceLastStart checks that the OS marker came after the
// machine's last power on with no boot server record between: the
// machine booted the deployed disk, not the network.
func (lab *e2eLab) checkNoNetbootSinceLastStart(t *testing.T, from time.Time, marker Line) {
	t.Helper()
	starts := lab.m.Starts()
	if len(starts) == 0 || starts[len(starts)-1].Before(from) {
		lab.fail(t, "the machine was not powered on during the deploy")
	}
	last := starts[len(starts)-1]
	for _, e := range lab.tl.between(last, marker.At) {
		if e.Source == "netboot" {
			lab.fail(t, "the boot server recorded %q between the last power on and the OS marker", e.What)
		}
	}
	t.Logf("booted from disk: the marker %.1fs after the last power on; no boot server record since", marker.At.Sub(last).Seconds())
}
