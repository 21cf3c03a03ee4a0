package dhcp6

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// benchClients is how many distinct machines the benchmarks cycle
// through: a rack's worth, within the benchmark pool (fd00:a6::10..ff).
const benchClients = 200

func benchMAC(i int) string { return fmt.Sprintf("52:54:01:00:%02x:%02x", i>>8&0xff, i&0xff) }

func benchServer(b *testing.B, iface string) *Server {
	b.Helper()
	s, _, _ := newTestServer(b, Stateful, func(o *Options) {
		o.Interface = iface
		o.PoolStart, o.PoolEnd = netip.MustParseAddr("fd00:a6::10"), netip.MustParseAddr("fd00:a6::ff")
		o.Observer = nil
		o.Clock = nil
	})
	return s
}

// BenchmarkReply measures Reply alone (and, for "wire", with parsing,
// unwrapping, wrapping and serialising), in answers per second.
func BenchmarkReply(b *testing.B) {
	ctx := context.Background()
	b.Run("solicit-advertise", func(b *testing.B) {
		s := benchServer(b, "")
		reqs := make([]*dhcpv6.Message, benchClients)
		for i := range reqs {
			reqs[i] = msg(b, dhcpv6.MessageTypeSolicit, duidLL(b, benchMAC(i)), pxeEFI())
		}
		src := Source{Peer: netip.MustParseAddr("fd00:a6::2")}
		runReply(b, func(i int) (*dhcpv6.Message, error) { return s.Reply(ctx, reqs[i%benchClients], src) })
	})
	b.Run("request-reply", func(b *testing.B) {
		s := benchServer(b, "")
		src := Source{Peer: netip.MustParseAddr("fd00:a6::2")}
		reqs := make([]*dhcpv6.Message, benchClients)
		for i := range reqs {
			if _, err := s.Reply(ctx, msg(b, dhcpv6.MessageTypeSolicit, duidLL(b, benchMAC(i)), pxeEFI()), src); err != nil {
				b.Fatal(err)
			}
			reqs[i] = msg(b, dhcpv6.MessageTypeRequest, duidLL(b, benchMAC(i)), pxeEFI(), withServerID(serverDUID))
		}
		runReply(b, func(i int) (*dhcpv6.Message, error) { return s.Reply(ctx, reqs[i%benchClients], src) })
	})
	b.Run("relayed-solicit-wire", func(b *testing.B) {
		s := benchServer(b, "")
		pkts := relayedSolicits(b)
		from := netip.MustParseAddr("fd00:a6::2")
		runReply(b, func(i int) (*dhcpv6.Message, error) {
			in, err := dhcpv6.FromBytes(pkts[i%benchClients])
			if err != nil {
				return nil, err
			}
			req, src, err := Unwrap(in, from)
			if err != nil {
				return nil, err
			}
			rep, err := s.Reply(ctx, req, src)
			if rep != nil {
				out, err := Wrap(in, rep)
				if err != nil {
					return nil, err
				}
				_ = out.ToBytes()
			}
			return rep, err
		})
	})
}

