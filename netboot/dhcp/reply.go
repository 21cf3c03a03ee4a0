package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

// pxeDiscoveryControl is option 43 for PXE clients in proxy mode: PXE
// sub-option 6 (discovery control) with bit 3 set, "a boot file name is
// in this offer: download it, skip boot server discovery", then the end
// of the sub-options.
var pxeDiscoveryControl = []byte{6, 1, 1 << 3, 255}

// ipxeNoProxyDHCP is option 175 (iPXE's encapsulated options) holding
// sub-option 176, no-pxedhcp, set to 1: iPXE, having an offer with an
// address, otherwise keeps listening for ProxyDHCP offers for two
// seconds (DHCP_DISC_PROXY_TIMEOUT_SEC) before it requests it. An
// authoritative answer that carries the boot file has all a ProxyDHCP
// server would add, so iPXE is told to request at once.
var ipxeNoProxyDHCP = []byte{176, 1, 1}

// Reply answers one request, as the server's mode says. A nil answer
// (with a nil error) means the request gets no answer: it is not for this
// server, or the Decider said Ignore. An error means the server should
// have answered and could not (ErrPoolExhausted, ErrAddressInUse, a
// DecisionError); the answer is then nil too. Reply sends nothing: the
// caller sends the answer (ServeConn does). Option values of answers are
// shared between answers: read them, never modify them in place.
func (s *Server) Reply(ctx context.Context, req *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, error) {
	if req == nil || req.OpCode != dhcpv4.OpcodeBootRequest {
		s.metrics.ignore(ignoreMalformed)
		return nil, nil
	}
	c := Classify(req)
	if c.MAC == "" {
		s.metrics.ignore(ignoreMalformed)
		return nil, nil
	}
	mt := req.MessageType()
	s.metrics.request(mt)
	var (
		rep *dhcpv4.DHCPv4
		err error
	)
	if s.opts.Mode == Proxy {
		rep, err = s.replyProxy(ctx, req, c, mt)
	} else {
		rep, err = s.replyAuthoritative(ctx, req, c, mt)
	}
	switch {
	case err != nil:
		s.metrics.ignore(ignoreError)
		if errors.Is(err, ErrPoolExhausted) {
			s.metrics.exhausted.Inc()
		}
		return nil, err
	case rep != nil:
		s.metrics.answer(rep.MessageType())
	}
	return rep, nil
}

func (s *Server) ignore(reason string, c Client, mt dhcpv4.MessageType) (*dhcpv4.DHCPv4, error) {
	s.metrics.ignore(reason)
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("dhcp: not answering", "mac", c.MAC, "type", typeLabel(mt), "reason", reason)
	}
	return nil, nil
}

