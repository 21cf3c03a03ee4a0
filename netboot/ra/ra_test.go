package ra

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	"golang.org/x/sys/unix"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestAdvertisementGolden is the advertisement of each configuration,
// marshalled, parsed back and decoded as text: testdata/<name>.golden.
func TestAdvertisementGolden(t *testing.T) {
	mac := net.HardwareAddr{0x02, 0, 0xc0, 0, 2, 1}
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"managed", Options{Prefix: netip.MustParsePrefix("fd00:a6::/64"), Managed: true}},
		{"managed-other-dns", Options{Prefix: netip.MustParsePrefix("fd00:a6::/64"), Managed: true, Other: true,
			DNS: []netip.Addr{netip.MustParseAddr("fd00:a6::53")}}},
		{"slaac-router", Options{Prefix: netip.MustParsePrefix("fd00:a6::/64"), SLAAC: true, Other: true,
			RouterLifetime: 30 * time.Minute, MTU: 1500}},
		{"nothing", Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Interface = "prov0"
			a, err := New(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			b, err := ndp.MarshalMessage(Advertisement(a.o, mac))
			if err != nil {
				t.Fatal(err)
			}
			m, err := ndp.ParseMessage(b)
			if err != nil {
				t.Fatal(err)
			}
			got := describe(m.(*ndp.RouterAdvertisement), b)
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs (-update rewrites it)\n--- got\n%s--- want\n%s", path, got, want)
			}
		})
	}
}

func describe(m *ndp.RouterAdvertisement, wire []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "router advertisement, %d bytes\n", len(wire))
	fmt.Fprintf(&b, "hop limit %d, managed %v, other %v, router lifetime %v\n", m.CurrentHopLimit, m.ManagedConfiguration, m.OtherConfiguration, m.RouterLifetime)
	for _, o := range m.Options {
		switch o := o.(type) {
		case *ndp.PrefixInformation:
			fmt.Fprintf(&b, "prefix %s/%d on-link %v autonomous %v valid %v preferred %v\n", o.Prefix, o.PrefixLength, o.OnLink, o.AutonomousAddressConfiguration, o.ValidLifetime, o.PreferredLifetime)
		case *ndp.RecursiveDNSServer:
			fmt.Fprintf(&b, "dns %v lifetime %v\n", o.Servers, o.Lifetime)
		case *ndp.MTU:
			fmt.Fprintf(&b, "mtu %d\n", o.MTU)
		case *ndp.LinkLayerAddress:
			fmt.Fprintf(&b, "source link-layer address %s\n", o.Addr)
		default:
			fmt.Fprintf(&b, "option %d\n", o.Code())
		}
	}
	return b.String()
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		field string
		o     Options
	}{
		{"Interface", Options{}},
		{"Prefix", Options{Interface: "x", Prefix: netip.MustParsePrefix("fe80::/64")}},
		{"Prefix", Options{Interface: "x", Prefix: netip.MustParsePrefix("192.0.2.0/24")}},
		{"SLAAC", Options{Interface: "x", Prefix: netip.MustParsePrefix("fd00::/56"), SLAAC: true}},
		{"RouterLifetime", Options{Interface: "x", RouterLifetime: 3 * time.Hour}},
		{"DNS[0]", Options{Interface: "x", DNS: []netip.Addr{netip.MustParseAddr("192.0.2.53")}}},
		{"MTU", Options{Interface: "x", MTU: 576}},
		{"Interval", Options{Interface: "x", Interval: time.Millisecond}},
	} {
		_, err := New(tc.o)
		ce, ok := err.(*ConfigError)
		if !ok || ce.Field != tc.field {
			t.Errorf("New(%+v) = %v, want a ConfigError on %s", tc.o, err, tc.field)
		}
	}
}

// netnsEnv, set to 1, turns the namespace test's skip into a failure.
const netnsEnv = "ANVIL_TEST_NETNS"

// TestNetnsSLAAC advertises a /64 with SLAAC over a veth between two
// namespaces the test creates: the client's kernel forms its EUI-64
// address in the prefix, and installs the on-link route.
func TestNetnsSLAAC(t *testing.T) {
	why := ""
	if os.Geteuid() != 0 {
		why = "network namespaces need root"
	} else if _, err := exec.LookPath("ip"); err != nil {
		why = "no ip command (iproute2)"
	}
	if why != "" {
		if os.Getenv(netnsEnv) == "1" {
			t.Fatalf("%s=1 but %s", netnsEnv, why)
		}
		t.Skipf("netns: %s (set %s=1 to fail instead)", why, netnsEnv)
	}
	rnd := make([]byte, 4)
	_, _ = rand.Read(rnd)
	id := hex.EncodeToString(rnd)
	srvNS, cliNS := "anvil-ra-"+id+"-s", "anvil-ra-"+id+"-c"
	ip := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, ns := range []string{srvNS, cliNS} {
		ip("netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	}
	ip("-n", srvNS, "link", "add", "ras", "address", "02:00:00:00:aa:01", "type", "veth", "peer", "name", "rac", "netns", cliNS)
	ip("-n", cliNS, "link", "set", "rac", "address", "52:54:00:00:00:0a")
	// The client's kernel must accept advertisements (it does unless it
	// forwards) and form EUI-64 addresses.
	for _, kv := range []string{"net.ipv6.conf.rac.accept_ra=1", "net.ipv6.conf.rac.addr_gen_mode=0", "net.ipv6.conf.rac.accept_dad=0"} {
		if out, err := exec.Command("ip", "netns", "exec", cliNS, "sysctl", "-q", "-w", kv).CombinedOutput(); err != nil {
			t.Fatalf("sysctl %s: %v: %s", kv, err, out)
		}
	}
	ip("-n", srvNS, "link", "set", "ras", "up")
	ip("-n", cliNS, "link", "set", "rac", "up")
	a, err := New(Options{Interface: "ras", Prefix: netip.MustParsePrefix("fd00:a6::/64"), SLAAC: true, Managed: true, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var conn *Conn
	if err := inNetns(srvNS, func() (err error) { conn, err = a.Listen(); return err }); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, conn) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	want := "fd00:a6::5054:ff:fe00:a/64"
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := ip("-n", cliNS, "-6", "addr", "show", "dev", "rac")
		if strings.Contains(out, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no SLAAC address %s on the client after 20 s:\n%s", want, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out := ip("-n", cliNS, "-6", "route", "show", "fd00:a6::/64"); !strings.Contains(out, "fd00:a6::/64 dev rac") {
		t.Errorf("no on-link route for the prefix: %q", out)
	}
}

// inNetns runs fn on an OS thread in namespace ns; sockets it opens stay
// there. The thread is never unlocked: it ends with its goroutine.
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}
