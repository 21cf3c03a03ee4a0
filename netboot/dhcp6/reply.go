package dhcp6

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// maxAnswer is the largest answer Reply makes: it fits IPv6's minimum
// MTU with the IPv6 and UDP headers (1280 - 40 - 8), so that no firmware
// has to reassemble it.
const maxAnswer = MinPacketSize - 48

// vendorEnterprisePXE is the enterprise number (Intel) under which PXE
// and UEFI HTTP boot firmware send their vendor class, and under which
// an HTTP boot client wants "HTTPClient" back.
const vendorEnterprisePXE = 343

// Reply answers one client message, which arrived as src says (Unwrap
// makes both from a packet), as the server's mode says. A nil answer
// (with a nil error) means the request gets no answer: it is not for
// this server, the Decider said Ignore, or no MAC could be found for the
// client. An error means the server should have answered and could not
// (a DecisionError); the answer is then nil too. Reply sends nothing: the
// caller sends the answer (wrapped by Wrap for a relayed request).
func (s *Server) Reply(ctx context.Context, req *dhcpv6.Message, src Source) (*dhcpv6.Message, error) {
	if req == nil || !clientType(req.MessageType) {
		s.metrics.ignore(ignoreMalformed)
		return nil, nil
	}
	mt := req.MessageType
	s.metrics.request(mt)
	// RFC 8415 section 16: which messages must, and which must not, name
	// a server; and a message naming another server is that server's.
	sid := req.Options.ServerID()
	switch mt {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeConfirm, dhcpv6.MessageTypeRebind:
		if sid != nil {
			return s.ignore(ignoreMalformed, Client{}, mt)
		}
	case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		if sid == nil {
			return s.ignore(ignoreOtherServer, Client{}, mt)
		}
	}
	if sid != nil && !bytes.Equal(sid.ToBytes(), s.sidBytes) {
		return s.ignore(ignoreOtherServer, Client{}, mt)
	}
	if mt != dhcpv6.MessageTypeInformationRequest && req.Options.ClientID() == nil {
		return s.ignore(ignoreMalformed, Client{}, mt)
	}
	c := s.classify(req, src)
	if c.MAC == "" {
		return s.ignore(ignoreNoMAC, c, mt)
	}
	var (
		rep *dhcpv6.Message
		err error
	)
	if s.opts.Mode == Proxy {
		rep, err = s.replyProxy(ctx, req, c)
	} else {
		rep, err = s.replyStateful(ctx, req, c)
	}
	if err == nil && rep != nil {
		if n := len(rep.ToBytes()); n > maxAnswer {
			err = &DecisionError{MAC: c.MAC, Field: "BootFileURL",
				Problem: fmt.Sprintf("the answer would be %d bytes, more than fits IPv6's minimum MTU (%d)", n, maxAnswer)}
		}
	}
	if err != nil {
		s.metrics.ignore(ignoreError)
		return nil, err
	}
	if rep != nil {
		s.metrics.answer(rep.MessageType)
	}
	return rep, nil
}

// classify is Classify, with the MAC looked up among the learned DUIDs
// when the request yields none, and a found one learned.
func (s *Server) classify(req *dhcpv6.Message, src Source) Client {
	c := Classify(req, src)
	switch {
	case c.MAC != "" && c.DUID != "":
		s.learned.put(c.DUID, c.MAC)
	case c.MAC == "" && c.DUID != "":
		if mac, ok := s.learned.get(c.DUID); ok {
			c.MAC, c.MACFrom = mac, MACFromLearned
		}
	}
	if c.MAC != "" {
		s.metrics.mac(c.MACFrom)
	}
	return c
}

func (s *Server) ignore(reason string, c Client, mt dhcpv6.MessageType) (*dhcpv6.Message, error) {
	s.metrics.ignore(reason)
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("dhcp6: not answering", "mac", c.MAC, "duid", c.DUID, "type", typeLabel(mt), "reason", reason)
	}
	return nil, nil
}