// decide asks the Decider and checks its answer can be sent.
func (s *Server) decide(ctx context.Context, c Client) (Decision, error) {
	d := s.opts.Decider.DecideBoot(ctx, c)
	if d.Ignore {
		return d, nil
	}
	bad := func(field, format string, args ...any) error {
		return &DecisionError{MAC: c.MAC, Node: d.Node, Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if len(d.BootFile) > MaxBootFileLen {
		return d, bad("BootFile", "%d bytes, more than %d (one option 67)", len(d.BootFile), MaxBootFileLen)
	}
	if c.HTTPClient && d.BootFile != "" && !strings.HasPrefix(d.BootFile, "http://") && !strings.HasPrefix(d.BootFile, "https://") {
		return d, bad("BootFile", "%q is not an http(s) URL, which UEFI HTTP boot needs", d.BootFile)
	}
	if d.NextServer.IsValid() && (!d.NextServer.Is4() || d.NextServer.IsUnspecified()) {
		return d, bad("NextServer", "%v is not an IPv4 host address", d.NextServer)
	}
	if len(d.Hostname) > 63 {
		return d, bad("Hostname", "%d bytes, more than a DNS label (63)", len(d.Hostname))
	}
	if d.Address.IsValid() && s.opts.Mode == Authoritative {
		sub := s.opts.Subnet
		if !d.Address.Is4() || !sub.Contains(d.Address) || d.Address == sub.Addr() || d.Address == lastAddr(sub) || d.Address == s.opts.ServerIP {
			return d, bad("Address", "%v is not a client host address of Subnet %v", d.Address, sub)
		}
	}
	return d, nil
}

func (s *Server) replyAuthoritative(ctx context.Context, req *dhcpv4.DHCPv4, c Client, mt dhcpv4.MessageType) (*dhcpv4.DHCPv4, error) {
	now := s.opts.Clock.Now()
	switch mt {
	case dhcpv4.MessageTypeDiscover:
		d, err := s.decide(ctx, c)
		s.record(stage.Record{Node: d.Node, MAC: c.MAC, Stage: stage.DHCPDiscover, Arch: string(c.Arch)})
		if err != nil {
			return nil, err
		}
		if d.Ignore {
			return s.ignore(ignoreDecider, c, mt)
		}
		requested, _ := netip.AddrFromSlice(req.RequestedIPAddress().To4())
		addr, err := s.leases.offer(c.MAC, d.Address, requested, now)
		if err != nil {
			s.log.Warn("dhcp: no offer", "mac", c.MAC, "node", d.Node, "err", err)
			return nil, err
		}
		rep := s.answer(req, c, d, dhcpv4.MessageTypeOffer, addr)
		s.record(stage.Record{Node: d.Node, MAC: c.MAC, Stage: stage.DHCPOffer, Addr: addr.String(), Arch: string(c.Arch), File: d.BootFile})
		return s.fits(req, c, d, rep)

	case dhcpv4.MessageTypeRequest:
		return s.request(ctx, req, c, now)

	case dhcpv4.MessageTypeDecline:
		if sid := req.ServerIdentifier(); sid != nil && !sid.Equal(s.serverIP()) {
			return s.ignore(ignoreOtherServer, c, mt)
		}
		addr, _ := netip.AddrFromSlice(req.RequestedIPAddress().To4())
		if s.leases.decline(c.MAC, addr, now) {
			s.log.Warn("dhcp: client declined its address (another host uses it)", "mac", c.MAC, "addr", addr, "hold", s.opts.DeclineHold)
		}
		return nil, nil

	case dhcpv4.MessageTypeRelease:
		if sid := req.ServerIdentifier(); sid != nil && !sid.Equal(s.serverIP()) {
			return s.ignore(ignoreOtherServer, c, mt)
		}
		addr, _ := netip.AddrFromSlice(req.ClientIPAddr.To4())
		if s.leases.release(c.MAC, addr, now) {
			s.log.Debug("dhcp: released", "mac", c.MAC, "addr", addr)
		}
		return nil, nil

	case dhcpv4.MessageTypeInform:
		d, err := s.decide(ctx, c)
		if err != nil {
			return nil, err
		}
		if d.Ignore {
			return s.ignore(ignoreDecider, c, mt)
		}
		rep := s.answer(req, c, d, dhcpv4.MessageTypeAck, netip.Addr{})
		rep.ClientIPAddr = req.ClientIPAddr
		rep.Options.Del(dhcpv4.OptionIPAddressLeaseTime)
		rep.Options.Del(dhcpv4.OptionRenewTimeValue)
		rep.Options.Del(dhcpv4.OptionRebindingTimeValue)
		return s.fits(req, c, d, rep)
	}
	return s.ignore(ignoreType, c, mt)
}

// request answers a DHCPREQUEST in authoritative mode, by the client
// state RFC 2131 section 4.3.2 tells from the request: SELECTING (server
// identifier set), INIT-REBOOT (requested address, no ciaddr), RENEWING
// or REBINDING (ciaddr).
func (s *Server) request(ctx context.Context, req *dhcpv4.DHCPv4, c Client, now time.Time) (*dhcpv4.DHCPv4, error) {
	const mt = dhcpv4.MessageTypeRequest
	sid := req.ServerIdentifier()
	requested, _ := netip.AddrFromSlice(req.RequestedIPAddress().To4())
	ciaddr, _ := netip.AddrFromSlice(req.ClientIPAddr.To4())
	selecting := sid != nil
	var addr netip.Addr
	switch {
	case selecting && !sid.Equal(s.serverIP()):
		// The client took another server's offer: ours is free again.
		s.leases.cancelOffer(c.MAC, now)
		return s.ignore(ignoreOtherServer, c, mt)
	case requested.IsValid() && !requested.IsUnspecified():
		addr = requested
	case !selecting && ciaddr.IsValid() && !ciaddr.IsUnspecified():
		addr = ciaddr
	default:
		return s.nak(req, c, "no requested address")
	}
	d, err := s.decide(ctx, c)
	if err != nil {
		return nil, err
	}
	if d.Ignore {
		return s.ignore(ignoreDecider, c, mt)
	}
	switch have := numAddr(s.leases.current(c.MAC)); {
	case !s.opts.Subnet.Contains(addr):
		return s.nak(req, c, fmt.Sprintf("%v is not on this network (%v)", addr, s.opts.Subnet))
	case d.Address.IsValid() && d.Address != addr:
		return s.nak(req, c, fmt.Sprintf("%v is not this client's address", addr))
	case selecting && have != addr:
		return s.nak(req, c, fmt.Sprintf("%v was not offered to this client", addr))
	case have != addr && !d.Address.IsValid() && !s.leases.inPool(addrNum(addr)):
		// INIT-REBOOT or RENEWING with an address the server has no
		// record of: granted when it is a free pool address (the server
		// restarted and forgot its leases), refused otherwise.
		return s.nak(req, c, fmt.Sprintf("%v is not an address of this server", addr))
	}
	expires, err := s.leases.bind(c.MAC, addr, now)
	if err != nil {
		return s.nak(req, c, err.Error())
	}
	rep := s.answer(req, c, d, dhcpv4.MessageTypeAck, addr)
	rep.ClientIPAddr = req.ClientIPAddr
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("dhcp: leased", "mac", c.MAC, "node", d.Node, "addr", addr, "expires", expires)
	}
	s.record(stage.Record{Node: d.Node, MAC: c.MAC, Stage: stage.DHCPAck, Addr: addr.String(), Arch: string(c.Arch), File: d.BootFile})
	return s.fits(req, c, d, rep)
}

// nak refuses a REQUEST (RFC 2131 table 3: no yiaddr, no boot options,
// broadcast through a relay).
func (s *Server) nak(req *dhcpv4.DHCPv4, c Client, why string) (*dhcpv4.DHCPv4, error) {
	rep := s.base(req, dhcpv4.MessageTypeNak)
	rep.Options.Update(dhcpv4.OptMessage(why))
	if !isZero(req.GatewayIPAddr) {
		rep.SetBroadcast()
	}
	s.log.Info("dhcp: refused request", "mac", c.MAC, "reason", why)
	return rep, nil
}

func (s *Server) replyProxy(ctx context.Context, req *dhcpv4.DHCPv4, c Client, mt dhcpv4.MessageType) (*dhcpv4.DHCPv4, error) {
	if !c.PXEClient && !c.HTTPClient {
		return s.ignore(ignoreNotPXE, c, mt)
	}
	var answer dhcpv4.MessageType
	switch mt {
	case dhcpv4.MessageTypeDiscover:
		answer = dhcpv4.MessageTypeOffer
	case dhcpv4.MessageTypeRequest, dhcpv4.MessageTypeInform:
		// On port 67 a REQUEST is for us only when it names us: the one
		// without a server identifier is the client's INIT-REBOOT or
		// REBINDING for the real DHCP server. On the PXE port every
		// REQUEST is a ProxyDHCPREQUEST.
		sid := req.ServerIdentifier()
		if sid != nil && !sid.Equal(s.serverIP()) || sid == nil && !onPXEPort(ctx) {
			return s.ignore(ignoreOtherServer, c, mt)
		}
		answer = dhcpv4.MessageTypeAck
	default:
		return s.ignore(ignoreType, c, mt)
	}
	d, err := s.decide(ctx, c)
	if mt == dhcpv4.MessageTypeDiscover {
		s.record(stage.Record{Node: d.Node, MAC: c.MAC, Stage: stage.DHCPDiscover, Arch: string(c.Arch)})
	}
	if err != nil {
		return nil, err
	}
	if d.Ignore || d.BootFile == "" {
		return s.ignore(ignoreDecider, c, mt)
	}
	rep := s.answer(req, c, d, answer, netip.Addr{})
	// A proxy offers no address: its record says so instead of "offered -".
	rec := stage.Record{Node: d.Node, MAC: c.MAC, Stage: stage.DHCPOffer, Arch: string(c.Arch), File: d.BootFile,
		Note: "proxyDHCP offered boot file " + d.BootFile}
	if answer == dhcpv4.MessageTypeAck {
		rec.Note = ""
		rep.ClientIPAddr = req.ClientIPAddr
		rec.Stage = stage.DHCPAck
		if ci, ok := netip.AddrFromSlice(req.ClientIPAddr.To4()); ok && !ci.IsUnspecified() {
			rec.Addr = ci.String()
		}
	}
	s.record(rec)
	return s.fits(req, c, d, rep)
}

// base is the skeleton of every answer: the request's transaction, the
// message type and the server identifier, and the options a server
// copies (relay agent information, RFC 3046; client identifier, RFC 6842).
func (s *Server) base(req *dhcpv4.DHCPv4, mt dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	rep := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        req.HWType,
		TransactionID: req.TransactionID,
		Flags:         req.Flags,
		ClientIPAddr:  net.IPv4zero,
		YourIPAddr:    net.IPv4zero,
		ServerIPAddr:  net.IPv4zero,
		GatewayIPAddr: ip4(req.GatewayIPAddr),
		ClientHWAddr:  req.ClientHWAddr,
		Options:       make(dhcpv4.Options, 12),
	}
	rep.Options[dhcpv4.OptionDHCPMessageType.Code()] = s.wire.msgType[mt]
	rep.Options[dhcpv4.OptionServerIdentifier.Code()] = s.wire.serverID
	for _, code := range []dhcpv4.OptionCode{dhcpv4.OptionRelayAgentInformation, dhcpv4.OptionClientIdentifier} {
		if v := req.Options.Get(code); v != nil {
			rep.Options.Update(dhcpv4.OptGeneric(code, v))
		}
	}
	return rep
}

