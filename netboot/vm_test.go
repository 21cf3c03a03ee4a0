package netboot_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/internal/vmlab"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/netboot/dhcp"
	"github.com/anvilmetal/anvil/netboot/grubimage"
	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/netboot/tftp"
)

// The real-firmware test of the whole boot server: QEMU (TCG) virtual
// machines on a bridge in a network namespace of their own (internal/vmlab)
// boot from Anvil's DHCP, TFTP and HTTP, started by Server.Listen inside
// the namespace: DHCP on the bridge (authoritative, pool
// 192.0.2.100-150, or proxyDHCP beside an address-only server), TFTP on
// 192.0.2.1:69, HTTP on 192.0.2.1:8080. Each case boots the marker
// initramfs (or, for the local-disk case, a disk whose boot sector prints
// a marker) with Debian's firmware and loaders: SeaBIOS with the NIC's
// iPXE ROM, OVMF's own PXE and UEFI HTTP boot (PXE turned off through
// fw_cfg), pxelinux and GRUB. It checks the kernel
// command line (the parameters and BOOTIF), the stages the Server
// recorded, in order, with the bytes of kernel and ramdisk, and how DHCP
// classified the firmware, and logs each stage's time since QEMU started.
//
// ANVIL_TEST_QEMU=1 runs it (it needs root, iproute2, qemu-system-x86,
// ipxe-qemu, ipxe, ovmf, pxelinux, syslinux-common, grub-efi-amd64-bin,
// busybox-static and apt to fetch the Debian kernel); without it, or where
// the namespace or VM cannot be made, each case skips with one line.

// vmHTTPPort is the HTTP port inside the namespace (nothing else is there).
const vmHTTPPort = "8080"

// vmCase is one firmware boot.
type vmCase struct {
	name     string
	firmware vmlab.Firmware
	noROM    bool
	// noPXE turns OVMF's PXE off: it boots by UEFI HTTP.
	noPXE bool
	// firmwareArch is how the firmware's own discovers (those before
	// the first file it fetches) must be classified, when not arch: UEFI
	// HTTP boot's differ from those of the iPXE it loads.
	firmwareArch dhcp.Arch
	// machine is what the Server knows of the VM: "config" (a ramdisk
	// configuration with iface), "local" (a local-disk configuration
	// with iface), "enrolled" (the Resolver knows its MAC,
	// it has no configuration: local disk) or "unknown" (the Fallback).
	machine string
	iface   netboot.Interface
	proxy   bool
	expect  []stage.Stage
	// arch is how every DHCP discover must be classified.
	arch dhcp.Arch
	// timeout of the boot (default vmlab's 5 minutes).
	timeout time.Duration
	// memoryMB of the VM (default vmlab's).
	memoryMB int
	// httpGRUB: the server's Options.HTTPGRUB is a GRUB built by
	// netboot/grubimage for its HTTP base.
	httpGRUB bool
	// secureBoot: OVMF with secure boot on, and a SecureBoot
	// configuration (Debian's signed shim and GRUB).
	secureBoot bool
}

