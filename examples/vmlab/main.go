// Command vmlab provisions one QEMU virtual machine as bare metal, for
// real, on one Linux machine: the repository's lab (internal/vmlab) puts
// a network namespace with a bridge, Anvil's boot server (DHCP, TFTP,
// HTTP), an image server and the conductor's agent API on it, and starts
// a virtual machine (TCG) whose BMC is Debian's ipmi_sim. The conductor,
// with the real ipmi plugin, the ipxe boot interface, the direct deploy
// and agent inspect interfaces, takes the machine through enroll and
// manage, in-band inspection by the stock Ironic Python Agent ramdisk,
// provide (automated cleaning: erase_devices_metadata, erase_devices off),
// a deploy of a whole-disk raw image with a config drive (the booted OS
// prints its hostname on the serial console) and undeploy, printing the
// wall time of every stage and a summary table.
//
// It checks what it needs first and says what is missing, with the Debian
// packages to install (-install runs apt-get install for them). The IPA
// ramdisk and the OS image are built from Debian packages on first use
// and cached under ~/.cache/anvil/vmlab. Ctrl-C stops everything: every
// process by PID, and the namespace is removed.
//
// Usage (as root, from the repository):
//
//	go run ./examples/vmlab [-install] [-ipa-tarball path] [-keep-active] [-poll-commands=false] [-v]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/internal/vmlab"
	"github.com/anvilmetal/anvil/statemachine"
)

// defaultTarball is the IPA source, relative to the repository's root.
const defaultTarball = "../shared/peers/ironic-python-agent-2023.1.tar.gz"

func main() {
	install := flag.Bool("install", false, "apt-get install the missing Debian packages first")
	tarball := flag.String("ipa-tarball", "", "the Ironic Python Agent 2023.1 source tarball (default $"+vmlab.IPATarballEnv+", else "+defaultTarball+" relative to the repository)")
	keepActive := flag.Bool("keep-active", false, "leave the machine deployed: skip the undeploy")
	poll := flag.Bool("poll-commands", true, "continue each in-band step when the agent's command ends (AgentSettings.PollCommands), not at its next heartbeat")
	verbose := flag.Bool("v", false, "print each stage's boot stages, requests, steps and heartbeats")
	inspect := flag.Bool("inspect", true, "inspect in band before provide; false: provide boots the ramdisk itself (Ironic's lifecycle figures)")
	flag.Parse()

	// The first Ctrl-C stops cleanly; a second one kills (the lab's
	// processes die with it, and the next run removes the namespace).
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			fmt.Fprintln(os.Stderr, "vmlab: stopping (Ctrl-C again to force)")
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			cancel()
		case <-done:
		}
	}()
	err := run(ctx, config{tarball: *tarball, install: *install, keepActive: *keepActive, poll: *poll, verbose: *verbose,
		inspect: *inspect, out: os.Stdout})
	interrupted := ctx.Err() != nil
	close(done)
	cancel()
	if err != nil {
		if interrupted {
			fmt.Fprintln(os.Stderr, "vmlab: interrupted; everything stopped")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "vmlab:", err)
		os.Exit(1)
	}
}

type config struct {
	tarball                            string
	install, keepActive, poll, verbose bool
	inspect                            bool
	out                                io.Writer
}

// stage is one timed step of the run, for the summary.
type stage struct {
	name string
	took time.Duration
	note string
}

