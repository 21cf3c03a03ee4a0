package vmlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/plugin/plugintest"
	"github.com/anvilmetal/anvil/internal/otlptest"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/statemachine"
)

// EnvVME2E un-skips the end-to-end provisioning test of a virtual machine
// (set it to 1, with ANVIL_TEST_QEMU=1 and ANVIL_TEST_IPA_TARBALL).
const EnvVME2E = "ANVIL_TEST_VM_E2E"

// ipmiPlugin is the real plugins/ipmi executable.
var ipmiPlugin = &plugintest.Plugin{Package: IPMIPluginPackage, Name: "ipmi"}

// TestVMProvisionIPMI provisions one QEMU virtual machine (TCG) as bare
// metal through the conductor's public API, with the real components
// end to end: the ipmi hardware type served by the plugins/ipmi
// executable (ipmitool) against Debian's ipmi_sim acting as the VM's BMC
// (BMCMachine), the ipxe boot interface writing to Anvil's boot server
// (DHCP, iPXE script, kernel and ramdisk over HTTP on the lab bridge),
// the direct deploy interface and agent inspection with the stock IPA
// 2023.1 ramdisk, and the whole-disk OS image. Phases: enroll and manage;
// inspect (the real inventory gives cpus, memory_mb, local_gb, cpu_arch
// and the port); provide (automated cleaning, erase_devices disabled by
// priority override, IPA's erase_devices_metadata zeroes the disk's first
// MiB); deploy the raw image with root device hints and a config drive
// (the OS prints the config drive's hostname on the console); rescue
// with the agent rescue interface (the same IPA ramdisk as the rescue
// ramdisk), a login as the rescue user with the rescue password over
// SOL, and unrescue (the OS boots from its disk again); undeploy
// (cleaning again: the partition table is gone); the same deploy and
// undeploy again with the agent's commands waited on
// (AgentSettings.PollCommands), the first pair having moved on the
// agent's heartbeats only, as Ironic does; a deploy with a wrong
// checksum fails with IPA's error and recovers with undeploy; the qcow2
// image deploys; a rebuild onto the partition image (BIOS: IPA's
// install_bootloader runs grub-install) boots GRUB from the disk. Fast
// track keeps the agent up from inspection to the
// first deploy, and from the undeploy's cleaning on. It logs the wall
// time of every phase, the boot stages and steps inside it, and the
// agent heartbeats each step waited for.
func TestVMProvisionIPMI(t *testing.T) {
	tarball := requireIPMIE2E(t)
	n := NewTestNetworkWith(t, NetworkOptions{RouterAdvertisements: true})
	lab := startE2ELab(t, n, tarball, ipmiBMC())
	lab.run(t)
}

// e2eBMC is what differs between the end-to-end tests of two kinds of
// BMC: the lab's LabBMC (hardware type, interfaces, the machine, the
// node's fields), the plugin, and the phases beyond the common ones.
type e2eBMC struct {
	LabBMC
	plugin *plugintest.Plugin
	// prepare runs before the plugin is loaded (its environment) and the
	// machine starts (LabBMC.Prepare); may be nil.
	prepare func(t *testing.T, lab *Lab, rd IPARamdisk, dir string)
	// sol: read the OS marker through the console interface too; full:
	// also the deploy and undeploy with PollCommands, the failing deploy
	// and the qcow2 deploy; rescue: rescue the deployed node with the
	// agent rescue interface, log in as the rescue user through the
	// console interface, and unrescue it (needs sol).
	sol, full, rescue bool
	// extra, when set, runs after the common phases (the node
	// available), timing its phases with phase.
	extra func(t *testing.T, lab *e2eLab, phase func(name string, from time.Time))
	// firmware is the machine's (LabOptions.Firmware); "" is BIOS.
	firmware Firmware
	// partition: the lab serves the partition image too
	// (LabOptions.PartitionImage).
	partition bool
	// options, when set, adjusts the lab's options before it starts.
	options func(o *LabOptions)
}

