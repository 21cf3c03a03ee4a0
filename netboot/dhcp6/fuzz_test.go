package dhcp6

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// FuzzReply feeds raw packets through dhcpv6.FromBytes, Unwrap, Reply and
// Wrap, in both modes, as a direct client's and as a relay's: no panic,
// and every answer is a well-formed, bounded answer to the request.
func FuzzReply(f *testing.F) {
	us := withServerID(serverDUID)
	seeds := []dhcpv6.DHCPv6{
		msg(f, dhcpv6.MessageTypeSolicit, duidUUID("ipxe"), ipxeClient()),
		msg(f, dhcpv6.MessageTypeSolicit, duidLLT(f, macA), pxeEFI()),
		msg(f, dhcpv6.MessageTypeSolicit, duidLL(f, macA), httpClient(), dhcpv6.WithRapidCommit),
		msg(f, dhcpv6.MessageTypeSolicit, duidLL(f, macReserve), pxeEFI()),
		msg(f, dhcpv6.MessageTypeRequest, duidLLT(f, macA), pxeEFI(), us),
		msg(f, dhcpv6.MessageTypeRenew, duidLLT(f, macA), us, withAddr("fd00:a6::100")),
		msg(f, dhcpv6.MessageTypeRebind, duidLLT(f, macA), withAddr("fd00:a6::101")),
		msg(f, dhcpv6.MessageTypeConfirm, duidLLT(f, macA), withAddr("fd00:a6::101")),
		msg(f, dhcpv6.MessageTypeRelease, duidLLT(f, macA), us, withAddr("fd00:a6::100")),
		msg(f, dhcpv6.MessageTypeDecline, duidLLT(f, macA), us, withAddr("fd00:a6::100")),
		msg(f, dhcpv6.MessageTypeInformationRequest, nil, ipxeClient()),
		relayed(f, msg(f, dhcpv6.MessageTypeSolicit, duidUUID("x"), ipxeClient()), linkLocal(f, macB), macA),
	}
	for _, s := range seeds {
		f.Add(s.ToBytes(), true)
		f.Add(s.ToBytes(), false)
	}
	f.Add([]byte{}, true)
	f.Add([]byte{12, 0}, false)
	stateful, _, _ := newTestServer(f, Stateful)
	proxy, _, _ := newTestServer(f, Proxy)
	f.Fuzz(func(t *testing.T, pkt []byte, fromLinkLocal bool) {
		if len(pkt) > DefaultMaxPacketSize {
			return // ServeConn drops these before parsing
		}
		in, err := dhcpv6.FromBytes(pkt)
		if err != nil {
			return
		}
		from := netip.MustParseAddr("fd00:a6::fe")
		if fromLinkLocal {
			from = linkLocal(t, macB).WithZone("eth0")
		}
		req, src, err := Unwrap(in, from)
		if err != nil {
			return
		}
		for _, s := range []*Server{stateful, proxy} {
			rep, err := s.Reply(context.Background(), req, src)
			if rep == nil {
				continue
			}
			if err != nil {
				t.Fatalf("an answer with an error: %v", err)
			}
			out, err := Wrap(in, rep)
			if err != nil {
				t.Fatalf("Wrap: %v", err)
			}
			if err := checkAnswer(req, rep, out); err != nil {
				t.Fatalf("%s mode: %v\nrequest:\n%s\nanswer:\n%s", s.opts.Mode, err, in.Summary(), render(out))
			}
		}
	})
}

func checkAnswer(req, rep *dhcpv6.Message, out dhcpv6.DHCPv6) error {
	b := rep.ToBytes()
	if len(b) > maxAnswer {
		return fmt.Errorf("answer of %d bytes", len(b))
	}
	back, err := dhcpv6.FromBytes(out.ToBytes())
	if err != nil {
		return fmt.Errorf("answer does not parse: %v", err)
	}
	m, err := back.GetInnerMessage()
	if err != nil {
		return err
	}
	if m.TransactionID != req.TransactionID {
		return fmt.Errorf("answer xid %v for xid %v", m.TransactionID, req.TransactionID)
	}
	switch m.MessageType {
	case dhcpv6.MessageTypeAdvertise, dhcpv6.MessageTypeReply:
	default:
		return fmt.Errorf("answer type %v", m.MessageType)
	}
	if sid := m.Options.ServerID(); sid == nil || !bytes.Equal(sid.ToBytes(), serverDUID.ToBytes()) {
		return fmt.Errorf("server identifier %v", sid)
	}
	if cid := req.Options.ClientID(); cid != nil {
		if got := m.Options.ClientID(); got == nil || !bytes.Equal(got.ToBytes(), cid.ToBytes()) {
			return fmt.Errorf("client identifier %v, want %v", got, cid)
		}
	}
	if m.Options.BootFileURL() != "" && !req.IsOptionRequested(dhcpv6.OptionBootfileURL) {
		return fmt.Errorf("boot file URL sent without being asked for")
	}
	return nil
}

// FuzzUnwrap checks that relay chains of any shape are bounded and never
// panic.
func FuzzUnwrap(f *testing.F) {
	inner := msg(f, dhcpv6.MessageTypeSolicit, duidUUID("x"), ipxeClient())
	var d dhcpv6.DHCPv6 = inner
	for range 3 {
		d, _ = dhcpv6.EncapsulateRelay(d, dhcpv6.MessageTypeRelayForward, nil, nil)
		f.Add(d.ToBytes())
	}
	f.Fuzz(func(t *testing.T, pkt []byte) {
		in, err := dhcpv6.FromBytes(pkt)
		if err != nil {
			return
		}
		m, src, err := Unwrap(in, netip.MustParseAddr("fd00::1"))
		if err != nil {
			return
		}
		if len(src.Relays) > MaxRelayHops || !clientType(m.MessageType) {
			t.Fatalf("Unwrap accepted %d relays around a %s", len(src.Relays), m.MessageType)
		}
	})
}
