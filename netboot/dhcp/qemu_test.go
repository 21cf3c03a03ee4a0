package dhcp

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
)

// qemuEnv, set to 1, turns the skip of the firmware tests (no QEMU or no
// iPXE option ROM) into a failure.
const qemuEnv = "ANVIL_TEST_QEMU"

const (
	// Debian's ipxe-qemu. Its virtio ROM names PCI device 1af4:1041 only,
	// so SeaBIOS does not run it for QEMU 7.2's transitional
	// virtio-net-pci (1af4:1000); the e1000 one runs.
	qemuROM = "/usr/lib/ipxe/qemu/efi-e1000.rom"
	qemuMAC = "52:54:00:12:34:56"
)

func requireQEMU(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("qemu: a firmware boot takes tens of seconds (-short)")
	}
	bin, err := exec.LookPath("qemu-system-x86_64")
	why := ""
	if err != nil {
		why = "no qemu-system-x86_64 (Debian package qemu-system-x86)"
	} else if _, err := os.Stat(qemuROM); err != nil {
		why = "no " + qemuROM + " (Debian package ipxe-qemu)"
	}
	if why != "" {
		if os.Getenv(qemuEnv) == "1" {
			t.Fatalf("%s=1 but %s", qemuEnv, why)
		}
		t.Skipf("qemu: %s (set %s=1 to fail instead)", why, qemuEnv)
	}
	return bin
}

// bridgeWithTap adds to the server namespace a bridge (192.0.2.1/24,
// instead of the veth's address) with the veth and a tap for QEMU on it.
func bridgeWithTap(t *testing.T, p vethPair) (bridge, tap string) {
	bridge, tap = "br0", "tap0"
	ipCmd(t, "-n", p.serverNS, "addr", "flush", "dev", p.serverIf)
	ipCmd(t, "-n", p.serverNS, "link", "add", bridge, "type", "bridge")
	ipCmd(t, "-n", p.serverNS, "addr", "add", "192.0.2.1/24", "dev", bridge)
	ipCmd(t, "-n", p.serverNS, "tuntap", "add", "dev", tap, "mode", "tap")
	for _, l := range []string{p.serverIf, tap} {
		ipCmd(t, "-n", p.serverNS, "link", "set", l, "master", bridge)
		ipCmd(t, "-n", p.serverNS, "link", "set", l, "up")
	}
	ipCmd(t, "-n", p.serverNS, "link", "set", bridge, "up")
	return bridge, tap
}

// startQEMU network-boots a VM (TCG, iPXE option ROM) on tap in ns, and
// stops it by its PID when the test ends.
func startQEMU(t *testing.T, bin, ns, tap string, extra ...string) {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"netns", "exec", ns, bin}, extra...)
	cmd := exec.Command("ip", append(args, "-m", "256", "-accel", "tcg",
		"-display", "none", "-serial", "file:"+filepath.Join(dir, "serial.log"), "-monitor", "none",
		"-netdev", "tap,id=n0,ifname="+tap+",script=no,downscript=no",
		"-device", "e1000,netdev=n0,mac="+qemuMAC+",romfile="+qemuROM,
		"-boot", "n", "-no-reboot")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := os.Create(filepath.Join(dir, "qemu.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start qemu: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("qemu output:\n%s", b)
		}
	})
}

