package vmlab

import (
	"context"
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

// TestVMProvisionSecureBoot provisions one UEFI machine with secure boot
// on (OVMF's secure boot build, Microsoft's keys enrolled: Debian's
// OVMF_CODE_4M.ms.fd and OVMF_VARS_4M.ms.fd) whose BMC is ipmi_sim,
// through the conductor's public API with the real plugins/ipmi and the
// stock IPA ramdisk, its node asking for boot_mode:uefi and
// secure_boot:true:
//   - manage; the ipxe boot interface is refused for this node, naming
//     iPXE (unsigned), and pxe is valid;
//   - provide, with the pxe boot interface: OVMF's PXE gets Debian's
//     shim signed by Microsoft over TFTP, the shim Debian's signed
//     network GRUB, which reads the node's configuration and loads the
//     ramdisk's kernel (Debian's, signed) and initramfs over TFTP and
//     has shim verify the kernel; the kernel says secure boot is on; the
//     agent looks up, heartbeats and cleaning erases the disk;
//   - deploy the secure boot GPT image (BuildSecureBootOSImage) with the
//     agent still up (fast track): IPA's install_bootloader makes the
//     boot entry from EFI/debian/BOOTX64.CSV, for the signed shim; the
//     machine boots its disk through that entry, the shim the signed
//     GRUB, GRUB the signed kernel, which says secure boot is on before
//     the OS prints its marker, and the boot server sees nothing.
//
// It logs every phase's wall time with its boot stages and steps.
func TestVMProvisionSecureBoot(t *testing.T) {
	tarball := requireIPMIE2E(t)
	for _, f := range []string{OVMFSecureCode, OVMFSecureVars} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("no %s (Debian package ovmf): the secure boot test is skipped", f)
		}
	}
	n := NewTestNetworkWith(t, NetworkOptions{RouterAdvertisements: true})
	bmc := e2eBMC{LabBMC: IPMILabBMC(), plugin: ipmiPlugin, firmware: UEFI,
		options: func(o *LabOptions) { o.SecureBoot = true }}
	bmc.Boot = pxe.NamePXE
	node := bmc.Node
	bmc.Node = func(lab *Lab, nd *baremetal.Node) {
		node(lab, nd)
		nd.BootInterface = pxe.NamePXE
	}
	lab := startE2ELab(t, n, tarball, bmc)
	lab.runSecureBoot(t)
}

func (lab *e2eLab) runSecureBoot(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ph := lab.phases(t)
	phase := ph.end
	defer ph.log("")
	// The ramdisk's kernel is the one shim must verify: Debian's signed
	// kernel (the initramfs is not verified).
	if err := checkSignedPE(lab.Ramdisk().Kernel.Path); err != nil {
		t.Fatalf("the IPA ramdisk's kernel: %v", err)
	}

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
	// iPXE is unsigned: the node's secure boot is refused with ipxe,
	// naming it; pxe (shim and GRUB, signed) is valid.
	lab.checkBootValidation(t, ctx, nd.UUID, pxe.NameIPXE, "iPXE")
	lab.checkBootValidation(t, ctx, nd.UUID, pxe.NamePXE, "")
	phase("manage (ipxe refused, pxe valid)", start)

	// Provide: UEFI PXE through the signed shim and GRUB to the agent.
	start = time.Now()
	if err := lab.cond.Provide(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Available, 20*time.Minute)
	lab.checkErased(t, "after provide")
	lab.checkNetboot(t, start, time.Now(),
		[]string{"(efi-x86_64)", "TFTP shimx64.efi sent", "TFTP grubx64.efi sent", "/grub.cfg fetched", "kernel downloaded", "ramdisk downloaded"},
		[]string{"snponly", "grubnetx64", "boot.ipxe"})
	lab.checkAgentCalled(t, start, time.Now(), "/v1/lookup", "/v1/heartbeat/")
	lab.checkSecureBootKernel(t, start, time.Now(), "Starting ironic-python-agent")
	phase("provide (UEFI PXE, pxe: signed shim and GRUB)", start)

	// Deploy the secure boot image; IPA's install_bootloader makes the
	// boot entry for the shim; the machine boots it from the disk.
	start = time.Now()
	if err := lab.cond.Deploy(ctx, nd.UUID, conductor.DeployOptions{ConfigDrive: configDrive(t, "e2e-secureboot")}); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Active, 20*time.Minute)
	marker := lab.osMarker(t, start, "e2e-secureboot", 10*time.Minute)
	t.Logf("active (power %s); OS marker %.1fs after the deploy began: %q", nd.PowerState, marker.At.Sub(start).Seconds(), marker.Text)
	lab.checkStepsRan(t, start, "deploy_step=deploy.prepare_instance_boot")
	lab.checkBootedFromDisk(t, start, marker)
	lab.checkGPTWritten(t)
	lab.checkSecureBootDisk(t, start, marker)
	phase("deploy-secureboot (install_bootloader, shim from disk)", start)
}

