package dhcp

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// FuzzReply feeds raw packets through dhcpv4.FromBytes and Reply, in
// both modes and on both ports: no panic, and every answer is a bounded,
// well-formed reply to the request.
func FuzzReply(f *testing.F) {
	seeds := []*dhcpv4.DHCPv4{
		msg(f, dhcpv4.MessageTypeDiscover, macA, pxeBIOS()),
		msg(f, dhcpv4.MessageTypeDiscover, macA, pxeEFI()),
		msg(f, dhcpv4.MessageTypeDiscover, macA, ipxeClient()),
		msg(f, dhcpv4.MessageTypeDiscover, macA, httpClient()),
		msg(f, dhcpv4.MessageTypeDiscover, macReserve),
		msg(f, dhcpv4.MessageTypeRequest, macA, pxeBIOS(), serverID("192.0.2.1"), requested("192.0.2.100")),
		msg(f, dhcpv4.MessageTypeRequest, macA, requested("192.0.2.101")),
		msg(f, dhcpv4.MessageTypeRequest, macA, pxeEFI(), dhcpv4.WithClientIP(net.ParseIP("192.0.2.100"))),
		msg(f, dhcpv4.MessageTypeDecline, macA, requested("192.0.2.100")),
		msg(f, dhcpv4.MessageTypeRelease, macA, dhcpv4.WithClientIP(net.ParseIP("192.0.2.100"))),
		msg(f, dhcpv4.MessageTypeInform, macA, dhcpv4.WithClientIP(net.ParseIP("192.0.2.7"))),
		msg(f, dhcpv4.MessageTypeDiscover, macA, dhcpv4.WithRelay(net.ParseIP("192.0.2.254")),
			dhcpv4.WithOption(dhcpv4.OptMaxMessageSize(1500)), dhcpv4.WithUserClass("iPXE", true)),
	}
	for _, s := range seeds {
		f.Add(s.ToBytes())
	}
	f.Add([]byte{})
	f.Add([]byte{1, 1, 6, 0})
	auth, _, _ := newTestServer(f, Authoritative)
	proxy, _, _ := newTestServer(f, Proxy)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		if len(pkt) > DefaultMaxPacketSize {
			return // ServeConn drops these before parsing
		}
		req, err := dhcpv4.FromBytes(pkt)
		if err != nil {
			return
		}
		for _, s := range []*Server{auth, proxy} {
			for _, ctx := range []context.Context{context.Background(), OnPXEPort(context.Background())} {
				rep, err := s.Reply(ctx, req)
				if rep == nil {
					continue
				}
				if err != nil {
					t.Fatalf("answer with an error: %v", err)
				}
				if err := checkAnswer(req, rep); err != nil {
					t.Fatalf("%s mode: %v\nrequest:\n%s\nanswer:\n%s", s.opts.Mode, err, req.Summary(), render(rep))
				}
			}
		}
	})
}

func checkAnswer(req, rep *dhcpv4.DHCPv4) error {
	b := rep.ToBytes()
	if len(b) > DefaultMaxPacketSize {
		return fmt.Errorf("answer of %d bytes", len(b))
	}
	back, err := dhcpv4.FromBytes(b)
	if err != nil {
		return fmt.Errorf("answer does not parse: %v", err)
	}
	if back.OpCode != dhcpv4.OpcodeBootReply || back.TransactionID != req.TransactionID {
		return fmt.Errorf("answer op %v xid %v for xid %v", back.OpCode, back.TransactionID, req.TransactionID)
	}
	switch back.MessageType() {
	case dhcpv4.MessageTypeOffer, dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak:
	default:
		return fmt.Errorf("answer type %v", back.MessageType())
	}
	if !back.ServerIdentifier().Equal(net.ParseIP("192.0.2.1")) {
		return fmt.Errorf("server identifier %v", back.ServerIdentifier())
	}
	return nil
}

// FuzzParseVendorClass checks the vendor class parser never panics and
// only reports an architecture it read as five digits.
func FuzzParseVendorClass(f *testing.F) {
	for _, s := range []string{"PXEClient:Arch:00007:UNDI:003016", "HTTPClient:Arch:00016:UNDI:003001",
		"PXEClient", "PXEClient:Arch:", "MSFT 5.0", "PXEClient:Arch:99999:UNDI:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := ParseVendorClass(s)
		if v.PXEClient && v.HTTPClient {
			t.Fatalf("%q is both PXE and HTTP", s)
		}
		if (v.PXEClient || v.HTTPClient) != (strings.HasPrefix(s, vendorPXE) || strings.HasPrefix(s, vendorHTTP)) {
			t.Fatalf("%q: %+v", s, v)
		}
		if v.HasArch && !strings.Contains(s, fmt.Sprintf("Arch:%05d", v.Arch)) {
			t.Fatalf("%q: arch %d not in the string", s, v.Arch)
		}
		if v.UNDI != "" && !strings.Contains(s, "UNDI:"+v.UNDI) {
			t.Fatalf("%q: UNDI %q not in the string", s, v.UNDI)
		}
	})
}

// FuzzUserClasses checks option 77 parsing never panics and keeps every
// byte it was given.
func FuzzUserClasses(f *testing.F) {
	f.Add([]byte("iPXE"))
	f.Add([]byte("\x04iPXE\x03foo"))
	f.Add([]byte("\x00"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := userClasses(raw)
		n := 0
		for _, s := range got {
			n += len(s)
		}
		if len(raw) > 0 && n != len(raw) && n != len(raw)-len(got) {
			t.Fatalf("userClasses(%q) = %q loses bytes", raw, got)
		}
	})
}