// answer is an OFFER or ACK: addr (authoritative mode) with the network's
// options, and the boot options of d.
func (s *Server) answer(req *dhcpv4.DHCPv4, c Client, d Decision, mt dhcpv4.MessageType, addr netip.Addr) *dhcpv4.DHCPv4 {
	rep := s.base(req, mt)
	o := &s.opts
	if o.Mode == Authoritative {
		if addr.IsValid() {
			rep.YourIPAddr = addr.AsSlice()
			for code, v := range s.wire.lease {
				rep.Options[code] = v
			}
		}
		for code, v := range s.wire.network {
			rep.Options[code] = v
		}
		if d.Hostname != "" {
			rep.Options.Update(dhcpv4.OptHostName(d.Hostname))
		}
	}
	if d.BootFile == "" {
		return rep
	}
	rep.ServerIPAddr = s.wire.serverID
	if d.NextServer.IsValid() {
		rep.ServerIPAddr = d.NextServer.AsSlice()
	}
	if len(d.BootFile) < 128 {
		rep.BootFileName = d.BootFile
	}
	rep.Options.Update(dhcpv4.OptBootFileName(d.BootFile))
	switch {
	case c.HTTPClient:
		// UEFI HTTP boot takes an offer only with this class back.
		rep.Options[dhcpv4.OptionClassIdentifier.Code()] = s.wire.httpClient
	case o.Mode == Proxy:
		// PXE firmware takes an offer without an address only from a
		// server that says it is a PXE one, and uses its boot file only
		// when told to skip boot server discovery.
		rep.Options[dhcpv4.OptionClassIdentifier.Code()] = s.wire.pxeClient
		rep.Options[dhcpv4.OptionVendorSpecificInformation.Code()] = pxeDiscoveryControl
	}
	if c.IPXE && o.Mode == Authoritative {
		rep.Options[optionIPXEEncapsulated] = ipxeNoProxyDHCP
	}
	return rep
}

