package dhcp6

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// netnsEnv, set to 1, turns the skip of the namespace tests (not root,
// no `ip`) into a failure, for CI where they must run.
const netnsEnv = "ANVIL_TEST_NETNS"

// vethPair is two network namespaces joined by a veth: the server side
// (fd00:a6::1/64 on serverIf) and the client side (fd00:a6::2/64 on
// clientIf), addresses usable at once (no duplicate address detection).
type vethPair struct {
	serverNS, clientNS string
	serverIf, clientIf string
}

func requireNetns(t testing.TB) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "network namespaces need root"
	} else if _, err := exec.LookPath("ip"); err != nil {
		why = "no ip command (iproute2)"
	}
	if why == "" {
		return
	}
	if os.Getenv(netnsEnv) == "1" {
		t.Fatalf("%s=1 but %s", netnsEnv, why)
	}
	t.Skipf("netns: %s (set %s=1 to fail instead)", why, netnsEnv)
}

func ipCmd(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func newVethPair(t testing.TB) vethPair {
	t.Helper()
	requireNetns(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	p := vethPair{serverNS: "anvil-dhcp6-" + id + "-s", clientNS: "anvil-dhcp6-" + id + "-c", serverIf: "dhcp6s", clientIf: "dhcp6c"}
	for _, ns := range []string{p.serverNS, p.clientNS} {
		ipCmd(t, "netns", "add", ns)
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Errorf("ip netns del %s: %v: %s", ns, err, out)
			}
		})
		ipCmd(t, "-n", ns, "link", "set", "lo", "up")
	}
	ipCmd(t, "-n", p.serverNS, "link", "add", p.serverIf, "type", "veth", "peer", "name", p.clientIf, "netns", p.clientNS)
	ipCmd(t, "-n", p.serverNS, "addr", "add", "fd00:a6::1/64", "dev", p.serverIf, "nodad")
	ipCmd(t, "-n", p.clientNS, "addr", "add", "fd00:a6::2/64", "dev", p.clientIf, "nodad")
	ipCmd(t, "-n", p.serverNS, "link", "set", p.serverIf, "up")
	ipCmd(t, "-n", p.clientNS, "link", "set", p.clientIf, "up")
	return p
}

// inNetns runs fn on an OS thread switched into namespace ns; sockets it
// opens stay in ns. The thread is never unlocked: it ends with its
// goroutine.
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
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// serveInNetns runs srv.Serve in ns until the test ends.
func serveInNetns(t testing.TB, srv *Server, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inNetns(ns, func() error { return srv.Serve(ctx) }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return within 10s of its context ending")
		}
	})
}

// udpInNetns opens a UDP socket on addr in ns.
func udpInNetns(t testing.TB, ns, addr string) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := inNetns(ns, func() error {
		a, err := net.ResolveUDPAddr("udp6", addr)
		if err != nil {
			return err
		}
		c, err = net.ListenUDP("udp6", a)
		return err
	}); err != nil {
		t.Fatalf("listen %s in %s: %v", addr, ns, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
