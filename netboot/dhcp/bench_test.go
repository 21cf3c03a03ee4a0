package dhcp

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

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// benchClients is how many distinct MACs the benchmarks cycle through: a
// rack's worth, within the benchmark pool (192.0.2.10..250).
const benchClients = 200

func benchServer(b *testing.B, mode Mode, iface string) *Server {
	b.Helper()
	s, _, _ := newTestServer(b, mode, func(o *Options) {
		o.Interface = iface
		o.PoolStart, o.PoolEnd = netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.250")
		o.Observer = nil
	})
	return s
}

func benchMAC(i int) string { return fmt.Sprintf("52:54:01:00:%02x:%02x", i>>8&0xff, i&0xff) }

// BenchmarkReply measures Reply alone (and, for "wire", with parsing the
// request and serialising the answer), in answers per second.
func BenchmarkReply(b *testing.B) {
	ctx := context.Background()
	b.Run("discover-offer", func(b *testing.B) {
		s := benchServer(b, Authoritative, "")
		reqs := make([]*dhcpv4.DHCPv4, benchClients)
		for i := range reqs {
			reqs[i] = msg(b, dhcpv4.MessageTypeDiscover, benchMAC(i), pxeEFI())
		}
		runReply(b, func(i int) (*dhcpv4.DHCPv4, error) { return s.Reply(ctx, reqs[i%benchClients]) })
	})
	b.Run("request-ack", func(b *testing.B) {
		s := benchServer(b, Authoritative, "")
		reqs := make([]*dhcpv4.DHCPv4, benchClients)
		for i := range reqs {
			offer, err := s.Reply(ctx, msg(b, dhcpv4.MessageTypeDiscover, benchMAC(i), pxeEFI()))
			if err != nil || offer == nil {
				b.Fatalf("offer: %v", err)
			}
			reqs[i] = msg(b, dhcpv4.MessageTypeRequest, benchMAC(i), pxeEFI(), serverID("192.0.2.1"), requested(offer.YourIPAddr.String()))
		}
		runReply(b, func(i int) (*dhcpv4.DHCPv4, error) { return s.Reply(ctx, reqs[i%benchClients]) })
	})
	b.Run("proxy-discover-offer", func(b *testing.B) {
		s := benchServer(b, Proxy, "")
		reqs := make([]*dhcpv4.DHCPv4, benchClients)
		for i := range reqs {
			reqs[i] = msg(b, dhcpv4.MessageTypeDiscover, benchMAC(i), pxeEFI())
		}
		runReply(b, func(i int) (*dhcpv4.DHCPv4, error) { return s.Reply(ctx, reqs[i%benchClients]) })
	})
	b.Run("discover-offer-wire", func(b *testing.B) {
		s := benchServer(b, Authoritative, "")
		pkts := make([][]byte, benchClients)
		for i := range pkts {
			pkts[i] = msg(b, dhcpv4.MessageTypeDiscover, benchMAC(i), pxeEFI()).ToBytes()
		}
		runReply(b, func(i int) (*dhcpv4.DHCPv4, error) {
			req, err := dhcpv4.FromBytes(pkts[i%benchClients])
			if err != nil {
				return nil, err
			}
			rep, err := s.Reply(ctx, req)
			if rep != nil {
				_ = rep.ToBytes()
			}
			return rep, err
		})
	})
}

func runReply(b *testing.B, f func(i int) (*dhcpv4.DHCPv4, error)) {
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

// BenchmarkServeConnLoopback fires DISCOVERs from benchClients MACs at
// ServeConn over UDP on 127.0.0.1 and counts OFFERs per second.
func BenchmarkServeConnLoopback(b *testing.B) {
	s := benchServer(b, Authoritative, "")
	sc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeConn(ctx, sc) }()
	defer func() { cancel(); <-done }()
	cc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	fire(b, cc, sc.LocalAddr().(*net.UDPAddr), discovers(b, nil))
}