func run(ctx context.Context, cfg config) error {
	out := cfg.out
	began := time.Now()
	tarball, err := findTarball(cfg.tarball)
	if err != nil {
		return err
	}
	missing := checkPrereqs(tarball)
	if pkgs := packagesOf(missing); len(pkgs) > 0 && cfg.install && os.Geteuid() == 0 {
		fmt.Fprintf(out, "installing %s\n", strings.Join(pkgs, " "))
		if err := aptInstall(ctx, out, pkgs); err != nil {
			return err
		}
		missing = checkPrereqs(tarball)
	}
	if len(missing) > 0 {
		for _, m := range missing {
			fmt.Fprintln(out, "missing:", m)
		}
		if pkgs := packagesOf(missing); len(pkgs) > 0 {
			fmt.Fprintf(out, "install them with: apt-get install --no-install-recommends %s (or run with -install)\n", strings.Join(pkgs, " "))
		}
		return fmt.Errorf("missing prerequisites: %d", len(missing))
	}

	var stages []stage
	timed := func(name, note string, from time.Time) {
		s := stage{name, time.Since(from), note}
		stages = append(stages, s)
		fmt.Fprintf(out, "== %-9s %7.1fs  %s\n", s.name, s.took.Seconds(), s.note)
	}
	defer func() {
		if len(stages) > 0 {
			printSummary(out, stages, time.Since(began))
		}
	}()

	// The images, from the cache or built now.
	cache, err := vmlab.DefaultCache()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "images: cache %s (a first build takes 2 to 10 minutes)\n", cache.Dir)
	images, err := vmlab.BuildLabImages(ctx, cache, tarball)
	if err != nil {
		return err
	}
	stages = append(stages,
		stage{"ramdisk", images.RamdiskTime, builtOrCached("IPA ramdisk", images.Ramdisk.Built)},
		stage{"os-image", images.OSTime, builtOrCached("OS image", images.OS.Built)})
	for _, s := range stages {
		fmt.Fprintf(out, "== %-9s %7.1fs  %s\n", s.name, s.took.Seconds(), s.note)
	}

	// The ipmi plugin executable.
	start := time.Now()
	pdir, err := os.MkdirTemp("", "vmlab-plugin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(pdir)
	pluginPath, err := vmlab.BuildPlugin(ctx, vmlab.IPMIPluginPackage, "ipmi", pdir)
	if err != nil {
		return err
	}
	timed("plugin", "go build "+vmlab.IPMIPluginPackage, start)

	// The lab: namespace, servers, conductor, the machine's BMC.
	fmt.Fprintln(out, "starting the lab (it waits for one of the machine's VM slots while both are busy)")
	start = time.Now()
	lab, err := vmlab.StartLab(ctx, vmlab.LabOptions{
		BMC: vmlab.IPMILabBMC(), PluginPath: pluginPath, Images: &images, PollCommands: cfg.poll,
	})
	if err != nil {
		return err
	}
	defer func() {
		cstart := time.Now()
		if err := lab.Close(); err != nil {
			fmt.Fprintln(out, "closing the lab:", err)
		}
		timed("stop", "machine, BMC, servers stopped; namespace removed", cstart)
	}()
	timed("lab", fmt.Sprintf("namespace, boot server, conductor (poll commands: %v), ipmi_sim BMC", cfg.poll), start)

	p := &provision{lab: lab, out: out, verbose: cfg.verbose, timed: timed}
	if err := p.run(ctx, cfg.keepActive, cfg.inspect); err != nil {
		if ctx.Err() == nil {
			fmt.Fprintln(out, baremetal.MaskText(lab.Diagnostics()))
		}
		return err
	}
	return nil
}

// provision takes the lab's machine through the conductor.
type provision struct {
	lab     *vmlab.Lab
	out     io.Writer
	verbose bool
	timed   func(name, note string, from time.Time)
}

// wait waits for the node to reach want, within timeout.
func (p *provision) wait(ctx context.Context, want statemachine.State, timeout time.Duration) (*baremetal.Node, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return p.lab.WaitState(wctx, want)
}

// done records a stage and, with -v, prints its report.
func (p *provision) done(name, note string, from time.Time) {
	p.timed(name, note, from)
	if p.verbose {
		fmt.Fprintln(p.out, baremetal.MaskText(p.lab.PhaseReport(name, from, time.Now())))
	}
}

