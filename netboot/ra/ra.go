// Package ra sends IPv6 router advertisements (RFC 4861) on a
// provisioning network: the managed flag that makes firmware, iPXE and
// the ramdisk ask DHCPv6 (package netboot/dhcp6) for an address, the
// link's prefix as on-link (and, with SLAAC, for addresses of their
// own), and the DNS servers (RFC 8106). It can be left out where the
// network's routers advertise already; nothing in netboot needs it.
//
// # Usage
//
//	adv, err := ra.New(ra.Options{
//		Interface: "prov0",
//		Prefix:    netip.MustParsePrefix("fd00:a6::/64"),
//		Managed:   true,
//	})
//	conn, err := adv.Listen() // netboot.Server.Listen does this
//	err = adv.Serve(ctx, conn)
//
// Serve advertises every Options.Interval and at once (at most every
// half second) when a host sends a router solicitation. Advertisement
// is the message itself, without I/O: the golden files under testdata/
// are its decoded form for each configuration.
package ra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/mdlayher/ndp"
	"golang.org/x/net/ipv6"
)

// Defaults and bounds of Options.
const (
	// DefaultInterval is the time between unsolicited advertisements:
	// short, because iPXE and firmware that miss one wait for the next
	// (they solicit too, and are answered at once).
	DefaultInterval = 10 * time.Second
	// DefaultPrefixLifetime is the prefix's valid and preferred
	// lifetime.
	DefaultPrefixLifetime = time.Hour
	// minSolicitedGap bounds the answers to router solicitations.
	minSolicitedGap = 500 * time.Millisecond
)

