package netboot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"golang.org/x/sync/errgroup"

	"github.com/anvilmetal/anvil/netboot/dhcp"
	"github.com/anvilmetal/anvil/netboot/dhcp6"
	"github.com/anvilmetal/anvil/netboot/ra"
	"github.com/anvilmetal/anvil/netboot/tftp"
)

// ListenOptions say which of the boot server's three services to run and
// where. A service left out does not run: an embedder may serve Handler
// on its own HTTP server, or run its own dnsmasq (Options.Dnsmasq) and no
// DHCP.
type ListenOptions struct {
	// DHCP, when set, runs Anvil's DHCP server with these options on
	// DHCP.Interface (UDP 67, and 4011 in proxy mode). Its Decider and
	// Observer are the Server: leave them nil.
	DHCP *dhcp.Options
	// DHCP6, when set, runs Anvil's DHCPv6 server (package dhcp6) with
	// these options on DHCP6.Interface (UDP 547, and 4011 in proxy mode):
	// Stateful with Options.DHCPMode authoritative, Proxy with proxy. Its
	// Decider and Observer are the Server: leave them nil.
	DHCP6 *dhcp6.Options
	// RA, when set, sends router advertisements (package ra) on
	// RA.Interface: the managed flag for a DHCPv6 network.
	RA *ra.Options
	// TFTPAddr is the TFTP listen address, an interface's IP and port
	// ("192.0.2.1:69"): transfers answer from the listener's address, so
	// do not bind 0.0.0.0. Empty runs no TFTP.
	TFTPAddr string
	// TFTP tunes the TFTP server (MaxTransfers, Timeout, Retries,
	// MaxBlockSize, MaxWindowSize, Logger); its Handler and OnTransfer
	// are the Server's, so they must be nil. Nil takes the tftp
	// package's defaults.
	TFTP *tftp.Server
	// HTTPAddr is the HTTP listen address ("192.0.2.1:8080") for Handler;
	// empty runs no HTTP.
	HTTPAddr string
}

// Listeners are the boot server's open sockets, between Listen and Serve.
type Listeners struct {
	s      *Server
	dhcp   *dhcp.Server
	dconns []net.PacketConn
	dhcp6  *dhcp6.Server
	d6conn []net.PacketConn
	ra     *ra.Advertiser
	raconn *ra.Conn
	tftp   *tftp.Server
	tconn  net.PacketConn
	hln    net.Listener
}

// Listen opens every listening socket o asks for, on the calling
// goroutine, and returns them ready for Serve. On error nothing stays
// open. A process inside a network namespace needs nothing more. A caller
// that moved only its own thread into a namespace (a test lab) gets the
// listeners there, but TFTP opens one socket per transfer later, from
// the transfer's goroutine: set TFTP.ListenTransfer to open those in the
// namespace too.
func (s *Server) Listen(o ListenOptions) (_ *Listeners, err error) {
	l := &Listeners{s: s}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	if o.DHCP != nil {
		if o.DHCP.Decider != nil || o.DHCP.Observer != nil {
			return nil, &ListenOptionsError{Field: "DHCP", Reason: "Decider and Observer must be nil: the boot server is both"}
		}
		if o.DHCP.Mode != s.opts.DHCPMode && !(o.DHCP.Mode == dhcp.Authoritative && s.opts.DHCPMode == "") {
			return nil, &ListenOptionsError{Field: "DHCP.Mode", Reason: fmt.Sprintf("is %q but Options.DHCPMode is %q; they must agree", o.DHCP.Mode, s.opts.DHCPMode)}
		}
		do := *o.DHCP
		do.Decider, do.Observer = s, s
		if do.Logger == nil {
			do.Logger = s.log
		}
		if do.Clock == nil {
			do.Clock = s.clock
		}
		if do.Interface == "" {
			return nil, &ListenOptionsError{Field: "DHCP.Interface", Reason: "is empty; the DHCP server binds to an interface"}
		}
		d, err := dhcp.New(do)
		if err != nil {
			return nil, err
		}
		l.dhcp = d
		ports := []int{dhcp.ServerPort}
		if do.Mode == dhcp.Proxy {
			ports = append(ports, dhcp.PXEPort)
		}
		for _, p := range ports {
			c, err := server4.NewIPv4UDPConn(do.Interface, &net.UDPAddr{Port: p})
			if err != nil {
				return nil, fmt.Errorf("netboot: DHCP on %s port %d: %w", do.Interface, p, err)
			}
			l.dconns = append(l.dconns, c)
		}
	}
	if o.DHCP6 != nil {
		if o.DHCP6.Decider != nil || o.DHCP6.Observer != nil {
			return nil, &ListenOptionsError{Field: "DHCP6", Reason: "Decider and Observer must be nil: the boot server is both"}
		}
		want := dhcp6.Stateful
		if s.opts.DHCPMode == dhcp.Proxy {
			want = dhcp6.Proxy
		}
		if o.DHCP6.Mode != want {
			return nil, &ListenOptionsError{Field: "DHCP6.Mode", Reason: fmt.Sprintf("is %q but Options.DHCPMode is %q; DHCPv6 must be %q", o.DHCP6.Mode, s.opts.DHCPMode, want)}
		}
		do := *o.DHCP6
		do.Decider, do.Observer = s, s
		if do.Logger == nil {
			do.Logger = s.log
		}
		if do.Clock == nil {
			do.Clock = s.clock
		}
		d, err := dhcp6.New(do)
		if err != nil {
			return nil, err
		}
		conns, err := dhcp6.Listen(do.Interface, do.Mode)
		if err != nil {
			return nil, fmt.Errorf("netboot: %w", err)
		}
		l.dhcp6, l.d6conn = d, conns
	}
	if o.RA != nil {
		a, err := ra.New(*o.RA)
		if err != nil {
			return nil, err
		}
		c, err := a.Listen()
		if err != nil {
			return nil, fmt.Errorf("netboot: %w", err)
		}
		l.ra, l.raconn = a, c
	}
	if o.TFTPAddr != "" {
		ts := &tftp.Server{}
		if o.TFTP != nil {
			if o.TFTP.Handler != nil || o.TFTP.OnTransfer != nil {
				return nil, &ListenOptionsError{Field: "TFTP", Reason: "Handler and OnTransfer must be nil: the boot server is both"}
			}
			c := *o.TFTP
			ts = &c
		}
		ts.Handler, ts.OnTransfer = s, s.OnTransfer
		if ts.Logger == nil {
			ts.Logger = s.log
		}
		c, err := net.ListenPacket("udp", o.TFTPAddr)
		if err != nil {
			return nil, fmt.Errorf("netboot: TFTP on %s: %w", o.TFTPAddr, err)
		}
		l.tftp, l.tconn = ts, c
	}
	if o.HTTPAddr != "" {
		ln, err := net.Listen("tcp", o.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("netboot: HTTP on %s: %w", o.HTTPAddr, err)
		}
		l.hln = ln
	}
	return l, nil
}