// ipmiBMC is ipmi_sim with the ipmi hardware type, ipxe boot and the
// ipmitool-socat console.
func ipmiBMC() e2eBMC {
	return e2eBMC{LabBMC: IPMILabBMC(), plugin: ipmiPlugin, sol: true, full: true, rescue: true, partition: true}
}

// e2eLab is the shared Lab (the machine, the boot server, the image
// server, the conductor and what they recorded) with the test's BMC.
type e2eLab struct {
	*Lab
	bmc e2eBMC
	// traces receives the conductor's and the plugin's spans, tp the
	// conductor's.
	traces *otlptest.Collector
	tp     *sdktrace.TracerProvider
}

// startE2ELab starts the Lab on n (StartLab), skipping where tools or
// boot files are missing; the lab is closed when the test ends.
func startE2ELab(t *testing.T, n *Network, tarball string, bmc e2eBMC) *e2eLab {
	t.Helper()
	began := time.Now() // the phases images and whole test include the plugin build
	lb := bmc.LabBMC
	if bmc.prepare != nil {
		// t.Skip and t.Fatal end the goroutine inside StartLab, whose
		// deferred Close stops what it started.
		lb.Prepare = func(lab *Lab, rd IPARamdisk, dir string) error {
			bmc.prepare(t, lab, rd, dir)
			return nil
		}
	}
	traces := otlptest.Start(t)
	tp := traces.Provider(t, "anvil-conductor")
	o := LabOptions{
		Network: n, BMC: lb, PluginPath: bmc.plugin.Path(t), IPATarball: tarball, Logf: t.Logf, Began: began,
		Firmware: bmc.firmware, PartitionImage: bmc.partition,
		TracerProvider: tp, PluginEnv: traces.PluginEnv(),
	}
	if bmc.options != nil {
		bmc.options(&o)
	}
	lab, err := StartLab(context.Background(), o)
	var mf *netboot.MissingFileError
	if errors.Is(err, ErrUnavailable) || errors.As(err, &mf) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Error(err)
		}
	})
	return &e2eLab{Lab: lab, bmc: bmc, traces: traces, tp: tp}
}

// requireIPMIE2E skips t unless the VM end-to-end tests on ipmi_sim
// can run, and returns the IPA tarball they boot.
func requireIPMIE2E(t *testing.T) string {
	t.Helper()
	if os.Getenv(EnvVME2E) != "1" {
		t.Skip(EnvVME2E + "=1 not set: VM end-to-end provisioning test skipped")
	}
	tarball := os.Getenv(IPATarballEnv)
	if tarball == "" {
		t.Skip(IPATarballEnv + " not set: VM end-to-end provisioning test skipped")
	}
	for _, b := range []string{IPMISimBinary, "ipmitool"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skip(b + " not installed (Debian packages openipmi, ipmitool): VM end-to-end provisioning test skipped")
		}
	}
	return tarball
}

// phaseLog collects the wall time of a test's phases for its
// "phases: ..." line, which .ci/run's summary greps.
type phaseLog struct {
	lab   *e2eLab
	t     *testing.T
	total []string
}

func (lab *e2eLab) phases(t *testing.T) *phaseLog { return &phaseLog{lab: lab, t: t} }

// end reports the phase name that began at from (see report).
func (p *phaseLog) end(name string, from time.Time) {
	p.total = append(p.total, fmt.Sprintf("%s %.1fs", name, p.lab.report(p.t, name, from).Seconds()))
}

// log writes the phases line; suffix, if any, follows the whole test's
// time.
func (p *phaseLog) log(suffix string) {
	p.t.Logf("phases: %s; whole test %.1fs%s", strings.Join(p.total, ", "), time.Since(p.lab.began).Seconds(), suffix)
}

// report logs the phase's wall time, the boot stages, requests, steps
// and console milestones inside it, and the heartbeats each step spent.
func (lab *e2eLab) report(t *testing.T, name string, from time.Time) time.Duration {
	t.Helper()
	to := time.Now()
	t.Log(lab.PhaseReport(name, from, to))
	return to.Sub(from)
}