// Options configure an Advertiser.
type Options struct {
	// Interface is the link to advertise on (required).
	Interface string
	// Prefix is the link's prefix, advertised as on-link so that hosts
	// reach each other (and the boot server) directly; the zero Prefix
	// advertises none.
	Prefix netip.Prefix
	// SLAAC sets the prefix's autonomous flag: hosts make addresses of
	// their own in it (a /64 only).
	SLAAC bool
	// Managed sets the managed flag (addresses from DHCPv6), Other the
	// other-configuration flag (other settings from DHCPv6).
	Managed, Other bool
	// RouterLifetime is how long hosts may use the sender as their
	// default router; 0 (the default) says it is none, which a
	// provisioning network without a way out wants.
	RouterLifetime time.Duration
	// DNS are advertised recursive DNS servers; none sends no option.
	DNS []netip.Addr
	// MTU, when not zero, is advertised (1280..65535).
	MTU int
	// Interval is the time between unsolicited advertisements (default
	// DefaultInterval, 1 s to 30 min).
	Interval time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ConfigError is an invalid Options field.
type ConfigError struct {
	Field, Problem string
}

func (e *ConfigError) Error() string { return "ra: Options." + e.Field + ": " + e.Problem }

// Advertiser sends router advertisements on one link.
type Advertiser struct {
	o   Options
	log *slog.Logger
}

// New checks o and returns an Advertiser.
func New(o Options) (*Advertiser, error) {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if o.Interface == "" || len(o.Interface) > 15 {
		return nil, bad("Interface", "%q is not an interface name", o.Interface)
	}
	if o.Prefix.IsValid() {
		if !o.Prefix.Addr().Is6() || o.Prefix.Addr().Is4In6() || o.Prefix.Addr().IsLinkLocalUnicast() || o.Prefix.Addr().IsMulticast() {
			return nil, bad("Prefix", "%v is not a global or unique local IPv6 prefix", o.Prefix)
		}
		o.Prefix = o.Prefix.Masked()
	}
	if o.SLAAC && (!o.Prefix.IsValid() || o.Prefix.Bits() != 64) {
		return nil, bad("SLAAC", "needs a /64 Prefix, have %v", o.Prefix)
	}
	if o.RouterLifetime < 0 || o.RouterLifetime > 9000*time.Second {
		return nil, bad("RouterLifetime", "%v is outside 0..9000s (RFC 4861)", o.RouterLifetime)
	}
	for i, d := range o.DNS {
		if !d.Is6() || d.Is4In6() || d.IsUnspecified() || d.IsMulticast() {
			return nil, bad(fmt.Sprintf("DNS[%d]", i), "%v is not an IPv6 unicast address", d)
		}
	}
	if o.MTU != 0 && (o.MTU < 1280 || o.MTU > 65535) {
		return nil, bad("MTU", "%d is outside 1280..65535", o.MTU)
	}
	switch {
	case o.Interval == 0:
		o.Interval = DefaultInterval
	case o.Interval < time.Second || o.Interval > 30*time.Minute:
		return nil, bad("Interval", "%v is outside 1s..30m", o.Interval)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Advertiser{o: o, log: o.Logger}, nil
}

// Advertisement is the router advertisement o describes, from a router
// whose link-layer address is mac (nil leaves the source link-layer
// address option out).
func Advertisement(o Options, mac net.HardwareAddr) *ndp.RouterAdvertisement {
	m := &ndp.RouterAdvertisement{
		CurrentHopLimit:      64,
		ManagedConfiguration: o.Managed,
		OtherConfiguration:   o.Other,
		RouterLifetime:       o.RouterLifetime,
	}
	if o.Prefix.IsValid() {
		m.Options = append(m.Options, &ndp.PrefixInformation{
			PrefixLength:                   uint8(o.Prefix.Bits()),
			OnLink:                         true,
			AutonomousAddressConfiguration: o.SLAAC,
			ValidLifetime:                  DefaultPrefixLifetime,
			PreferredLifetime:              DefaultPrefixLifetime,
			Prefix:                         o.Prefix.Addr(),
		})
	}
	if len(o.DNS) > 0 {
		m.Options = append(m.Options, &ndp.RecursiveDNSServer{Lifetime: 3 * max(o.Interval, DefaultInterval), Servers: o.DNS})
	}
	if o.MTU != 0 {
		m.Options = append(m.Options, ndp.NewMTU(uint32(o.MTU)))
	}
	if len(mac) == 6 {
		m.Options = append(m.Options, &ndp.LinkLayerAddress{Direction: ndp.Source, Addr: mac})
	}
	return m
}

// Conn is an open ICMPv6 socket on the Advertiser's link.
type Conn struct {
	c   *ndp.Conn
	ifi *net.Interface
}

// Close closes the socket.
func (c *Conn) Close() error { return c.c.Close() }

// Listen opens the Advertiser's socket: ICMPv6 on its interface, joined
// to all-routers (ff02::2) to hear router solicitations. The interface
// need not have its link-local address yet (a bridge without ports has
// none): advertisements are sent once it has one.
func (a *Advertiser) Listen() (*Conn, error) {
	ifi, err := net.InterfaceByName(a.o.Interface)
	if err != nil {
		return nil, fmt.Errorf("ra: interface %s: %w", a.o.Interface, err)
	}
	c, _, err := ndp.Listen(ifi, ndp.Unspecified)
	if err != nil {
		return nil, fmt.Errorf("ra: listen on %s: %w", a.o.Interface, err)
	}
	if err := c.JoinGroup(netip.MustParseAddr("ff02::2")); err != nil {
		c.Close()
		return nil, fmt.Errorf("ra: join ff02::2 on %s: %w", a.o.Interface, err)
	}
	if err := c.SetControlMessage(ipv6.FlagInterface, true); err != nil {
		c.Close()
		return nil, fmt.Errorf("ra: %w", err)
	}
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeRouterSolicitation)
	if err := c.SetICMPFilter(&f); err != nil {
		c.Close()
		return nil, fmt.Errorf("ra: %w", err)
	}
	return &Conn{c: c, ifi: ifi}, nil
}

// Serve advertises on conn every Interval, and in answer to router
// solicitations on the link, until ctx ends; then it returns nil (conn
// stays open: it is the caller's). A send that fails (no link-local
// address yet) is tried again at the next tick.
func (a *Advertiser) Serve(ctx context.Context, conn *Conn) error {
	msg := Advertisement(a.o, conn.ifi.HardwareAddr)
	allNodes := netip.MustParseAddr("ff02::1")
	send := func() {
		if err := conn.c.WriteTo(msg, nil, allNodes); err != nil && ctx.Err() == nil {
			a.log.Debug("ra: advertisement not sent (no link-local address yet?)", "interface", a.o.Interface, "err", err)
		}
	}
	solicited := make(chan struct{}, 1)
	readDone := make(chan error, 1)
	stop := context.AfterFunc(ctx, func() { _ = conn.c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	go func() {
		for {
			m, cm, _, err := conn.c.ReadFrom()
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
					readDone <- nil
					return
				}
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					readDone <- nil
					return
				}
				// A malformed message is not ours to fail on; the pause
				// bounds the loop should the socket keep failing.
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if _, ok := m.(*ndp.RouterSolicitation); ok && (cm == nil || cm.IfIndex == conn.ifi.Index) {
				select {
				case solicited <- struct{}{}:
				default:
				}
			}
		}
	}()
	t := time.NewTicker(a.o.Interval)
	defer t.Stop()
	var last time.Time
	send()
	for {
		select {
		case <-ctx.Done():
			<-readDone
			return nil
		case <-t.C:
			send()
			last = time.Now()
		case <-solicited:
			if time.Since(last) >= minSolicitedGap {
				send()
				last = time.Now()
			}
		}
	}
}