func TestVMFirmwareBoots(t *testing.T) {
	if os.Getenv(vmlab.EnvQEMU) != "1" {
		t.Skip(vmlab.EnvQEMU + "=1 not set: QEMU firmware boots skipped")
	}
	dhcpIPXE := []stage.Stage{stage.DHCPDiscover, stage.DHCPOffer, stage.DHCPAck}
	then := func(more ...stage.Stage) []stage.Stage { return slices.Concat(dhcpIPXE, more) }
	cases := []vmCase{
		{
			// SeaBIOS runs the NIC's iPXE ROM: DHCP, then everything over HTTP.
			name: "ipxe-bios", firmware: vmlab.BIOS, machine: "config", iface: netboot.IPXE, arch: dhcp.ArchBIOS,
			expect: then(stage.Script, stage.Kernel, stage.Ramdisk),
		},
		{
			// The ROM loads pxelinux.0 over TFTP; pxelinux (tsize and
			// blksize) its module, the MAC's configuration, kernel and
			// initrd over TFTP.
			name: "pxe-bios", firmware: vmlab.BIOS, machine: "config", iface: netboot.PXE, arch: dhcp.ArchBIOS,
			expect: then(stage.TFTPSent, stage.TFTPSent, stage.Script, stage.Kernel, stage.Ramdisk),
		},
		{
			// OVMF's PXE (no ROM) gets snponly.efi over TFTP; that iPXE
			// asks DHCP again and fetches script, kernel and ramdisk.
			name: "ipxe-uefi", firmware: vmlab.UEFI, noROM: true, machine: "config", iface: netboot.IPXE, arch: dhcp.ArchEFIx64,
			expect: then(stage.TFTPSent, stage.DHCPDiscover, stage.DHCPAck, stage.Script, stage.Kernel, stage.Ramdisk),
		},
		{
			// OVMF with the NIC's ROM: iPXE's EFI build drives the NIC
			// and asks our DHCP itself, as an x86-64 UEFI client.
			name: "ipxe-rom-uefi", firmware: vmlab.UEFI, machine: "config", iface: netboot.IPXE, arch: dhcp.ArchEFIx64,
			expect: then(stage.Script, stage.Kernel, stage.Ramdisk),
		},
		{
			// Our DHCP as proxyDHCP beside an address-only server: the
			// proxy's OFFER gives iPXE the script URL.
			name: "proxy-bios", firmware: vmlab.BIOS, machine: "config", iface: netboot.IPXE, proxy: true, arch: dhcp.ArchBIOS,
			expect: []stage.Stage{stage.DHCPDiscover, stage.DHCPOffer, stage.Script, stage.Kernel, stage.Ramdisk},
		},
		{
			// An enrolled machine without a configuration: the local-boot
			// script, whose sanboot reaches the disk, never a ramdisk.
			name: "enrolled-local-bios", firmware: vmlab.BIOS, machine: "enrolled", arch: dhcp.ArchBIOS,
			expect: then(stage.LocalBoot),
		},
		{
			// A local-disk configuration over iPXE: its sanboot.
			name: "ipxe-local-bios", firmware: vmlab.BIOS, machine: "local", iface: netboot.IPXE, arch: dhcp.ArchBIOS,
			expect: then(stage.LocalBoot),
		},
		{
			// A local-disk configuration over pxelinux: LOCALBOOT 0 hands
			// the machine back to SeaBIOS, which boots the disk next.
			name: "pxe-local-bios", firmware: vmlab.BIOS, machine: "local", iface: netboot.PXE, arch: dhcp.ArchBIOS,
			expect: then(stage.TFTPSent, stage.TFTPSent, stage.LocalBoot),
		},
		{
			// A machine nobody enrolled boots the fallback over iPXE.
			name: "fallback-bios", firmware: vmlab.BIOS, machine: "unknown", arch: dhcp.ArchBIOS,
			expect: then(stage.Fallback, stage.Kernel, stage.Ramdisk),
		},
		{
			// OVMF's PXE loads GRUB over TFTP; GRUB its configurations,
			// kernel and initrd over TFTP.
			name: "pxe-uefi", firmware: vmlab.UEFI, noROM: true, machine: "config", iface: netboot.PXE, arch: dhcp.ArchEFIx64,
			memoryMB: 512, // GRUB runs out of memory loading the kernel in 256
			expect:   then(stage.TFTPSent, stage.Script, stage.Kernel, stage.Ramdisk),
		},
		{
			// OVMF's UEFI HTTP boot (PXE off) loads snponly.efi by URL;
			// that iPXE asks DHCP again and fetches script, kernel and
			// ramdisk. No TFTP at all.
			name: "http-ipxe-uefi", firmware: vmlab.UEFI, noROM: true, noPXE: true, machine: "config", iface: netboot.HTTPIPXE,
			firmwareArch: dhcp.ArchEFIx64HTTP, arch: dhcp.ArchEFIx64,
			expect: then(stage.File, stage.DHCPDiscover, stage.DHCPAck, stage.Script, stage.Kernel, stage.Ramdisk),
		},
		{
			// OVMF's UEFI HTTP boot (PXE off) loads the HTTP boot GRUB
			// (netboot/grubimage) by URL; its embedded configuration asks
			// DHCP itself (GRUB's client sends no option 93: no
			// architecture; it ignores the offered pxelinux.0) and reads
			// grub/grub.cfg, which reads the NIC's configuration; kernel
			// and initrd over HTTP. No TFTP at all.
			name: "http-uefi", firmware: vmlab.UEFI, noROM: true, noPXE: true, machine: "config", iface: netboot.HTTP,
			httpGRUB: true, firmwareArch: dhcp.ArchEFIx64HTTP, arch: dhcp.ArchUnknown,
			memoryMB: 512, // GRUB runs out of memory loading the kernel in 256
			expect:   then(stage.File, stage.DHCPDiscover, stage.DHCPAck, stage.File, stage.Script, stage.Kernel, stage.Ramdisk),
		},
	}
	cases = append(cases, vmCase{
		// OVMF with secure boot on (Microsoft's keys): its PXE gets
		// Debian's signed shim over TFTP, which loads the signed GRUB
		// beside it (grubx64.efi), which reads its configurations and
		// has shim verify Debian's signed kernel.
		name: "pxe-uefi-secureboot", firmware: vmlab.UEFI, noROM: true, machine: "config", iface: netboot.PXE, arch: dhcp.ArchEFIx64,
		secureBoot: true, memoryMB: 512,
		expect: then(stage.TFTPSent, stage.TFTPSent, stage.Script, stage.Kernel, stage.Ramdisk),
	})
	var summary []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			line := runVMCase(t, tc)
			summary = append(summary, line)
		})
	}
	if len(summary) > 0 {
		t.Logf("firmware boots:\n%s", strings.Join(summary, "\n"))
	}
}