// TFTPAddr is the TFTP socket's address (nil without TFTP), and HTTPAddr
// the HTTP listener's (nil without HTTP): useful with port 0.
func (l *Listeners) TFTPAddr() net.Addr {
	if l.tconn == nil {
		return nil
	}
	return l.tconn.LocalAddr()
}

// HTTPAddr is the HTTP listener's address, or nil.
func (l *Listeners) HTTPAddr() net.Addr {
	if l.hln == nil {
		return nil
	}
	return l.hln.Addr()
}

// DHCP is the running DHCP server (its Leases and Metrics), or nil.
func (l *Listeners) DHCP() *dhcp.Server { return l.dhcp }

// DHCP6 is the running DHCPv6 server (its Leases, Metrics and Learn), or
// nil.
func (l *Listeners) DHCP6() *dhcp6.Server { return l.dhcp6 }

// Serve serves on the sockets until ctx ends or one service fails; then
// it stops every service, closes every socket, waits for every goroutine
// and returns nil (or the failure).
func (l *Listeners) Serve(ctx context.Context) error {
	defer l.close()
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range l.dconns {
		g.Go(func() error { return l.dhcp.ServeConn(gctx, c) })
	}
	for _, c := range l.d6conn {
		g.Go(func() error { return l.dhcp6.ServeConn(gctx, c) })
	}
	if l.raconn != nil {
		g.Go(func() error { return l.ra.Serve(gctx, l.raconn) })
	}
	if l.tconn != nil {
		g.Go(func() error { return l.tftp.Serve(gctx, l.tconn) })
	}
	if l.hln != nil {
		hs := &http.Server{
			Handler:           l.s.Handler(),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    16 << 10,
		}
		g.Go(func() error {
			if err := hs.Serve(l.hln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("netboot: HTTP: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := hs.Shutdown(sctx); err != nil {
				return hs.Close()
			}
			return nil
		})
	}
	err := g.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (l *Listeners) close() {
	for _, c := range l.dconns {
		_ = c.Close()
	}
	for _, c := range l.d6conn {
		_ = c.Close()
	}
	if l.raconn != nil {
		_ = l.raconn.Close()
	}
	if l.tconn != nil {
		_ = l.tconn.Close()
	}
	if l.hln != nil {
		_ = l.hln.Close()
	}
}

// Run is Listen then Serve.
func (s *Server) Run(ctx context.Context, o ListenOptions) error {
	l, err := s.Listen(o)
	if err != nil {
		return err
	}
	return l.Serve(ctx)
}

// ListenOptionsError is an invalid ListenOptions field.
type ListenOptionsError struct {
	Field  string
	Reason string
}

func (e *ListenOptionsError) Error() string {
	return fmt.Sprintf("netboot: ListenOptions.%s: %s", e.Field, e.Reason)
}