// decide asks the Decider and checks its answer can be sent.
func (s *Server) decide(ctx context.Context, c Client) (Decision, error) {
	d := s.opts.Decider.DecideBoot6(ctx, c)
	if d.Ignore {
		return d, nil
	}
	bad := func(field, format string, args ...any) error {
		return &DecisionError{MAC: c.MAC, Node: d.Node, Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if u := d.BootFileURL; u != "" {
		if len(u) > MaxBootFileURLLen {
			return d, bad("BootFileURL", "%d bytes, more than %d", len(u), MaxBootFileURLLen)
		}
		scheme, _, _ := strings.Cut(u, "://")
		switch scheme {
		case "http", "https":
		case "tftp":
			if c.HTTPClient {
				return d, bad("BootFileURL", "%q is not an http(s) URL, which UEFI HTTP boot needs", u)
			}
		default:
			return d, bad("BootFileURL", "%q is not a tftp or http(s) URL (RFC 5970)", u)
		}
	}
	if d.Address.IsValid() && s.opts.Mode == Stateful {
		if a := d.Address; !a.Is6() || a.Zone() != "" || !s.opts.Prefix.Contains(a) || a == s.opts.Prefix.Addr() || a == s.opts.ServerAddr {
			return d, bad("Address", "%v is not a client address of Prefix %v", d.Address, s.opts.Prefix)
		}
	}
	return d, nil
}

// answer is the skeleton of every answer: an Advertise built from a
// Solicit, or a Reply built from the message, carrying the client's
// identifier (when it sent one) and the server's.
func (s *Server) answer(req *dhcpv6.Message, t dhcpv6.MessageType) *dhcpv6.Message {
	var rep *dhcpv6.Message
	switch {
	case t == dhcpv6.MessageTypeAdvertise:
		rep, _ = dhcpv6.NewAdvertiseFromSolicit(req)
	case req.MessageType != dhcpv6.MessageTypeDecline && req.MessageType != dhcpv6.MessageTypeSolicit:
		rep, _ = dhcpv6.NewReplyFromMessage(req)
	}
	if rep == nil {
		// A Reply to a Decline, a rapid-commit Solicit, or an
		// Information-request without a client identifier.
		rep = &dhcpv6.Message{MessageType: t, TransactionID: req.TransactionID}
		if cid := req.GetOneOption(dhcpv6.OptionClientID); cid != nil {
			rep.AddOption(cid)
		}
		if req.MessageType == dhcpv6.MessageTypeSolicit {
			rep.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionRapidCommit})
		}
	}
	rep.AddOption(dhcpv6.OptServerID(s.serverID))
	return rep
}

// configure adds the network's options (Stateful mode: a proxy leaves
// them to the link's own server) and d's boot options to rep, each only
// when the client asked for it (its Option Request Option), and the
// vendor class "HTTPClient" an HTTP boot client needs to take the boot
// file URL.
func (s *Server) configure(rep, req *dhcpv6.Message, c Client, d Decision) {
	if s.opts.Mode == Stateful && len(s.opts.DNS) > 0 && req.IsOptionRequested(dhcpv6.OptionDNSRecursiveNameServer) {
		ips := make([]net.IP, 0, len(s.opts.DNS))
		for _, a := range s.opts.DNS {
			ips = append(ips, a.AsSlice())
		}
		rep.AddOption(dhcpv6.OptDNS(ips...))
	}
	if d.BootFileURL == "" || !c.WantsBootFileURL {
		return
	}
	rep.AddOption(dhcpv6.OptBootFileURL(d.BootFileURL))
	if len(d.BootFileParams) > 0 && req.IsOptionRequested(dhcpv6.OptionBootfileParam) {
		rep.AddOption(dhcpv6.OptBootFileParam(d.BootFileParams...))
	}
	if c.HTTPClient {
		rep.AddOption(&dhcpv6.OptVendorClass{EnterpriseNumber: vendorEnterprisePXE, Data: [][]byte{[]byte("HTTPClient")}})
	}
}

// bootFile is the boot file URL the answer carries, for records.
func bootFile(c Client, d Decision) string {
	if c.WantsBootFileURL {
		return d.BootFileURL
	}
	return ""
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