func runReply(b *testing.B, f func(i int) (*dhcpv6.Message, error)) {
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		rep, err := f(i)
		if err != nil || rep == nil {
			b.Fatalf("request %d: answer %v, err %v", i, rep, err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "answers/s")
}

// relayedSolicits are Solicits of benchClients machines (DUID-LL, UEFI
// PXE asking for the boot file URL), each in a Relay-Forward from
// fd00:a6::2 (the client namespace's address) on link fd00:a6::2: both
// Anvil and dnsmasq answer a relay by unicast to its port 547, so the
// client needs no multicast or raw socket.
func relayedSolicits(b *testing.B) [][]byte {
	pkts := make([][]byte, benchClients)
	for i := range pkts {
		m := msg(b, dhcpv6.MessageTypeSolicit, duidLL(b, benchMAC(i)), pxeEFI())
		m.TransactionID = dhcpv6.TransactionID{0xbe, byte(i >> 8), byte(i)}
		r, err := dhcpv6.EncapsulateRelay(m, dhcpv6.MessageTypeRelayForward, net.ParseIP("fd00:a6::2"), net.ParseIP("fe80::5054:1ff:fe00:1"))
		if err != nil {
			b.Fatal(err)
		}
		pkts[i] = r.ToBytes()
	}
	return pkts
}

// BenchmarkVethRelay fires relayed Solicits across a veth at Anvil's
// Serve and at dnsmasq's DHCPv6 in the same run, with the same client,
// and counts Relay-Replies carrying an Advertise per second.
func BenchmarkVethRelay(b *testing.B) {
	reqs := relayedSolicits(b)
	dst := &net.UDPAddr{IP: net.ParseIP("fd00:a6::1"), Port: ServerPort}
	b.Run("anvil", func(b *testing.B) {
		p := newVethPair(b)
		serveInNetns(b, benchServer(b, p.serverIf), p.serverNS)
		fire(b, udpInNetns(b, p.clientNS, "[fd00:a6::2]:547"), dst, reqs)
	})
	b.Run("dnsmasq", func(b *testing.B) {
		bin, err := exec.LookPath("dnsmasq")
		if err != nil {
			b.Skip("dnsmasq: not installed (Debian package dnsmasq-base)")
		}
		p := newVethPair(b)
		startDnsmasq(b, bin, p)
		fire(b, udpInNetns(b, p.clientNS, "[fd00:a6::2]:547"), dst, reqs)
	})
}

// startDnsmasq runs dnsmasq as a DHCPv6 server only (no DNS, no router
// advertisements, no per-packet logging), handing out the benchmark
// pool and a boot file URL as Anvil does, in the server namespace, and
// stops it by its PID when the benchmark ends.
func startDnsmasq(b *testing.B, bin string, p vethPair) {
	dir := b.TempDir()
	cmd := exec.Command("ip", "netns", "exec", p.serverNS, bin, "--no-daemon", "--port=0",
		"--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--user=root", "--group=root",
		"--interface="+p.serverIf, "--dhcp-range=fd00:a6::10,fd00:a6::ff,64,1h",
		"--dhcp-leasefile="+filepath.Join(dir, "leases"), "--pid-file="+filepath.Join(dir, "pid"),
		"--quiet-dhcp6", "--dhcp-authoritative",
		"--dhcp-option=option6:bootfile-url,tftp://[fd00:a6::1]/snponly.efi")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// Its own process group, so that stopping it never touches ours.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start dnsmasq: %v", err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		wait := make(chan error, 1)
		go func() { wait <- cmd.Wait() }()
		select {
		case <-wait:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-wait
		}
	})
}

// fire keeps a window of Solicits in flight on conn until b.N answers
// came back, refilling the window when answers stop (a lost packet), and
// reports answers per second.
func fire(b *testing.B, conn *net.UDPConn, dst *net.UDPAddr, reqs [][]byte) {
	b.Helper()
	const window = 32
	buf := make([]byte, 2048)
	sent, answers, refills := 0, 0, 0
	send := func(n int) {
		for ; n > 0; n-- {
			if _, err := conn.WriteTo(reqs[sent%len(reqs)], dst); err != nil {
				b.Fatalf("send: %v", err)
			}
			sent++
		}
	}
	isAnswer := func(n int) bool {
		if n < 34 || dhcpv6.MessageType(buf[0]) != dhcpv6.MessageTypeRelayReply {
			return false
		}
		m, err := dhcpv6.FromBytes(buf[:n])
		if err != nil {
			return false
		}
		in, err := m.GetInnerMessage()
		return err == nil && in.MessageType == dhcpv6.MessageTypeAdvertise
	}
	// Warm up: one answer proves the server is there.
	deadline := time.Now().Add(15 * time.Second)
	for answers == 0 {
		if time.Now().After(deadline) {
			b.Fatalf("no answer from %v in 15s", dst)
		}
		send(1)
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, _, err := conn.ReadFrom(buf); err == nil && isAnswer(n) {
			answers++
		}
	}
	for {
		_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, _, err := conn.ReadFrom(buf); err != nil {
			break
		}
	}
	b.ResetTimer()
	start := time.Now()
	answers = 0
	send(window)
	for answers < b.N {
		_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, _, err := conn.ReadFrom(buf)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			refills++
			send(window)
		case err != nil:
			b.Fatalf("read: %v", err)
		case isAnswer(n):
			answers++
			send(1)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(answers)/el.Seconds(), "answers/s")
	b.ReportMetric(float64(refills), "refills")
}