// runVMCase boots tc's VM from Anvil's boot server, checks what the
// scenario does not, and returns a one-line summary.
func runVMCase(t *testing.T, tc vmCase) string {
	n := vmlab.NewTestNetworkWith(t, vmlab.NetworkOptions{RouterAdvertisements: true})
	bs := &anvilBootServer{tc: tc, dir: t.TempDir()}
	sc := vmlab.Scenario{Firmware: tc.firmware, NoROM: tc.noROM, NoPXE: tc.noPXE, SecureBoot: tc.secureBoot, Expect: tc.expect, Timeout: tc.timeout, MemoryMB: tc.memoryMB}
	local := tc.machine == "enrolled" || tc.machine == "local"
	if local {
		sc.Disk = filepath.Join(t.TempDir(), "disk.img")
		if err := vmlab.LocalDiskImage(sc.Disk); err != nil {
			t.Fatal(err)
		}
		sc.Until = vmlab.LocalDiskMarker
		if tc.iface == netboot.PXE {
			// pxelinux's LOCALBOOT 0 returns to the ROM's iPXE, which
			// says it has no more network devices and returns to
			// SeaBIOS, which boots the disk next.
			sc.DiskBootable = true
			sc.FailOn = slices.DeleteFunc(vmlab.DefaultFailOn(), func(s string) bool { return s == "No more network devices" })
		}
	}
	res := vmlab.RunNetbootScenario(t, n, sc, bs.start)

	mac := bs.mac
	if local {
		for _, r := range res.Records {
			if r.Stage == stage.Kernel || r.Stage == stage.Ramdisk || r.Stage == stage.Script {
				t.Errorf("a machine booting from its local disk was served %s", r.Phrase())
			}
		}
	} else {
		bootif := "BOOTIF=01-" + strings.ReplaceAll(mac, ":", "-")
		if !strings.Contains(" "+res.Cmdline+" ", " "+bootif+" ") {
			t.Errorf("kernel command line %q lacks %s", res.Cmdline, bootif)
		}
	}
	firmware := true // before the first file the firmware fetched
	for _, r := range res.Records {
		switch r.Stage {
		case stage.DHCPDiscover:
			want := tc.arch
			if firmware && tc.firmwareArch != "" {
				want = tc.firmwareArch
			}
			if r.Arch != string(want) {
				t.Errorf("DHCP classified a discover as %q, want %q: %s", r.Arch, want, r.Phrase())
			}
		case stage.DHCPOffer, stage.DHCPAck, stage.Prepared:
		default:
			firmware = false
		}
		if tc.noPXE && (r.Stage == stage.TFTPSent || r.Stage == stage.TFTPFailed) {
			t.Errorf("a UEFI HTTP boot used TFTP: %s", r.Phrase())
		}
		if tc.noPXE && r.Stage == stage.DHCPOffer && firmware && !strings.HasPrefix(r.File, "http://") {
			t.Errorf("UEFI HTTP boot was offered boot file %q, not a URL: %s", r.File, r.Phrase())
		}
		if r.MAC != "" && r.MAC != mac {
			t.Errorf("a record names MAC %s, not the VM's %s: %s", r.MAC, mac, r.Phrase())
		}
		if tc.machine != "unknown" && r.Stage != stage.DHCPDiscover && r.Node != "" && r.Node != bs.node {
			t.Errorf("a record names node %q, want %q: %s", r.Node, bs.node, r.Phrase())
		}
	}
	if tc.secureBoot {
		// The signed chain: shim, then the GRUB it loads from beside it.
		var sent []string
		for _, r := range res.Records {
			if r.Stage == stage.TFTPSent {
				sent = append(sent, strings.TrimPrefix(r.File, "/"))
			}
		}
		if i := slices.Index(sent, "shimx64.efi"); i < 0 || !slices.Contains(sent[i:], "grubx64.efi") || slices.Contains(sent, "grubnetx64.efi") {
			t.Errorf("TFTP sent %q: want shimx64.efi, then grubx64.efi, and never the unsigned grubnetx64.efi", sent)
		}
		// The kernel says the firmware enforced secure boot.
		if !slices.ContainsFunc(res.Milestones, func(m vmlab.Milestone) bool { return m.What == "kernel: secure boot enabled" }) {
			t.Errorf("the kernel never printed %q: secure boot was not on", vmlab.SecureBootLine)
		}
	}
	if tc.proxy {
		// The address came from the other server; the proxy's OFFER
		// carried a boot file and no address.
		var leased, offered bool
		for _, r := range bs.addrRecords.Records() {
			leased = leased || r.Stage == stage.DHCPAck && r.MAC == mac && strings.HasPrefix(r.Addr, "192.0.2.1")
		}
		for _, r := range res.Records {
			offered = offered || r.Stage == stage.DHCPOffer && r.Addr == "" && r.File != ""
			if r.Stage == stage.DHCPAck && r.Addr != "" {
				t.Errorf("the proxy acknowledged an address: %s", r.Phrase())
			}
		}
		if !leased || !offered {
			t.Errorf("address server records %v, proxy records %v: want an ACK from the address server and a proxy OFFER with a boot file", bs.addrRecords.Records(), res.Records)
		}
	}
	var parts []string
	for _, m := range res.Milestones {
		if m.Record == nil || m.After < 0 {
			continue
		}
		p := fmt.Sprintf("%s %+.1fs", m.Record.Stage, m.After.Seconds())
		if m.Record.Stage == stage.TFTPSent {
			p = fmt.Sprintf("tftp %s %+.1fs", m.Record.File, m.After.Seconds())
		}
		if m.Record.Stage == stage.Kernel || m.Record.Stage == stage.Ramdisk {
			p = fmt.Sprintf("%s %.1f MiB %+.1fs", m.Record.Stage, float64(m.Record.Bytes)/(1<<20), m.After.Seconds())
		}
		parts = append(parts, p)
	}
	return fmt.Sprintf("%-20s boot %5.1fs (scenario %5.1fs): %s", tc.name, res.Boot.Seconds(), res.Total.Seconds(), strings.Join(parts, ", "))
}

