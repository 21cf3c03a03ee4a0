package dhcp6

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/server6"
	"golang.org/x/net/ipv6"
	"golang.org/x/sync/errgroup"
)

// decideTimeout bounds one request's handling (the Decider's time).
const decideTimeout = 2 * time.Second

// Listen opens the server sockets of a DHCPv6 server on iface: UDP
// ServerPort bound to the interface (SO_BINDTODEVICE), joined to
// All_DHCP_Relay_Agents_and_Servers (ff02::1:2) there, and in Proxy mode
// PXEPort too. It is the one place DHCPv6 sockets are opened: Serve and
// netboot.Server.Listen both call it. On error nothing stays open.
func Listen(iface string, mode Mode) (_ []net.PacketConn, err error) {
	if iface == "" {
		return nil, &ConfigError{Field: "Interface", Problem: "is empty; the server binds to an interface"}
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("dhcp6: interface %s: %w", iface, err)
	}
	var conns []net.PacketConn
	defer func() {
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
		}
	}()
	ports := []int{ServerPort}
	if mode == Proxy {
		ports = append(ports, PXEPort)
	}
	for _, p := range ports {
		c, err := server6.NewIPv6UDPConn(iface, &net.UDPAddr{IP: net.IPv6unspecified, Port: p})
		if err != nil {
			return nil, fmt.Errorf("dhcp6: listen on %s port %d: %w", iface, p, err)
		}
		conns = append(conns, c)
		if p == ServerPort {
			if err := ipv6.NewPacketConn(c).JoinGroup(ifi, &net.UDPAddr{IP: dhcpv6.AllDHCPRelayAgentsAndServers}); err != nil {
				return nil, fmt.Errorf("dhcp6: join %s on %s: %w", dhcpv6.AllDHCPRelayAgentsAndServers, iface, err)
			}
		}
	}
	return conns, nil
}

// Serve opens the sockets (Listen) on Options.Interface and answers
// requests until ctx ends; then it closes them, waits for its goroutines
// and returns nil. It returns an error when a socket cannot be opened or
// fails.
func (s *Server) Serve(ctx context.Context) error {
	conns, err := Listen(s.opts.Interface, s.opts.Mode)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	s.log.Info("dhcp6: serving", "interface", s.opts.Interface, "mode", s.opts.Mode, "duid", s.serverID)
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range conns {
		g.Go(func() error { return s.ServeConn(gctx, c) })
	}
	err = g.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// ServeConn answers the requests that arrive on conn until ctx ends,
// with Options.Workers goroutines reading it; then it returns nil (conn
// stays open: it is the caller's). It returns the error of a failed
// read. Each packet is parsed, unwrapped from its relay headers (Unwrap),
// answered (Reply) and wrapped again (Wrap): a direct client's answer
// goes back to its source address (link-local ones with their zone, out
// of the interface they came in on), a relayed one's to the relay's
// ServerPort.
func (s *Server) ServeConn(ctx context.Context, conn net.PacketConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range s.opts.Workers {
		wg.Go(func() {
			if err := s.serveLoop(ctx, conn); err != nil {
				once.Do(func() { first = err })
				cancel()
			}
		})
	}
	wg.Wait()
	return first
}

func (s *Server) serveLoop(ctx context.Context, conn net.PacketConn) error {
	// One byte more than the limit tells an oversized packet apart.
	buf := make([]byte, s.opts.MaxPacketSize+1)
	for {
		n, peer, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("dhcp6: read %v: %w", conn.LocalAddr(), err)
		}
		if n > s.opts.MaxPacketSize {
			s.metrics.ignore(ignoreTooBig)
			continue
		}
		s.handle(ctx, conn, buf[:n], peer)
	}
}

// handle answers one packet. A Decider that panics costs its request,
// not the server.
func (s *Server) handle(ctx context.Context, conn net.PacketConn, pkt []byte, peer net.Addr) {
	defer func() {
		if r := recover(); r != nil {
			s.metrics.ignore(ignoreError)
			s.log.Error("dhcp6: request handler panicked", "peer", peer, "panic", r)
		}
	}()
	ua, ok := peer.(*net.UDPAddr)
	if !ok {
		return
	}
	from, _ := netip.AddrFromSlice(ua.IP)
	if ua.Zone != "" {
		from = from.WithZone(ua.Zone)
	}
	in, err := dhcpv6.FromBytes(pkt)
	if err != nil {
		s.metrics.ignore(ignoreMalformed)
		s.log.Debug("dhcp6: malformed packet", "peer", peer, "err", err)
		return
	}
	req, src, err := Unwrap(in, from)
	if err != nil {
		s.metrics.ignore(ignoreMalformed)
		s.log.Debug("dhcp6: not a request", "peer", peer, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, decideTimeout)
	defer cancel()
	rep, err := s.Reply(ctx, req, src)
	if err != nil {
		s.log.Warn("dhcp6: cannot answer", "peer", peer, "type", typeLabel(req.MessageType), "err", err)
		return
	}
	if rep == nil {
		return
	}
	out, err := Wrap(in, rep)
	if err != nil {
		s.log.Warn("dhcp6: cannot wrap the answer for the relay", "peer", peer, "err", err)
		return
	}
	dst := &net.UDPAddr{IP: ua.IP, Port: ua.Port, Zone: ua.Zone}
	if src.Relayed() {
		dst.Port = ServerPort
	}
	if _, err := conn.WriteTo(out.ToBytes(), dst); err != nil && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
		s.log.Warn("dhcp6: send answer", "peer", peer, "err", err)
	}
}

// Leases lists the addresses advertised or leased and not expired, by
// address (none in Proxy mode).
func (s *Server) Leases() []Lease {
	if s.leases == nil {
		return nil
	}
	return s.leases.snapshot(s.opts.Clock.Now())
}