func (p *provision) run(ctx context.Context, keepActive, inspect bool) error {
	cond := p.lab.Conductor()

	// Enroll and manage: verification reads the power state from ipmi_sim.
	start := time.Now()
	nd, err := p.lab.EnrollNode(ctx)
	if err != nil {
		return err
	}
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	go p.lab.TrackSteps(tctx, func(at time.Time, change string) {
		fmt.Fprintf(p.out, "   %s  %s\n", at.Format("15:04:05"), change)
	})
	if err := cond.Manage(ctx, nd.UUID); err != nil {
		return err
	}
	if nd, err = p.wait(ctx, statemachine.Manageable, 2*time.Minute); err != nil {
		return err
	}
	p.done("manage", fmt.Sprintf("node %s (%s) enrolled, BMC credentials verified (%s)", nd.Name, nd.UUID, nd.PowerState), start)

	if inspect {
		// Inspect in band: the IPA ramdisk boots over the network
		// (iPXE) and posts the machine's inventory.
		start = time.Now()
		if err := cond.Inspect(ctx, nd.UUID); err != nil {
			return err
		}
		if nd, err = p.wait(ctx, statemachine.Manageable, 25*time.Minute); err != nil {
			return err
		}
		ports, err := p.lab.Store().ListPorts(ctx, nd.UUID)
		if err != nil {
			return err
		}
		var macs []string
		for _, pt := range ports {
			macs = append(macs, pt.Address)
		}
		var props []string
		for _, k := range []string{"cpus", "memory_mb", "local_gb", "cpu_arch"} {
			props = append(props, fmt.Sprintf("%s=%v", k, nd.Properties[k]))
		}
		p.done("inspect", fmt.Sprintf("%s, MAC %s", strings.Join(props, " "), strings.Join(macs, ",")), start)
	}

	// Provide: automated cleaning (erase_devices_metadata;
	// erase_devices has priority 0) by the agent still running after
	// inspection (fast track), or booted now.
	start = time.Now()
	if err := cond.Provide(ctx, nd.UUID); err != nil {
		return err
	}
	if nd, err = p.wait(ctx, statemachine.Available, 20*time.Minute); err != nil {
		return err
	}
	p.done("provide", "cleaned (erase_devices_metadata), "+string(nd.ProvisionState), start)

	// Deploy the raw image with a config drive; the machine reboots into
	// it and prints the config drive's hostname.
	start = time.Now()
	const userData = "vmlab-example"
	drive, err := vmlab.ConfigDrive(userData)
	if err != nil {
		return err
	}
	if err := cond.Deploy(ctx, nd.UUID, conductor.DeployOptions{ConfigDrive: drive}); err != nil {
		return err
	}
	if nd, err = p.wait(ctx, statemachine.Active, 20*time.Minute); err != nil {
		return err
	}
	mctx, mcancel := context.WithTimeout(ctx, 10*time.Minute)
	marker, err := p.lab.OSMarker(mctx, start, userData)
	mcancel()
	if err != nil {
		return err
	}
	p.done("deploy", fmt.Sprintf("%s; the OS printed %q %.1fs after the deploy began", nd.ProvisionState,
		baremetal.MaskText(marker.Text), marker.At.Sub(start).Seconds()), start)

	if keepActive {
		fmt.Fprintln(p.out, "-keep-active: the machine stays deployed until Ctrl-C")
		<-ctx.Done()
		return ctx.Err()
	}

	// Undeploy: the ramdisk boots again and cleaning erases the disk.
	start = time.Now()
	if err := cond.Undeploy(ctx, nd.UUID); err != nil {
		return err
	}
	if nd, err = p.wait(ctx, statemachine.Available, 25*time.Minute); err != nil {
		return err
	}
	p.done("undeploy", "cleaned, "+string(nd.ProvisionState), start)
	return nil
}

func builtOrCached(what string, built bool) string {
	if built {
		return what + " built now"
	}
	return what + " from the cache"
}

func printSummary(out io.Writer, stages []stage, total time.Duration) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tSECONDS\t")
	for _, s := range stages {
		fmt.Fprintf(tw, "%s\t%.1f\t\n", s.name, s.took.Seconds())
	}
	fmt.Fprintf(tw, "total\t%.1f\t\n", total.Seconds())
	tw.Flush()
}

// findTarball is the flag's path, else the environment's, else the
// default beside the repository.
func findTarball(flagPath string) (string, error) {
	if flagPath != "" {
		return filepath.Abs(flagPath)
	}
	if p := os.Getenv(vmlab.IPATarballEnv); p != "" {
		return filepath.Abs(p)
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Clean(filepath.Join(root, defaultTarball)), nil
}

// repoRoot is the nearest directory up from the working directory with
// a go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("run from the repository (no go.mod above " + dir + ")")
		}
	}
}