// checkBootValidation sets the node's boot interface to iface and checks
// the conductor's validation of it: refused with a reason naming
// unsigned, or valid when unsigned is "". The node keeps iface.
func (lab *e2eLab) checkBootValidation(t *testing.T, ctx context.Context, node, iface, unsigned string) {
	t.Helper()
	if _, err := lab.cond.Update(ctx, node, func(n *baremetal.Node) error {
		n.BootInterface = iface
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	res, err := lab.cond.Validate(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	boot := res[string(driver.KindBoot)]
	switch {
	case unsigned == "" && !boot.Result:
		lab.fail(t, "boot interface %s refused for secure boot: %s", iface, boot.Reason)
	case unsigned != "" && (boot.Result || !strings.Contains(boot.Reason, unsigned) || !strings.Contains(boot.Reason, "secure_boot")):
		lab.fail(t, "boot interface %s with secure_boot:true validated %v (%q), want refused naming %q", iface, boot.Result, boot.Reason, unsigned)
	case unsigned != "":
		t.Logf("%s refused for secure boot: %s", iface, boot.Reason)
	}
}

// checkSecureBootKernel checks that between from and to a kernel
// started, said secure boot was on, and then the console showed then
// (the ramdisk's agent starting, or the OS's marker).
func (lab *e2eLab) checkSecureBootKernel(t *testing.T, from, to time.Time, then string) {
	t.Helper()
	want := []string{"Linux version", SecureBootLine, then}
	i := 0
	var at []time.Time
	for _, l := range lab.m.serial().Lines() {
		if l.At.Before(from) || l.At.After(to) {
			continue
		}
		if i < len(want) && strings.Contains(l.Text, want[i]) {
			at = append(at, l.At)
			i++
		}
	}
	if i < len(want) {
		lab.fail(t, "the console never showed %q (in order %q) between %s and %s", want[i], want, from.Format(time.TimeOnly), to.Format(time.TimeOnly))
	}
	t.Logf("the kernel started %.1fs, said secure boot was on %.1fs, and %q %.1fs after %s",
		at[0].Sub(from).Seconds(), at[1].Sub(from).Seconds(), then, at[2].Sub(from).Seconds(), from.Format(time.TimeOnly))
}

// checkSecureBootDisk checks that the OS came up from the disk through
// the signed chain IPA's boot entry names: since the last power on,
// OVMF's boot manager loaded the entry's loader, the signed shim
// (SecureBootLoader), GRUB said it was loaded from EFI/debian, the kernel
// said secure boot was on before the marker; and IPA logged adding that
// loader.
func (lab *e2eLab) checkSecureBootDisk(t *testing.T, from time.Time, marker Line) {
	t.Helper()
	starts := lab.m.Starts()
	last := starts[len(starts)-1]
	var entry, loader Line
	for _, l := range lab.m.serial().Lines() {
		if l.At.Before(last) || l.At.After(marker.At) {
			continue
		}
		if strings.Contains(l.Text, "BdsDxe: loading Boot") && entry.Text == "" {
			entry = l
		}
		if strings.Contains(l.Text, UEFILoaderLine) && loader.Text == "" {
			loader = l
		}
	}
	if !strings.Contains(entry.Text, SecureBootLoader) {
		lab.fail(t, "since the last power on OVMF first loaded %q, want the signed shim %s", entry.Text, SecureBootLoader)
	}
	if !strings.Contains(loader.Text, ")/EFI/debian") {
		lab.fail(t, "GRUB's line %q does not say it was loaded from /EFI/debian", loader.Text)
	}
	lab.checkSecureBootKernel(t, last, marker.At, OSMarkerPrefix)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := lab.m.serial().WaitForAfter(ctx, from, "Adding loader "+SecureBootLoader); err != nil {
		lab.fail(t, "IPA never logged adding the loader %s: %v", SecureBootLoader, err)
	}
	t.Logf("secure boot from disk: %q; %q", truncate(entry.Text, 160), loader.Text)
}
