package dhcp

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"golang.org/x/sync/errgroup"
)

// decideTimeout bounds one request's handling (the Decider's time).
const decideTimeout = 2 * time.Second

// Serve binds UDP port 67 (and, in Proxy mode, the PXE port 4011) on
// Options.Interface and answers requests until ctx ends; then it closes
// its sockets, waits for its goroutines and returns nil. It returns an
// error when a socket cannot be bound or fails.
func (s *Server) Serve(ctx context.Context) error {
	if s.opts.Interface == "" {
		return &ConfigError{Field: "Interface", Problem: "is empty; Serve binds to an interface"}
	}
	ports := []int{ServerPort}
	if s.opts.Mode == Proxy {
		ports = append(ports, PXEPort)
	}
	var conns []net.PacketConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, p := range ports {
		c, err := server4.NewIPv4UDPConn(s.opts.Interface, &net.UDPAddr{Port: p})
		if err != nil {
			return fmt.Errorf("dhcp: listen on %s port %d: %w", s.opts.Interface, p, err)
		}
		conns = append(conns, c)
	}
	s.log.Info("dhcp: serving", "interface", s.opts.Interface, "mode", s.opts.Mode, "server", s.opts.ServerIP, "ports", ports)
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range conns {
		g.Go(func() error { return s.ServeConn(gctx, c) })
	}
	err := g.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// ServeConn answers the requests that arrive on conn until ctx ends, with
// Options.Workers goroutines reading it; then it returns nil (conn stays
// open: it is the caller's). A request to port 4011 (conn's local port)
// is a PXE port request. It returns the error of a failed read.
func (s *Server) ServeConn(ctx context.Context, conn net.PacketConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pxe := false
	if ua, ok := conn.LocalAddr().(*net.UDPAddr); ok && ua.Port == PXEPort {
		pxe = true
	}
	// Ending ctx unblocks every ReadFrom at once.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()

	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range s.opts.Workers {
		wg.Go(func() {
			if err := s.serveLoop(ctx, conn, pxe); err != nil {
				once.Do(func() { first = err })
				cancel()
			}
		})
	}
	wg.Wait()
	return first
}

func (s *Server) serveLoop(ctx context.Context, conn net.PacketConn, pxe bool) error {
	// One byte more than the limit tells an oversized packet apart.
	buf := make([]byte, s.opts.MaxPacketSize+1)
	for {
		n, peer, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("dhcp: read %v: %w", conn.LocalAddr(), err)
		}
		if n > s.opts.MaxPacketSize {
			s.metrics.ignore(ignoreTooBig)
			continue
		}
		s.handle(ctx, conn, buf[:n], peer, pxe)
	}
}

// handle answers one packet. A Decider that panics costs its request,
// not the server.
func (s *Server) handle(ctx context.Context, conn net.PacketConn, pkt []byte, peer net.Addr, pxe bool) {
	defer func() {
		if r := recover(); r != nil {
			s.metrics.ignore(ignoreError)
			s.log.Error("dhcp: request handler panicked", "peer", peer, "panic", r)
		}
	}()
	req, err := dhcpv4.FromBytes(pkt)
	if err != nil {
		s.metrics.ignore(ignoreMalformed)
		s.log.Debug("dhcp: malformed packet", "peer", peer, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, decideTimeout)
	defer cancel()
	if pxe {
		ctx = OnPXEPort(ctx)
	}
	rep, err := s.Reply(ctx, req)
	if err != nil {
		s.log.Warn("dhcp: cannot answer", "peer", peer, "mac", macString(req), "type", typeLabel(req.MessageType()), "err", err)
		return
	}
	if rep == nil {
		return
	}
	if _, err := conn.WriteTo(rep.ToBytes(), destination(req, peer)); err != nil && ctx.Err() == nil {
		s.log.Warn("dhcp: send answer", "peer", peer, "mac", macString(req), "err", err)
	}
}

// destination is where an answer goes (RFC 2131 section 4.1): to the
// relay agent's server port; else back to the sender when it has an
// address (a client that has one: RENEWING, INFORM, the PXE port); else
// broadcast to the client port, on the interface the socket is bound to.
func destination(req *dhcpv4.DHCPv4, peer net.Addr) net.Addr {
	if !isZero(req.GatewayIPAddr) {
		return &net.UDPAddr{IP: ip4(req.GatewayIPAddr), Port: ServerPort}
	}
	if ua, ok := peer.(*net.UDPAddr); ok && !isZero(ua.IP) && ua.Port != 0 {
		return ua
	}
	return &net.UDPAddr{IP: net.IPv4bcast, Port: ClientPort}
}

// Leases lists the addresses offered or leased and not expired, by
// address (none in Proxy mode).
func (s *Server) Leases() []Lease {
	if s.leases == nil {
		return nil
	}
	return s.leases.snapshot(s.opts.Clock.Now())
}