// fits checks rep against the largest message the client accepts: at
// least MinPacketSize, at most the client's option 57 and MaxPacketSize.
func (s *Server) fits(req *dhcpv4.DHCPv4, c Client, d Decision, rep *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, error) {
	limit := MinPacketSize
	if m, err := req.MaxMessageSize(); err == nil && int(m) > limit {
		limit = int(m)
	}
	limit = min(limit, s.opts.MaxPacketSize)
	// The fixed header and magic cookie (240 bytes), the options, the
	// end option; IP and UDP headers (28 bytes) count in option 57.
	size := 240 + 1 + 28
	for _, v := range rep.Options {
		size += 2*(len(v)/255+1) + len(v)
	}
	if size > limit {
		return nil, &DecisionError{MAC: c.MAC, Node: d.Node, Field: "BootFile",
			Problem: fmt.Sprintf("the answer would be %d bytes, more than the client accepts (%d)", size, limit)}
	}
	return rep, nil
}

func (s *Server) serverIP() net.IP { return s.wire.serverID }

// wireOptions are the option values every answer of a Server shares,
// encoded once by New. Answers point at them: they are read-only.
type wireOptions struct {
	serverID   net.IP
	msgType    [9][]byte // by message type
	network    map[uint8][]byte
	lease      map[uint8][]byte
	pxeClient  []byte
	httpClient []byte
}