// prereq is one thing the lab needs.
type prereq struct {
	what string // how it is named to the user
	have func() bool
	pkgs []string // Debian packages that provide it; none: not installable
	hint string   // what to do when no package gives it
}

// missingPrereq is a prerequisite that is not met.
type missingPrereq struct {
	prereq
}

func (m missingPrereq) String() string {
	if len(m.pkgs) > 0 {
		return fmt.Sprintf("%s (Debian package %s)", m.what, strings.Join(m.pkgs, " "))
	}
	return fmt.Sprintf("%s (%s)", m.what, m.hint)
}

func command(name string) func() bool {
	return func() bool { _, err := exec.LookPath(name); return err == nil }
}

func file(path string) func() bool {
	return func() bool { _, err := os.Stat(path); return err == nil }
}

// prereqs lists what the lab's pieces need: the namespace and QEMU,
// the BMC, the boot server's iPXE, the image builds (realimages.go and
// the build scripts) and the IPA source.
func prereqs(tarball string) []prereq {
	cmd := func(name string, pkgs ...string) prereq {
		return prereq{what: name, have: command(name), pkgs: pkgs}
	}
	return []prereq{
		{what: "root", have: func() bool { return os.Geteuid() == 0 }, hint: "network namespaces, taps and debootstrap need root: sudo -E go run ./examples/vmlab"},
		{what: "/dev/net/tun", have: file("/dev/net/tun"), hint: "modprobe tun"},
		cmd("ip", "iproute2"),
		cmd(vmlab.QEMUBinary, "qemu-system-x86"),
		{what: "/usr/lib/ipxe/qemu/efi-virtio.rom", have: file("/usr/lib/ipxe/qemu/efi-virtio.rom"), pkgs: []string{"ipxe-qemu"}},
		{what: "/usr/lib/ipxe/undionly.kpxe", have: file("/usr/lib/ipxe/undionly.kpxe"), pkgs: []string{"ipxe"}},
		cmd(vmlab.IPMISimBinary, "openipmi"),
		cmd("ipmitool", "ipmitool"),
		cmd("apt-cache", "apt"), cmd("apt-get", "apt"), cmd("dpkg-deb", "dpkg"),
		cmd("debootstrap", "debootstrap"),
		cmd("zstd", "zstd"),
		cmd("depmod", "kmod"),
		cmd("cpio", "cpio"),
		cmd("python3", "python3"),
		cmd("gzip", "gzip"),
		cmd("syslinux", "syslinux"),
		{what: "/usr/lib/syslinux/mbr/mbr.bin", have: file("/usr/lib/syslinux/mbr/mbr.bin"), pkgs: []string{"syslinux-common"}},
		cmd("mkfs.vfat", "dosfstools"),
		cmd("mcopy", "mtools"),
		cmd("sfdisk", "fdisk"),
		cmd("qemu-img", "qemu-utils"),
		cmd("xz", "xz-utils"),
		{what: vmlab.BusyboxPath + " (static)", have: file(vmlab.BusyboxPath), pkgs: []string{"busybox-static"}},
		{what: "go", have: command("go"), hint: "the Go toolchain go.mod names, which builds the ipmi plugin"},
		{what: "IPA source " + tarball, have: file(tarball), hint: "-ipa-tarball or $" + vmlab.IPATarballEnv},
	}
}

func checkPrereqs(tarball string) []missingPrereq {
	var out []missingPrereq
	for _, p := range prereqs(tarball) {
		if !p.have() {
			out = append(out, missingPrereq{p})
		}
	}
	return out
}

// packagesOf is the Debian packages that would provide what is missing.
func packagesOf(missing []missingPrereq) []string {
	var pkgs []string
	for _, m := range missing {
		for _, p := range m.pkgs {
			if !slices.Contains(pkgs, p) {
				pkgs = append(pkgs, p)
			}
		}
	}
	return pkgs
}

// aptInstall runs apt-get update and install for pkgs.
func aptInstall(ctx context.Context, out io.Writer, pkgs []string) error {
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq", "--no-install-recommends"}, pkgs...)} {
		c := exec.CommandContext(ctx, "apt-get", args...)
		c.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		c.Stdout, c.Stderr = out, out
		if err := c.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", args[0], err)
		}
	}
	return nil
}