// fail ends the test with the node, the BMC's events, the console's and
// the conductor log's last lines.
func (lab *e2eLab) fail(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	// The message again after the diagnostics: CI keeps a failing test's
	// last lines, and those must say what failed.
	t.Fatal(msg + lab.Diagnostics() + "\nfailed: " + msg)
}

// waitState waits for the node to reach want and be unlocked.
func (lab *e2eLab) waitState(t *testing.T, want statemachine.State, timeout time.Duration) *baremetal.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	nd, err := lab.WaitState(ctx, want)
	if err != nil {
		lab.fail(t, "%v", err)
	}
	return nd
}

// osMarker waits for the OS image's marker printed after since.
func (lab *e2eLab) osMarker(t *testing.T, since time.Time, userData string, timeout time.Duration) Line {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	line, err := lab.OSMarker(ctx, since, userData)
	if err != nil {
		lab.fail(t, "%v", err)
	}
	return line
}

func configDrive(t *testing.T, userData string) json.RawMessage {
	t.Helper()
	b, err := ConfigDrive(userData)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (lab *e2eLab) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ph := lab.phases(t)
	phase := ph.end
	defer ph.log("")

	// 1. Enroll and manage: verification reads the power state through
	// the plugin from the BMC (ipmitool from ipmi_sim; Redfish).
	start := time.Now()
	nd, err := lab.cond.Enroll(ctx, lab.NewNode())
	if err != nil {
		t.Fatal(err)
	}
	lab.node = nd.UUID
	go lab.trackSteps(ctx)
	if err := lab.store.CreatePort(ctx, &baremetal.Port{NodeUUID: nd.UUID, Address: e2eMAC, PXEEnabled: true}); err != nil {
		t.Fatal(err)
	}
	if err := lab.cond.Manage(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Manageable, 2*time.Minute)
	if nd.PowerState != driver.PowerOff || lab.m.Powered() {
		lab.fail(t, "verification recorded power %q (QEMU running: %v); the machine is off", nd.PowerState, lab.m.Powered())
	}
	phase("manage", start)

	// 2. Inspect in band: the ramdisk boots over the network and posts
	// the real inventory.
	start = time.Now()
	if err := lab.cond.Inspect(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Manageable, 25*time.Minute)
	props := map[string]string{}
	for _, k := range []string{"cpus", "memory_mb", "local_gb", "cpu_arch"} {
		props[k] = fmt.Sprint(nd.Properties[k])
	}
	// local_gb: the 6 GiB disk the hints name, less Ironic's 1 GiB.
	want := map[string]string{"cpus": "1", "memory_mb": "1024", "local_gb": "5", "cpu_arch": "x86_64"}
	if fmt.Sprint(props) != fmt.Sprint(want) {
		lab.fail(t, "inspected properties %v, want %v", props, want)
	}
	ports, err := lab.store.ListPorts(ctx, nd.UUID)
	if err != nil {
		t.Fatal(err)
	}
	var macs []string
	for _, p := range ports {
		macs = append(macs, p.Address)
	}
	if !slices.Equal(macs, []string{e2eMAC}) {
		lab.fail(t, "ports %v after inspection, want the VM's %s", macs, e2eMAC)
	}
	if inv, err := lab.cond.NodeInventory(ctx, nd.UUID); err != nil || inv == nil {
		lab.fail(t, "no stored inventory: %v", err)
	}
	t.Logf("inspected: %v, ports %v, power %s (fast track keeps the agent up: %v)", props, macs, nd.PowerState, lab.m.Powered())
	phase("inspect", start)

	// 3. Provide: automated cleaning by the running agent (fast track).
	start = time.Now()
	if err := lab.cond.Provide(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Available, 20*time.Minute)
	lab.checkErased(t, "after provide")
	lab.checkStepsRan(t, start, "clean_step=deploy.erase_devices_metadata")
	phase("provide", start)

	// 4. Deploy the raw image with a config drive; the machine reboots
	// into it and prints the config drive's hostname. The conductor
	// moves on the agent's heartbeats only, as Ironic does.
	start = time.Now()
	deployRaw := func(userData string) {
		oob := lab.OutOfBandPowerOffs()
		if err := lab.cond.Deploy(ctx, nd.UUID, conductor.DeployOptions{ConfigDrive: configDrive(t, userData)}); err != nil {
			t.Fatal(err)
		}
		nd = lab.waitState(t, statemachine.Active, 20*time.Minute)
		marker := lab.osMarker(t, start, userData, 10*time.Minute)
		t.Logf("active (power %s); OS marker %.1fs after the deploy began: %q", nd.PowerState, marker.At.Sub(start).Seconds(), marker.Text)
		lab.checkImageWritten(t)
		lab.checkSoftPowerOff(t, start, oob)
	}
	deployRaw("e2e-raw")
	phase("deploy-raw (heartbeats)", start)
	lab.checkTimelineInBrowser(t)
	lab.checkDeployTrace(t)
	if lab.bmc.sol {
		// Timed apart, so that the two raw deploys compare.
		start = time.Now()
		lab.markerThroughSOL(t, "e2e-raw")
		phase("console (SOL)", start)
	}
	if lab.bmc.rescue && lab.bmc.sol {
		lab.rescueAndBack(t, nd, "e2e-raw", phase)
	}

	// 5. Undeploy: cleaning (the ramdisk boots again) erases the disk.
	undeploy := func() {
		if err := lab.cond.Undeploy(ctx, nd.UUID); err != nil {
			t.Fatal(err)
		}
		nd = lab.waitState(t, statemachine.Available, 25*time.Minute)
		lab.checkErased(t, "after undeploy")
	}
	start = time.Now()
	undeploy()
	phase("undeploy (heartbeats)", start)
	if lab.bmc.extra != nil {
		lab.bmc.extra(t, lab, phase)
	}
	if !lab.bmc.full {
		return
	}

	// The same deploy and undeploy with the agent's commands waited on
	// (AgentSettings.PollCommands): each in-band step continues when the
	// agent finishes it instead of at its next heartbeat. The rest of
	// the test keeps it on.
	lab.cond.SetPollCommands(true)
	start = time.Now()
	// The undeploy emptied instance_info: the image again.
	if _, err := lab.cond.Update(ctx, nd.UUID, func(n *baremetal.Node) error {
		n.InstanceInfo = lab.RawInstanceInfo(lab.img.RawSHA256)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	deployRaw("e2e-raw-polled")
	phase("deploy-raw (polling)", start)
	start = time.Now()
	undeploy()
	phase("undeploy (polling)", start)

	// 6. A wrong checksum: the agent refuses the image; the deploy fails
	// with its error, the node unlocked; undeploy recovers it.
	start = time.Now()
	// The undeploy emptied instance_info: the image again, with a wrong
	// SHA-256.
	if _, err := lab.cond.Update(ctx, nd.UUID, func(n *baremetal.Node) error {
		n.InstanceInfo = lab.RawInstanceInfo(strings.Repeat("0", 64))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := lab.cond.Deploy(ctx, nd.UUID, conductor.DeployOptions{ConfigDrive: configDrive(t, "e2e-bad")}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Minute)
	nd, err = lab.cond.WaitFor(wctx, nd.UUID, statemachine.Active)
	wcancel()
	if !errors.Is(err, conductor.ErrNodeFailed) || nd == nil || nd.ProvisionState != statemachine.DeployFailed {
		lab.fail(t, "deploy with a wrong checksum: %v, want deploy failed", err)
	}
	nd = lab.waitState(t, statemachine.DeployFailed, time.Minute)
	if !strings.Contains(strings.ToLower(nd.LastError), "checksum") {
		lab.fail(t, "last_error %q does not carry the agent's checksum error", nd.LastError)
	}
	t.Logf("deploy failed as it should: last_error %q", nd.LastError)
	if err := lab.cond.Undeploy(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Available, 20*time.Minute)
	phase("bad-checksum", start)

	// 7. The qcow2 image (IPA converts it with qemu-img).
	start = time.Now()
	if _, err := lab.cond.Update(ctx, nd.UUID, func(n *baremetal.Node) error {
		n.InstanceInfo = map[string]any{
			"image_source": "http://" + net.JoinHostPort(ServerIP, e2eImageHTTP) + "/disk.qcow2", "image_disk_format": "qcow2",
			"image_os_hash_algo": "sha512", "image_os_hash_value": lab.img.QCOW2SHA512,
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := lab.cond.Deploy(ctx, nd.UUID, conductor.DeployOptions{ConfigDrive: configDrive(t, "e2e-qcow2")}); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Active, 20*time.Minute)
	marker := lab.osMarker(t, start, "e2e-qcow2", 10*time.Minute)
	t.Logf("qcow2 active (power %s); OS marker %.1fs after the deploy began", nd.PowerState, marker.At.Sub(start).Seconds())
	lab.checkImageWritten(t)
	phase("deploy-qcow2", start)

	// 8. Rebuild onto the partition image (BIOS): the agent partitions
	// the disk (MBR: root, config drive), writes the root file system,
	// and install_bootloader runs grub-install to the disk's boot
	// sector and grub-mkconfig in it; the machine boots that GRUB.
	if lab.partImg.QCOW2 == "" {
		return
	}
	start = time.Now()
	if _, err := lab.cond.Update(ctx, nd.UUID, func(n *baremetal.Node) error {
		n.InstanceInfo = lab.PartitionInstanceInfo()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := lab.cond.Rebuild(ctx, nd.UUID, conductor.DeployOptions{ConfigDrive: configDrive(t, "e2e-part-bios")}); err != nil {
		t.Fatal(err)
	}
	nd = lab.waitState(t, statemachine.Active, 25*time.Minute)
	marker = lab.osMarker(t, start, "e2e-part-bios", 10*time.Minute)
	t.Logf("partition image active (rebuild); OS marker %.1fs after the rebuild began", marker.At.Sub(start).Seconds())
	lab.checkPartitionBoot(t, start, marker)
	phase("rebuild-partition (BIOS, grub-install)", start)
}

// checkSoftPowerOff checks that the deploy since from ended the agent's
// boot with the agent's own power off (standby.power_off runs the
// ramdisk's poweroff: its /init stops the agent and the kernel powers
// the machine down), seen by the conductor through the BMC's power
// state, without a power off out of band (oob: the conductor's count of
// those before the deploy).
func (lab *e2eLab) checkSoftPowerOff(t *testing.T, from time.Time, oob int) {
	t.Helper()
	if n := lab.OutOfBandPowerOffs(); n != oob {
		lab.fail(t, "the conductor powered the node off out of band during the deploy (%d times): the agent's soft power off did not work", n-oob)
	}
	// Both lines came before the OS marker: they are on the console.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, want := range []string{"anvil-ipa: poweroff", "reboot: Power down"} {
		if _, err := lab.m.serial().WaitForAfter(ctx, from, want); err != nil {
			lab.fail(t, "no %q on the console since the deploy began: %v", want, err)
		}
	}
}

// checkErased checks that the root disk's first MiB is zero (no
// partition table, no boot code) and the spare disk untouched, read from
// the disk files (QEMU writes through the host's page cache; the agent
// writes with direct I/O).
func (lab *e2eLab) checkErased(t *testing.T, when string) {
	t.Helper()
	b, err := readAt(lab.rootImg, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !allZero(b) {
		i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 })
		lab.fail(t, "%s: the root disk's first MiB is not zeroed (first non-zero byte at %d; MBR signature %x)", when, i, b[510:512])
	}
}

// checkImageWritten compares the root disk with the image beyond its
// partition table (IPA adds the config drive partition to it) and checks
// the spare disk was left alone.
func (lab *e2eLab) checkImageWritten(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(lab.img.Raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAt(lab.rootImg, 1<<20, int64(len(raw))-(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, raw[1<<20:]) {
		lab.fail(t, "the root disk does not hold the image's partition")
	}
	if b, _ := readAt(lab.rootImg, 510, 2); !bytes.Equal(b, []byte{0x55, 0xaa}) {
		lab.fail(t, "the root disk has no MBR signature after the deploy: %x", b)
	}
	spare, err := readAt(lab.spare, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !allZero(spare) {
		lab.fail(t, "the spare disk (no hint names it) was written")
	}
}

// checkStepsRan checks that the timeline saw each step since from.
func (lab *e2eLab) checkStepsRan(t *testing.T, from time.Time, steps ...string) {
	t.Helper()
	for _, s := range steps {
		found := false
		for _, e := range lab.tl.between(from, time.Now()) {
			found = found || e.Source == "conductor" && strings.Contains(e.What, s)
		}
		if !found {
			lab.fail(t, "the conductor never ran %s", s)
		}
	}
}

// e2eRescuePassword is the rescue password of the rescue phases.
const e2eRescuePassword = "e2e-Rescue-pw-7"

// rescueAndBack rescues the active node nd with the agent rescue
// interface (phase "rescue": power off, the rescue ramdisk booted over
// the network, the agent's finalize_rescue with the password's crypt
// hash, the ramdisk's rescue user made from IPA's password file), logs
// in as the rescue user over the serial console through the console
// interface, a wrong password refused first (phase "rescue login
// (SOL)"), and unrescues it: the node is active again and the OS,
// whose config drive says userData, boots from its disk (phase
// "unrescue").
func (lab *e2eLab) rescueAndBack(t *testing.T, nd *baremetal.Node, userData string, phase func(string, time.Time)) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	if _, err := lab.cond.Update(ctx, nd.UUID, func(n *baremetal.Node) error {
		n.RescueInterface = agentdeploy.RescueName
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := lab.cond.Rescue(ctx, nd.UUID, e2eRescuePassword); err != nil {
		t.Fatal(err)
	}
	r := lab.waitState(t, statemachine.Rescue, 20*time.Minute)
	if r.PowerState != driver.PowerOn || r.LastError != "" {
		lab.fail(t, "rescued node: power %q, last error %q", r.PowerState, r.LastError)
	}
	for _, k := range []string{"rescue_password", "hashed_rescue_password"} {
		if _, ok := r.InstanceInfo[k]; ok {
			lab.fail(t, "instance_info keeps %s once the node is rescued", k)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	line, err := lab.m.serial().WaitForAfter(wctx, start, RescueUserLine)
	cancel()
	if err != nil {
		lab.fail(t, "the ramdisk made no rescue user: %v", err)
	}
	t.Logf("rescued (power %s); %q %.1fs after the rescue began", r.PowerState, line.Text, line.At.Sub(start).Seconds())
	phase("rescue", start)

	start = time.Now()
	lab.rescueLoginThroughSOL(t, e2eRescuePassword)
	phase("rescue login (SOL)", start)

	start = time.Now()
	if err := lab.cond.Unrescue(ctx, nd.UUID); err != nil {
		t.Fatal(err)
	}
	u := lab.waitState(t, statemachine.Active, 10*time.Minute)
	marker := lab.osMarker(t, start, userData, 10*time.Minute)
	wctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	disk, err := lab.m.serial().WaitForAfter(wctx, start, OSDiskLine)
	cancel()
	if err != nil || disk.At.After(marker.At) {
		lab.fail(t, "no %q before the OS marker since the unrescue began: %v", OSDiskLine, err)
	}
	t.Logf("unrescued: active (power %s); the OS booted from disk, its marker %.1fs after the unrescue began", u.PowerState, marker.At.Sub(start).Seconds())
	phase("unrescue", start)
}

// rescueLoginThroughSOL enables the node's console (ipmitool-socat over
// ipmi_sim's SOL) and logs in as the rescue user at the rescue ramdisk's
// login prompt: a wrong password is refused, the right one gives a
// shell, which runs a command whose output is checked (an arithmetic
// expansion, so the typed line's echo does not match); then disables
// the console.
func (lab *e2eLab) rescueLoginThroughSOL(t *testing.T, password string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, addr, stop := lab.openSOL(t, ctx)
	defer stop()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Minute))
	var got []byte
	mark := 0
	buf := make([]byte, 4096)
	// expect reads until what arrived since the last send holds want.
	expect := func(want string) {
		t.Helper()
		for !bytes.Contains(got[mark:], []byte(want)) {
			k, err := c.Read(buf)
			got = append(got, buf[:k]...)
			if err != nil {
				lab.fail(t, "waiting for %q on the SOL console at %s: %v; read %q", want, addr, err, truncate(string(got), 2000))
			}
		}
	}
	send := func(s string) {
		t.Helper()
		mark = len(got)
		if _, err := c.Write([]byte(s + "\r")); err != nil {
			lab.fail(t, "typing into the SOL console at %s: %v", addr, err)
		}
	}
	began := time.Now()
	send("") // a fresh login prompt
	expect("login:")
	send("rescue")
	expect("Password:")
	send("not-" + password)
	expect("Login incorrect")
	expect("login:")
	send("rescue")
	expect("Password:")
	send(password)
	expect("$ ")
	send("echo rescue-login-$((6*7)) user=$(id -un)")
	expect("rescue-login-42 user=rescue")
	send("exit")
	t.Logf("logged in as rescue through IPMI SOL (the ipmitool-socat console at %s) %.1fs after enabling the console; a wrong password refused first", addr, time.Since(began).Seconds())
}

// openSOL enables the node's console and dials its TCP address; stop
// disables the console.
func (lab *e2eLab) openSOL(t *testing.T, ctx context.Context) (net.Conn, string, func()) {
	t.Helper()
	if err := lab.cond.SetConsoleMode(ctx, lab.node, true); err != nil {
		lab.fail(t, "enabling the console: %v", err)
	}
	stop := func() {
		if err := lab.cond.SetConsoleMode(context.Background(), lab.node, false); err != nil {
			t.Errorf("disabling the console: %v", err)
		}
	}
	var addr string
	for addr == "" {
		st, err := lab.cond.ConsoleInfo(ctx, lab.node)
		if err == nil && st.Info != nil {
			addr = strings.TrimPrefix(st.Info.URL, "tcp://")
			break
		}
		select {
		case <-ctx.Done():
			stop()
			lab.fail(t, "the console never started: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		stop()
		lab.fail(t, "console %s: %v", addr, err)
	}
	return c, addr, stop
}

// markerThroughSOL enables the node's console (ipmitool-socat: the
// conductor's console interface runs "ipmitool sol activate" against
// ipmi_sim, whose SOL device carries the VM's serial port) and reads the
// OS marker, which the OS prints every 10 s, from the console's TCP
// address; then disables the console.
func (lab *e2eLab) markerThroughSOL(t *testing.T, userData string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	c, addr, stop := lab.openSOL(t, ctx)
	defer stop()
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	want := OSMarkerPrefix + " hostname=" + e2eHostname + " user-data=" + userData
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(got, []byte(want)) {
		k, err := c.Read(buf)
		got = append(got, buf[:k]...)
		if len(got) > 1<<20 {
			got = got[len(got)-(1<<19):]
		}
		if err != nil {
			lab.fail(t, "reading the SOL console at %s: %v; read %q", addr, err, truncate(string(got), 2000))
		}
	}
	t.Logf("marker read through IPMI SOL (the ipmitool-socat console at %s) %.1fs after enabling the console", addr, time.Since(began).Seconds())
}