// BenchmarkVethRelay fires relayed DISCOVERs (giaddr 192.0.2.2, the
// client namespace's address) across a veth at Anvil's Serve and at
// dnsmasq in the same run, with the same client: both answer the relay
// by unicast, so the client needs no raw socket.
func BenchmarkVethRelay(b *testing.B) {
	reqs := discovers(b, func(d *dhcpv4.DHCPv4) { d.GatewayIPAddr = net.ParseIP("192.0.2.2").To4() })
	dst := &net.UDPAddr{IP: net.ParseIP("192.0.2.1"), Port: ServerPort}
	b.Run("anvil", func(b *testing.B) {
		p := newVethPair(b)
		ipCmd(b, "-n", p.clientNS, "addr", "add", "192.0.2.2/24", "dev", p.clientIf)
		serveInNetns(b, benchServer(b, Authoritative, p.serverIf), p.serverNS)
		fire(b, udpInNetns(b, p.clientNS, "192.0.2.2:67"), dst, reqs)
	})
	b.Run("dnsmasq", func(b *testing.B) {
		bin, err := exec.LookPath("dnsmasq")
		if err != nil {
			b.Skip("dnsmasq: not installed (Debian package dnsmasq-base)")
		}
		p := newVethPair(b)
		ipCmd(b, "-n", p.clientNS, "addr", "add", "192.0.2.2/24", "dev", p.clientIf)
		startDnsmasq(b, bin, p)
		fire(b, udpInNetns(b, p.clientNS, "192.0.2.2:67"), dst, reqs)
	})
}

// startDnsmasq runs dnsmasq as a DHCP server only (no DNS, no ping
// check, no per-packet logging) in the server namespace, and stops it by
// its PID when the benchmark ends.
func startDnsmasq(b *testing.B, bin string, p vethPair) {
	dir := b.TempDir()
	cmd := exec.Command("ip", "netns", "exec", p.serverNS, bin, "--no-daemon", "--port=0",
		"--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--user=root", "--group=root",
		"--interface="+p.serverIf, "--dhcp-range=192.0.2.10,192.0.2.250,255.255.255.0,1h",
		"--dhcp-leasefile="+filepath.Join(dir, "leases"), "--pid-file="+filepath.Join(dir, "pid"),
		"--no-ping", "--quiet-dhcp", "--dhcp-authoritative", "--dhcp-boot=snponly.efi,,192.0.2.1")
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
	time.Sleep(300 * time.Millisecond) // dnsmasq binds port 67
}

func discovers(b *testing.B, mod dhcpv4.Modifier) [][]byte {
	pkts := make([][]byte, benchClients)
	for i := range pkts {
		mods := []dhcpv4.Modifier{pxeEFI(), dhcpv4.WithTransactionID(dhcpv4.TransactionID{0xbe, 0xec, byte(i >> 8), byte(i)})}
		if mod != nil {
			mods = append(mods, mod)
		}
		pkts[i] = msg(b, dhcpv4.MessageTypeDiscover, benchMAC(i), mods...).ToBytes()
	}
	return pkts
}

// fire keeps a window of DISCOVERs in flight on conn until b.N OFFERs
// came back, refilling the window when answers stop (a lost packet), and
// reports OFFERs per second.
func fire(b *testing.B, conn *net.UDPConn, dst *net.UDPAddr, reqs [][]byte) {
	b.Helper()
	const window = 32
	buf := make([]byte, 1500)
	sent, answers, refills := 0, 0, 0
	send := func(n int) {
		for ; n > 0; n-- {
			if _, err := conn.WriteTo(reqs[sent%len(reqs)], dst); err != nil {
				b.Fatalf("send: %v", err)
			}
			sent++
		}
	}
	// Warm up: one answer proves the server is there.
	deadline := time.Now().Add(10 * time.Second)
	for answers == 0 {
		if time.Now().After(deadline) {
			b.Fatalf("no answer from %v in 10s", dst)
		}
		send(1)
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, _, err := conn.ReadFrom(buf); err == nil && n > 240 && buf[0] == 2 {
			answers++
		}
	}
	// Drain stragglers of the warm-up.
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
		case n > 240 && buf[0] == 2:
			answers++
			send(1)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(answers)/el.Seconds(), "answers/s")
	b.ReportMetric(float64(refills), "refills")
}
