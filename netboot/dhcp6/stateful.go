package dhcp6

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/anvilmetal/anvil/netboot/stage"
)

// replyStateful answers in Stateful mode, for the message types RFC 8415
// has a server answer: Solicit (an Advertise, or a Reply with rapid
// commit), Request, Renew, Rebind, Confirm, Release, Decline and
// Information-request (a Reply).
func (s *Server) replyStateful(ctx context.Context, req *dhcpv6.Message, c Client) (*dhcpv6.Message, error) {
	now := s.opts.Clock.Now()
	mt := req.MessageType
	switch mt {
	case dhcpv6.MessageTypeSolicit:
		d, err := s.decide(ctx, c)
		s.record(stage.Record{Node: d.Node, MAC: c.MAC, Stage: stage.DHCPDiscover, Arch: string(c.Arch),
			Note: "DHCPv6 solicit from " + who(c)})
		if err != nil {
			return nil, err
		}
		if d.Ignore {
			return s.ignore(ignoreDecider, c, mt)
		}
		if req.GetOneOption(dhcpv6.OptionRapidCommit) != nil {
			return s.bindAll(req, c, d, now, true)
		}
		rep := s.answer(req, dhcpv6.MessageTypeAdvertise)
		if s.opts.Preference > 0 {
			rep.AddOption(dhcpv6.OptPreference(s.opts.Preference))
		}
		var offered netip.Addr
		for i, ia := range req.Options.IANA() {
			if i > 0 {
				rep.AddOption(noAddrs(ia, "one address per client"))
				continue
			}
			addr, err := s.leases.offer(c.MAC, d.Address, hint(ia), now)
			if err != nil {
				s.countExhausted(err)
				s.log.Warn("dhcp6: no address to advertise", "mac", c.MAC, "node", d.Node, "err", err)
				rep.AddOption(noAddrs(ia, "no address free"))
				continue
			}
			offered = addr
			rep.AddOption(s.iaWith(ia, addr))
		}
		s.configure(rep, req, c, d)
		s.record(stage.Record{Node: d.Node, MAC: c.MAC, Stage: stage.DHCPOffer, Addr: addrString(offered), Arch: string(c.Arch),
			File: bootFile(c, d), Note: "DHCPv6 advertised " + orDash(addrString(offered)) + withFile(bootFile(c, d))})
		return rep, nil

	case dhcpv6.MessageTypeRequest:
		d, err := s.decide(ctx, c)
		if err != nil {
			return nil, err
		}
		if d.Ignore {
			return s.ignore(ignoreDecider, c, mt)
		}
		return s.bindAll(req, c, d, now, false)

	case dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind:
		d, err := s.decide(ctx, c)
		if err != nil {
			return nil, err
		}
		if d.Ignore {
			return s.ignore(ignoreDecider, c, mt)
		}
		return s.extend(req, c, d, now)

	case dhcpv6.MessageTypeConfirm:
		// RFC 8415 section 18.3.3: are the client's addresses on this
		// link? No addresses: no answer.
		var addrs []netip.Addr
		for _, ia := range req.Options.IANA() {
			for _, a := range ia.Options.Addresses() {
				if x, ok := netip.AddrFromSlice(a.IPv6Addr); ok {
					addrs = append(addrs, x)
				}
			}
		}
		if len(addrs) == 0 {
			return s.ignore(ignoreMalformed, c, mt)
		}
		rep := s.answer(req, dhcpv6.MessageTypeReply)
		code, msg := iana.StatusSuccess, "on link"
		for _, a := range addrs {
			if !s.opts.Prefix.Contains(a) {
				code, msg = iana.StatusNotOnLink, a.String()+" is not on this link"
				break
			}
		}
		rep.AddOption(&dhcpv6.OptStatusCode{StatusCode: code, StatusMessage: msg})
		return rep, nil

	case dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		rep := s.answer(req, dhcpv6.MessageTypeReply)
		for _, ia := range req.Options.IANA() {
			for _, a := range ia.Options.Addresses() {
				x, _ := netip.AddrFromSlice(a.IPv6Addr)
				if mt == dhcpv6.MessageTypeRelease {
					s.leases.release(c.MAC, x, now)
				} else if s.leases.decline(c.MAC, x, now) {
					s.log.Warn("dhcp6: client declined its address (another host uses it)", "mac", c.MAC, "addr", x, "hold", s.opts.DeclineHold)
				}
			}
		}
		rep.AddOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusSuccess, StatusMessage: typeLabel(mt) + " done"})
		return rep, nil

	case dhcpv6.MessageTypeInformationRequest:
		return s.inform(ctx, req, c)
	}
	return s.ignore(ignoreType, c, mt)
}