// anvilBootServer starts Anvil's boot server for a vmlab scenario.
type anvilBootServer struct {
	tc  vmCase
	dir string // for the HTTP boot GRUB
	// Set by start: the VM's MAC and node, and (proxy) the records of the
	// address-only DHCP server.
	mac, node   string
	addrRecords stage.Recorder
}

// start is a vmlab.BootServer: a netboot.Server with the case's
// configuration, its DHCP, TFTP and HTTP listening in the namespace.
func (b *anvilBootServer) start(ctx context.Context, s vmlab.BootSetup) (func() error, error) {
	b.mac, b.node = s.MAC, s.Node
	tc := b.tc
	resolver := &macResolver{nodes: map[string]string{}}
	o := netboot.Options{
		HTTPBase:   "http://" + net.JoinHostPort(s.ServerAddr.String(), vmHTTPPort),
		TFTPServer: s.ServerAddr,
		Resolver:   resolver,
		Observer:   s.Observer,
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if tc.proxy {
		o.DHCPMode = dhcp.Proxy
	}
	if tc.httpGRUB {
		o.HTTPGRUB = filepath.Join(b.dir, "grubhttpx64.efi")
		if err := grubimage.Build(ctx, grubimage.Options{HTTPBase: o.HTTPBase, Out: o.HTTPGRUB}); err != nil {
			if errors.Is(err, grubimage.ErrNoTool) {
				err = fmt.Errorf("%w: %v", vmlab.ErrUnavailable, err)
			}
			return nil, err
		}
	}
	if tc.machine == "unknown" {
		o.Fallback = &netboot.Fallback{Kernel: s.Kernel, Ramdisk: s.Initrd, Params: s.Params}
	}
	srv, err := netboot.New(o)
	if err != nil {
		return nil, unavailable(err)
	}
	mode := netboot.BIOS
	if tc.firmware == vmlab.UEFI {
		mode = netboot.UEFI
	}
	switch tc.machine {
	case "config":
		if err := srv.PutConfig(ctx, netboot.Config{
			Node: s.Node, MACs: []string{s.MAC}, Interface: tc.iface, Mode: mode,
			Action: netboot.Ramdisk, Purpose: "deploy",
			Kernel: s.Kernel, Ramdisk: s.Initrd, Params: s.Params, SecureBoot: tc.secureBoot,
		}); err != nil {
			return nil, unavailable(err)
		}
	case "local":
		if err := srv.PutConfig(ctx, netboot.Config{
			Node: s.Node, MACs: []string{s.MAC}, Interface: tc.iface, Mode: mode, Action: netboot.LocalDisk,
		}); err != nil {
			return nil, unavailable(err)
		}
	case "enrolled":
		resolver.set(s.MAC, s.Node)
	}

	lo := netboot.ListenOptions{
		TFTPAddr: net.JoinHostPort(s.ServerAddr.String(), "69"),
		HTTPAddr: net.JoinHostPort(s.ServerAddr.String(), vmHTTPPort),
		// Each transfer's socket is opened in the namespace too: the
		// transfer goroutines run on threads outside it.
		TFTP: &tftp.Server{ListenTransfer: func(local netip.Addr) (c *net.UDPConn, err error) {
			err = s.Network.Do(func() error {
				c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
				return err
			})
			return c, err
		}},
		DHCP: &dhcp.Options{
			Mode: dhcp.Authoritative, Interface: s.Interface, ServerIP: s.ServerAddr,
			Subnet: s.Network.Prefix(), PoolStart: s.PoolStart, PoolEnd: s.PoolEnd,
		},
	}
	var stops []func() error
	stopAll := func() error {
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i]())
		}
		return errors.Join(errs...)
	}
	if tc.proxy {
		lo.DHCP = &dhcp.Options{Mode: dhcp.Proxy, Interface: s.Interface, ServerIP: s.ServerAddr}
		stop, err := b.startAddressServer(ctx, s)
		if err != nil {
			return nil, err
		}
		stops = append(stops, stop)
	}
	var l *netboot.Listeners
	if err := s.Network.Do(func() error {
		var err error
		l, err = srv.Listen(lo)
		return err
	}); err != nil {
		return nil, errors.Join(err, stopAll())
	}
	stops = append(stops, serveUntilStopped(ctx, "boot server", l.Serve))
	return stopAll, nil
}

