package vmlab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal/configdrive"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestOSImageReadsConfigDrive boots the OS image from its disk with a
// config drive built by Anvil's configdrive package attached, and waits
// for the marker naming the config drive's hostname and user_data value:
// what the deploy test will read after IPA wrote both. The UEFI OS image
// boots the same way under OVMF, through its removable-media loader.
func TestOSImageReadsConfigDrive(t *testing.T) {
	n := NewTestNetwork(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cache, err := DefaultCache()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	img, err := BuildOSImage(ctx, cache)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("OS image ready in %.1fs (built now: %v): %s, sha256 %s", time.Since(began).Seconds(), img.Built, img.Raw, img.RawSHA256)
	if got, err := fileSHA256(img.Raw); err != nil || got != img.RawSHA256 {
		t.Fatalf("disk.raw SHA-256 %s (%v), recorded %s", got, err, img.RawSHA256)
	}

	drive, err := configdrive.Build(ctx, configdrive.Node{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Name: "vm-os"},
		configdrive.Contents{MetaData: map[string]any{"hostname": "vm-os-host"}, UserData: "#cloud-config\nanvil-marker: v-42\n"})
	if err != nil {
		t.Fatal(err)
	}
	iso, err := configdrive.Decode(drive)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cd := filepath.Join(dir, "config-2.iso")
	if err := os.WriteFile(cd, iso, 0o644); err != nil {
		t.Fatal(err)
	}
	// The BIOS image with SeaBIOS; the UEFI image (GPT, EFI System
	// Partition) with OVMF and no boot entry: the removable-media
	// fallback loader boots the same kernel and initramfs.
	uefi, uerr := BuildUEFIOSImage(ctx, cache, img)
	if uerr != nil && !errors.Is(uerr, ErrUnavailable) {
		t.Fatal(uerr)
	}
	// The secure boot image under OVMF with secure boot on and
	// Microsoft's keys: the firmware starts the fallback shim, which
	// starts the signed GRUB, which has shim verify the kernel, which
	// says secure boot is on.
	sb, sberr := BuildSecureBootOSImage(ctx, cache, img)
	if sberr != nil && !errors.Is(sberr, ErrUnavailable) {
		t.Fatal(sberr)
	}
	for _, name := range []string{string(BIOS), string(UEFI), "uefi-secureboot"} {
		t.Run(name, func(t *testing.T) {
			fw, secure := Firmware(name), name == "uefi-secureboot"
			src, order, bootIndex, mem := img.Raw, "c", "", 0
			var lines []string
			if secure {
				fw = UEFI
			}
			if fw == UEFI {
				u, err := uefi, uerr
				if secure {
					u, err = sb, sberr
				}
				if err != nil {
					t.Skip(err.Error())
				}
				for _, f := range []string{OVMFCode, OVMFSecureCode} {
					if _, err := os.Stat(f); err != nil {
						t.Skipf("no %s (Debian package ovmf)", f)
					}
				}
				if got, err := fileSHA256(u.Raw); err != nil || got != u.RawSHA256 {
					t.Fatalf("UEFI disk.raw SHA-256 %s (%v), recorded %s", got, err, u.RawSHA256)
				}
				// 1 GiB as the lab's machines: with 256 MiB GRUB's linux
				// loader ran out of memory under OVMF.
				src, order, bootIndex, mem = u.Raw, "", ",bootindex=0", 1024
				lines = []string{UEFIFallbackLoad}
				if secure {
					lines = append(lines, SecureBootLine)
				}
			}
			lines = append(lines, OSDiskLine)
			disk := filepath.Join(dir, name+"-disk.raw")
			if err := copyFile(src, disk); err != nil {
				t.Fatal(err)
			}
			vm, err := StartVM(ctx, n, VMOptions{
				Name: "os-" + name, MAC: "52:54:00:a0:00:09", BootOrder: order, NoROM: true, Firmware: fw, MemoryMB: mem,
				SecureBoot: secure,
				ExtraArgs: []string{
					"-drive", "file=" + disk + ",format=raw,if=none,id=os0", "-device", "virtio-blk-pci,drive=os0" + bootIndex,
					"-drive", "file=" + cd + ",format=raw,if=virtio,readonly=on",
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer vm.Stop()
			// In order: the loader, the kernel's secure boot line, the
			// OS's first line.
			var last Line
			for _, want := range lines {
				l, err := vm.Console.WaitForAfter(ctx, last.At, want)
				if err != nil {
					t.Fatalf("no %q after %q: %v\n%s", want, last.Text, err, vm.Console.Transcript(vm.Started, 40))
				}
				last = l
			}
			line, err := vm.Console.WaitFor(ctx, OSMarkerPrefix)
			if err != nil {
				t.Fatalf("no marker: %v\n%s", err, vm.Console.Transcript(vm.Started, 40))
			}
			if want := OSMarkerPrefix + " hostname=vm-os-host user-data=v-42"; !strings.Contains(line.Text, want) {
				t.Fatalf("marker %q, want %q", line.Text, want)
			}
			t.Logf("%s: marker %.1fs after QEMU started", name, line.At.Sub(vm.Started).Seconds())
		})
	}
}

// TestIPARamdiskLooksUpAndHeartbeats boots the stock IPA ramdisk (IPA
// 2023.1 from the peers tarball, its real GenericHardwareManager) in a VM
// on the lab network and serves Anvil's agent endpoints on the bridge: the
// agent gets an address by DHCP, looks its node up by the VM's MAC with
// the real lookup handler, and heartbeats with its callback URL and its
// auto-TLS certificate.
func TestIPARamdiskLooksUpAndHeartbeats(t *testing.T) {
	tarball := os.Getenv(IPATarballEnv)
	if tarball == "" {
		t.Skip(IPATarballEnv + " not set: stock IPA ramdisk test skipped")
	}
	n := NewTestNetwork(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	cache, err := DefaultCache()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	rd, err := BuildIPARamdisk(ctx, cache, tarball)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("IPA ramdisk ready in %.1fs (built now: %v): %s", time.Since(began).Seconds(), rd.Built, rd.Initramfs)

	stopDHCP := startLabDHCP(t, n)
	defer stopDHCP()

	const mac = "52:54:00:a0:00:0a"
	be := &labBackend{node: agentclient.Node{UUID: "9f0c7c3e-5d1a-4c9b-8a65-3b2f0e1d4c77", Name: "vm-ipa", ProvisionState: statemachine.DeployWait},
		mac: mac, heartbeats: make(chan agentclient.Heartbeat, 8), lookups: make(chan time.Time, 64)}
	h, err := agentclient.NewHandler(be, agentclient.HandlerConfig{AllowInsecureCallback: true})
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := n.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(ServerIP, "6385"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := agentclient.NewServer(h, agentclient.ServerConfig{})
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	disk := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// IPA refuses a root disk under 4 GiB; a sparse file costs nothing.
	if err := os.Truncate(disk, 5<<30); err != nil {
		t.Fatal(err)
	}
	vm, err := StartVM(ctx, n, VMOptions{
		Name: "ipa", MAC: mac, MemoryMB: 1024, NoROM: true,
		Kernel: rd.Kernel.Path, Initrd: rd.Initramfs,
		Append: "console=ttyS0,115200 rootfstype=ramfs ipa-api-url=http://" + net.JoinHostPort(ServerIP, "6385") +
			" ipa-insecure=1 ipa-debug=1",
		ExtraArgs: []string{"-drive", "file=" + disk + ",format=raw,if=virtio"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Stop()
	if _, err := vm.Console.WaitFor(ctx, "anvil-ipa: network up"); err != nil {
		t.Fatalf("ramdisk network: %v\n%s", err, vm.Console.Transcript(vm.Started, 60))
	}
	var firstLookup time.Time
	select {
	case firstLookup = <-be.lookups:
	case <-ctx.Done():
		t.Fatalf("no lookup\n%s", vm.Console.Transcript(vm.Started, 60))
	}
	var hb agentclient.Heartbeat
	select {
	case hb = <-be.heartbeats:
	case <-ctx.Done():
		t.Fatalf("no heartbeat\n%s", vm.Console.Transcript(vm.Started, 60))
	}
	if hb.NodeUUID != be.node.UUID || !strings.HasPrefix(hb.CallbackURL, "http") || hb.AgentVersion != IPAVersion {
		t.Fatalf("heartbeat %+v", hb)
	}
	t.Logf("QEMU start → lookup %.1fs → first heartbeat %.1fs (agent %s at %s, TLS certificate pinned: %v); stages after QEMU's start:\n%s",
		firstLookup.Sub(vm.Started).Seconds(), hb.ReceivedAt.Sub(vm.Started).Seconds(), hb.AgentVersion, hb.CallbackURL, hb.AgentVerifyCA != "",
		RamdiskStages(vm.Console, vm.Started))
	t.Logf("the agent's commands before its lookup that took 0.3 s or more (IPA's debug log):\n%s", slowCommands(vm.Console, vm.Started, firstLookup, 0.3))
}

// slowCommands lists the commands the agent ran between from and to
// (oslo's "CMD ... returned: N in Xs" debug lines) that took at least
// min seconds, with their totals: what an agent's start waits for.
func slowCommands(c *Console, from, to time.Time, min float64) string {
	re := regexp.MustCompile(`CMD "(.*)" returned: (-?\d+) in ([0-9.]+)s`)
	var b strings.Builder
	total, n := 0.0, 0
	for _, l := range c.Lines() {
		if l.At.Before(from) || l.At.After(to) {
			continue
		}
		m := re.FindStringSubmatch(l.Text)
		if m == nil {
			continue
		}
		secs, _ := strconv.ParseFloat(m[3], 64)
		total += secs
		n++
		if secs >= min {
			fmt.Fprintf(&b, "  %+7.1fs  %5.2fs  exit %s  %s\n", l.At.Sub(from).Seconds(), secs, m[2], truncate(m[1], 90))
		}
	}
	fmt.Fprintf(&b, "  %d commands, %.1fs in all", n, total)
	return b.String()
}

// startLabDHCP runs dnsmasq on the lab bridge as a plain DHCP server (no
// DNS, no boot options) and returns its stop.
func startLabDHCP(t *testing.T, n *Network) func() {
	t.Helper()
	if _, err := exec.LookPath("dnsmasq"); err != nil {
		t.Skip("no dnsmasq (Debian package dnsmasq-base): stock IPA ramdisk test skipped")
	}
	dir := t.TempDir()
	cmd := n.Command("dnsmasq", "--no-daemon", "--port=0", "--interface="+BridgeName, "--bind-interfaces",
		"--dhcp-range="+PoolStart+","+PoolEnd+",1h", "--dhcp-leasefile="+filepath.Join(dir, "leases"),
		"--pid-file=", "--conf-file=/dev/null")
	p, err := n.Start("dnsmasq", cmd)
	if err != nil {
		t.Fatal(err)
	}
	return func() { _ = p.Stop(2 * time.Second) }
}

// labBackend is one node waiting for its agent, as the conductor would
// hold it: lookup by the VM's MAC, a token created once, heartbeats
// recorded.
type labBackend struct {
	node       agentclient.Node
	mac        string
	mu         sync.Mutex
	heartbeats chan agentclient.Heartbeat
	lookups    chan time.Time
}

func (b *labBackend) LookupNode(_ context.Context, q agentclient.LookupQuery) (agentclient.Node, error) {
	select {
	case b.lookups <- time.Now():
	default:
	}
	for _, a := range q.Addresses {
		if a == b.mac {
			return b.get(), nil
		}
	}
	return agentclient.Node{}, agentclient.ErrNodeNotFound
}

func (b *labBackend) GetNode(_ context.Context, ident string) (agentclient.Node, error) {
	if ident == b.node.UUID || ident == b.node.Name {
		return b.get(), nil
	}
	return agentclient.Node{}, agentclient.ErrNodeNotFound
}

func (b *labBackend) get() agentclient.Node {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.node
}

func (b *labBackend) EnsureAgentToken(_ context.Context, uuid, candidate string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.node.AgentToken != "" {
		return false, nil
	}
	b.node.AgentToken = candidate
	return true, nil
}

func (b *labBackend) RecordHeartbeat(_ context.Context, hb agentclient.Heartbeat) error {
	b.mu.Lock()
	b.node.AgentURL, b.node.AgentVerifyCA = hb.CallbackURL, hb.AgentVerifyCA
	b.mu.Unlock()
	select {
	case b.heartbeats <- hb:
	default:
	}
	return nil
}

var _ agentclient.Backend = (*labBackend)(nil)