// httpInNetns serves on addr in ns and sends the path of every request
// to the returned channel (answering 404: the test only checks that the
// firmware came with the boot file it was given).
func httpInNetns(t *testing.T, ns, addr string) <-chan string {
	t.Helper()
	var l net.Listener
	if err := inNetns(ns, func() (err error) { l, err = net.Listen("tcp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	paths := make(chan string, 16)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case paths <- r.URL.Path:
		default:
		}
		http.NotFound(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return paths
}

func waitPath(t *testing.T, paths <-chan string, want string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case p := <-paths:
			if p == want {
				return
			}
			t.Logf("firmware fetched %s", p)
		case <-deadline:
			t.Fatalf("the firmware did not fetch %s within %v", want, within)
		}
	}
}

// ovmf is the UEFI firmware of Debian's ovmf package (the copy QEMU
// ships is used when that is missing).
func ovmf() string {
	for _, p := range []string{"/usr/share/ovmf/OVMF.fd", "/usr/share/qemu/OVMF.fd"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// TestQEMUiPXEAuthoritative boots QEMU's iPXE ROM, under SeaBIOS and
// under OVMF, against the authoritative server: the firmware reports
// its architecture, takes the offer and fetches the boot file (the iPXE
// script URL) it was given.
func TestQEMUiPXEAuthoritative(t *testing.T) {
	bin := requireQEMU(t)
	for _, fw := range []struct {
		name string
		arch Arch
		args []string
	}{
		{"bios", ArchBIOS, nil},
		{"uefi", ArchEFIx64, []string{"-bios", ovmf()}},
	} {
		t.Run(fw.name, func(t *testing.T) {
			if fw.arch.UEFI() && fw.args[1] == "" {
				t.Skip("qemu: no OVMF.fd (Debian package ovmf)")
			}
			p := newVethPair(t)
			bridge, tap := bridgeWithTap(t, p)
			rec := &recorder{}
			srv, err := New(Options{Mode: Authoritative, Interface: bridge, ServerIP: serverIP, Subnet: subnet,
				PoolStart: netip.MustParseAddr("192.0.2.100"), PoolEnd: netip.MustParseAddr("192.0.2.199"), Router: serverIP,
				Decider: DeciderFunc(testDecider), Observer: rec, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			paths := httpInNetns(t, p.serverNS, "192.0.2.1:8080")
			serveInNetns(t, srv, p.serverNS)
			start := time.Now()
			startQEMU(t, bin, p.serverNS, tap, fw.args...)
			defer logStages(t, rec, start)
			waitPath(t, paths, "/boot/"+qemuMAC+"/boot.ipxe", 4*time.Minute)
			t.Logf("iPXE fetched its script %v after QEMU started", time.Since(start).Round(time.Millisecond))
			for _, r := range rec.all() {
				if r.Stage == stage.DHCPDiscover && r.Arch != string(fw.arch) {
					t.Errorf("DISCOVER classified as %q, want %q", r.Arch, fw.arch)
				}
			}
		})
	}
}

// TestQEMUiPXEProxy boots QEMU's iPXE ROM on a network where one server
// hands out addresses only and a proxyDHCP server (another namespace on
// the bridge) gives the boot file: the firmware leases its address from
// the first and fetches the proxy's boot file. (iPXE takes the boot file
// from the proxy's OFFER, whose option 43 carries the PXE options, and
// sends no ProxyDHCPREQUEST to port 4011; TestNetnsProxy covers that
// exchange.)
func TestQEMUiPXEProxy(t *testing.T) {
	bin := requireQEMU(t)
	p := newVethPair(t)
	bridge, tap := bridgeWithTap(t, p)
	ipCmd(t, "-n", p.clientNS, "addr", "add", "192.0.2.2/24", "dev", p.clientIf)
	addrRec := &recorder{}
	addrOnly, err := New(Options{Mode: Authoritative, Interface: bridge, ServerIP: serverIP, Subnet: subnet,
		PoolStart: netip.MustParseAddr("192.0.2.100"), PoolEnd: netip.MustParseAddr("192.0.2.199"),
		Decider:  DeciderFunc(func(context.Context, Client) Decision { return Decision{} }),
		Observer: addrRec, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	proxy, err := New(Options{Mode: Proxy, Interface: p.clientIf, ServerIP: netip.MustParseAddr("192.0.2.2"),
		Decider: DeciderFunc(func(_ context.Context, c Client) Decision {
			if c.MAC != qemuMAC {
				return Decision{Ignore: true}
			}
			return Decision{Node: "node-q", BootFile: "http://192.0.2.2:8080/proxy/" + c.MAC + ".ipxe"}
		}), Observer: rec, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	paths := httpInNetns(t, p.clientNS, "192.0.2.2:8080")
	serveInNetns(t, addrOnly, p.serverNS)
	serveInNetns(t, proxy, p.clientNS)
	start := time.Now()
	startQEMU(t, bin, p.serverNS, tap)
	defer logStages(t, rec, start)
	waitPath(t, paths, "/proxy/"+qemuMAC+".ipxe", 3*time.Minute)
	t.Logf("iPXE fetched the proxy's boot file %v after QEMU started", time.Since(start).Round(time.Millisecond))
	var leased, offered bool
	for _, r := range addrRec.all() {
		leased = leased || r.Stage == stage.DHCPAck && r.Addr == "192.0.2.100"
	}
	for _, r := range rec.all() {
		offered = offered || r.Stage == stage.DHCPOffer && r.Addr == "" && r.File != ""
	}
	if !leased || !offered {
		t.Errorf("address server records %+v, proxy records %+v: want an ACK of 192.0.2.100 and a proxy OFFER with a boot file", addrRec.all(), rec.all())
	}
}

func logStages(t *testing.T, rec *recorder, start time.Time) {
	t.Helper()
	for _, r := range rec.all() {
		t.Logf("%s: %s", r.At.Sub(start).Round(time.Millisecond), r.Phrase())
	}
}