func newWireOptions(o *Options) wireOptions {
	w := wireOptions{
		serverID:   o.ServerIP.AsSlice(),
		network:    map[uint8][]byte{},
		lease:      map[uint8][]byte{},
		pxeClient:  []byte(vendorPXE),
		httpClient: []byte(vendorHTTP),
	}
	for i := range w.msgType {
		w.msgType[i] = []byte{byte(i)}
	}
	add := func(m map[uint8][]byte, opt dhcpv4.Option) { m[opt.Code.Code()] = opt.Value.ToBytes() }
	if o.Mode != Authoritative {
		return w
	}
	add(w.lease, dhcpv4.OptIPAddressLeaseTime(o.LeaseTime))
	add(w.lease, dhcpv4.OptRenewTimeValue(o.LeaseTime/2))
	add(w.lease, dhcpv4.OptRebindingTimeValue(o.LeaseTime*7/8))
	add(w.network, dhcpv4.OptSubnetMask(net.CIDRMask(o.Subnet.Bits(), 32)))
	if o.Router.IsValid() {
		add(w.network, dhcpv4.OptRouter(o.Router.AsSlice()))
	}
	if len(o.DNS) > 0 {
		ips := make([]net.IP, len(o.DNS))
		for i, a := range o.DNS {
			ips[i] = a.AsSlice()
		}
		add(w.network, dhcpv4.OptDNS(ips...))
	}
	return w
}

func isZero(ip net.IP) bool { return ip == nil || ip.To4() == nil || ip.To4().IsUnspecified() }

func ip4(ip net.IP) net.IP {
	if v := ip.To4(); v != nil {
		return v
	}
	return net.IPv4zero
}