// bindAll leases an address to the client's first IA_NA (a Request, or a
// Solicit with rapid commit): its reservation, the address it was
// advertised or holds, or (the server restarted, or rapid commit) a new
// one.
func (s *Server) bindAll(req *dhcpv6.Message, c Client, d Decision, now time.Time, rapid bool) (*dhcpv6.Message, error) {
	rep := s.answer(req, dhcpv6.MessageTypeReply)
	var bound netip.Addr
	for i, ia := range req.Options.IANA() {
		if i > 0 {
			rep.AddOption(noAddrs(ia, "one address per client"))
			continue
		}
		addr, err := s.leases.offer(c.MAC, d.Address, hint(ia), now)
		if err == nil {
			_, err = s.leases.bind(c.MAC, addr, now)
		}
		if err != nil {
			s.countExhausted(err)
			s.log.Warn("dhcp6: no address to lease", "mac", c.MAC, "node", d.Node, "err", err)
			rep.AddOption(noAddrs(ia, "no address free"))
			continue
		}
		bound = addr
		rep.AddOption(s.iaWith(ia, addr))
	}
	s.configure(rep, req, c, d)
	note := "DHCPv6 leased " + orDash(addrString(bound)) + withFile(bootFile(c, d))
	if rapid {
		note += " (rapid commit)"
	}
	s.record(stage.Record{Node: d.Node, MAC: c.MAC, Stage: stage.DHCPAck, Addr: addrString(bound), Arch: string(c.Arch),
		File: bootFile(c, d), Note: note})
	return rep, nil
}

// extend answers a Renew or Rebind (RFC 8415 sections 18.3.4 and
// 18.3.5): an address the client holds, or a free pool address the
// server has no record of (it restarted: the lease table is in memory),
// gets new lifetimes; an address off this link zero lifetimes; any
// other the status NoBinding.
func (s *Server) extend(req *dhcpv6.Message, c Client, d Decision, now time.Time) (*dhcpv6.Message, error) {
	rep := s.answer(req, dhcpv6.MessageTypeReply)
	var bound netip.Addr
	for _, ia := range req.Options.IANA() {
		out := &dhcpv6.OptIANA{IaId: ia.IaId}
		for _, a := range ia.Options.Addresses() {
			x, _ := netip.AddrFromSlice(a.IPv6Addr)
			switch {
			case !s.opts.Prefix.Contains(x):
				out.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: a.IPv6Addr})
				continue
			case d.Address.IsValid() && x != d.Address,
				!d.Address.IsValid() && !s.leases.holds(c.MAC, x) && !(s.leases.inPool(x) && !s.leases.current(c.MAC).IsValid()):
				continue
			}
			if _, err := s.leases.bind(c.MAC, x, now); err != nil {
				continue
			}
			bound = x
			out.T1, out.T2 = s.opts.PreferredLifetime/2, s.opts.PreferredLifetime*4/5
			out.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: a.IPv6Addr, PreferredLifetime: s.opts.PreferredLifetime, ValidLifetime: s.opts.ValidLifetime})
		}
		if len(out.Options.Options) == 0 {
			out.Options.Add(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoBinding, StatusMessage: "no binding for this IA"})
		}
		rep.AddOption(out)
	}
	s.configure(rep, req, c, d)
	if bound.IsValid() {
		s.record(stage.Record{Node: d.Node, MAC: c.MAC, Stage: stage.DHCPAck, Addr: bound.String(), Arch: string(c.Arch),
			File: bootFile(c, d), Note: "DHCPv6 renewed " + bound.String()})
	}
	return rep, nil
}

// inform answers an Information-request (a stateless client: the
// network's and the boot options, no address).
func (s *Server) inform(ctx context.Context, req *dhcpv6.Message, c Client) (*dhcpv6.Message, error) {
	d, err := s.decide(ctx, c)
	if err != nil {
		return nil, err
	}
	if d.Ignore || s.opts.Mode == Proxy && bootFile(c, d) == "" {
		return s.ignore(ignoreDecider, c, req.MessageType)
	}
	rep := s.answer(req, dhcpv6.MessageTypeReply)
	s.configure(rep, req, c, d)
	if f := bootFile(c, d); f != "" {
		s.record(stage.Record{Node: d.Node, MAC: c.MAC, Stage: stage.DHCPAck, Arch: string(c.Arch), File: f,
			Note: "DHCPv6 information reply, boot file " + f})
	}
	return rep, nil
}

// iaWith is ia answered with addr and the server's lifetimes.
func (s *Server) iaWith(ia *dhcpv6.OptIANA, addr netip.Addr) *dhcpv6.OptIANA {
	out := &dhcpv6.OptIANA{IaId: ia.IaId, T1: s.opts.PreferredLifetime / 2, T2: s.opts.PreferredLifetime * 4 / 5}
	out.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: addr.AsSlice(), PreferredLifetime: s.opts.PreferredLifetime, ValidLifetime: s.opts.ValidLifetime})
	return out
}

// noAddrs is ia answered with the status NoAddrsAvail.
func noAddrs(ia *dhcpv6.OptIANA, why string) *dhcpv6.OptIANA {
	out := &dhcpv6.OptIANA{IaId: ia.IaId}
	out.Options.Add(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoAddrsAvail, StatusMessage: why})
	return out
}

// hint is the address a client asks for in its IA_NA, or the zero Addr.
func hint(ia *dhcpv6.OptIANA) netip.Addr {
	if a := ia.Options.OneAddress(); a != nil {
		x, _ := netip.AddrFromSlice(a.IPv6Addr)
		return x
	}
	return netip.Addr{}
}

func (s *Server) countExhausted(err error) {
	if errors.Is(err, ErrPoolExhausted) {
		s.metrics.exhausted.Inc()
	}
}

// who is the client in a record's note: its MAC and firmware.
func who(c Client) string {
	w := c.MAC
	if c.Arch != "" {
		w += " (" + string(c.Arch) + ")"
	}
	if c.Relayed {
		w += fmt.Sprintf(" via relay %s", orDash(addrString(c.Link)))
	}
	return w
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func withFile(f string) string {
	if f == "" {
		return ""
	}
	return ", boot file " + f
}