// addressHost is the address-only DHCP server's interface and address in
// the proxy case: another host on the bridge.
const addressHost = "vaddr"

var addressHostIP = netip.MustParsePrefix("192.0.2.2/24")

// startAddressServer runs, on a second host of the bridge, a DHCP server
// that hands out addresses and no boot file: the network's existing DHCP
// server beside which Anvil runs as proxyDHCP.
func (b *anvilBootServer) startAddressServer(ctx context.Context, s vmlab.BootSetup) (func() error, error) {
	if err := s.Network.AddHost(ctx, addressHost, addressHostIP); err != nil {
		return nil, err
	}
	srv, err := dhcp.New(dhcp.Options{
		Mode: dhcp.Authoritative, Interface: addressHost, ServerIP: addressHostIP.Addr(),
		Subnet: s.Network.Prefix(), PoolStart: s.PoolStart, PoolEnd: s.PoolEnd,
		Decider:  dhcp.DeciderFunc(func(context.Context, dhcp.Client) dhcp.Decision { return dhcp.Decision{} }),
		Observer: &b.addrRecords,
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	// dhcp.Server.Serve binds its sockets on its calling goroutine, which
	// Network.Go keeps in the namespace.
	done := s.Network.Go(func() error { return srv.Serve(sctx) })
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return errors.New("the address-only DHCP server did not stop within 10 s")
		}
	}, nil
}

// serveUntilStopped runs serve on a goroutine and returns the function
// that cancels it and waits (bounded) for it to return.
func serveUntilStopped(ctx context.Context, what string, serve func(context.Context) error) func() error {
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- serve(sctx) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return fmt.Errorf("the %s did not stop within 10 s of its context ending", what)
		}
	}
}

// unavailable makes a missing boot loader file (a Debian package not
// installed) skip the case, as vmlab does for what it misses.
func unavailable(err error) error {
	var mf *netboot.MissingFileError
	if errors.As(err, &mf) {
		return fmt.Errorf("%w: %v", vmlab.ErrUnavailable, err)
	}
	return err
}

// macResolver knows the MACs in its map.
type macResolver struct {
	mu    sync.Mutex
	nodes map[string]string
}

func (r *macResolver) set(mac, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes[mac] = node
}

func (r *macResolver) NodeForMAC(_ context.Context, mac string) (string, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.nodes[mac]
	return n, ok, nil
}
