package dhcp6

import (
	"context"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestReplyGolden runs each message type in each mode for each kind of
// client, direct and relayed, and compares the answer (or its absence),
// wrapped as it goes on the wire, with testdata/reply/<name>.golden.
func TestReplyGolden(t *testing.T) {
	type req func(t *testing.T) (dhcpv6.DHCPv6, netip.Addr)
	// Direct requests come from the client's EUI-64 link-local address.
	at := func(mac string, m func(t *testing.T) *dhcpv6.Message) req {
		return func(t *testing.T) (dhcpv6.DHCPv6, netip.Addr) { return m(t), linkLocal(t, mac).WithZone("eth0") }
	}
	// Relayed ones come from the relay's address.
	via := func(peer func(t *testing.T) netip.Addr, lla string, m func(t *testing.T) *dhcpv6.Message) req {
		return func(t *testing.T) (dhcpv6.DHCPv6, netip.Addr) {
			return relayed(t, m(t), peer(t), lla), netip.MustParseAddr("fd00:a6::fe")
		}
	}
	peerLL := func(mac string) func(t *testing.T) netip.Addr {
		return func(t *testing.T) netip.Addr { return linkLocal(t, mac) }
	}
	peerGlobal := func(*testing.T) netip.Addr { return netip.MustParseAddr("fd00:b7::99") }
	solicit := func(d func(t *testing.T) dhcpv6.DUID, mods ...dhcpv6.Modifier) func(t *testing.T) *dhcpv6.Message {
		return func(t *testing.T) *dhcpv6.Message { return msg(t, dhcpv6.MessageTypeSolicit, d(t), mods...) }
	}
	of := func(mt dhcpv6.MessageType, d func(t *testing.T) dhcpv6.DUID, mods ...dhcpv6.Modifier) func(t *testing.T) *dhcpv6.Message {
		return func(t *testing.T) *dhcpv6.Message { return msg(t, mt, d(t), mods...) }
	}
	ll := func(mac string) func(t *testing.T) dhcpv6.DUID {
		return func(t *testing.T) dhcpv6.DUID { return duidLL(t, mac) }
	}
	llt := func(mac string) func(t *testing.T) dhcpv6.DUID {
		return func(t *testing.T) dhcpv6.DUID { return duidLLT(t, mac) }
	}
	uu := func(name string) func(t *testing.T) dhcpv6.DUID {
		return func(*testing.T) dhcpv6.DUID { return duidUUID(name) }
	}
	us := withServerID(serverDUID)
	other := withServerID(duidUUID("another server"))
	cases := []struct {
		name string
		mode Mode
		prep []req // sent first, answers discarded
		req  req
	}{
		{name: "stateful-solicit-ipxe", mode: Stateful, req: at(macA, solicit(uu("ipxe"), ipxeClient()))},
		{name: "stateful-solicit-efi", mode: Stateful, req: at(macA, solicit(llt(macA), pxeEFI()))},
		{name: "stateful-solicit-http", mode: Stateful, req: at(macA, solicit(uu("ovmf"), httpClient()))},
		{name: "stateful-solicit-no-oro", mode: Stateful, req: at(macA, solicit(llt(macA), oro(dhcpv6.OptionDNSRecursiveNameServer)))},
		{name: "stateful-solicit-no-boot-file", mode: Stateful, req: at(macNoBoot, solicit(ll(macNoBoot), pxeEFI()))},
		{name: "stateful-solicit-reserved", mode: Stateful, req: at(macReserve, solicit(ll(macReserve), pxeEFI()))},
		{name: "stateful-solicit-ignored", mode: Stateful, req: at(macIgnored, solicit(ll(macIgnored), pxeEFI()))},
		{name: "stateful-solicit-rapid-commit", mode: Stateful, req: at(macA, solicit(llt(macA), oro(dhcpv6.OptionDNSRecursiveNameServer), dhcpv6.WithRapidCommit))},
		{name: "stateful-solicit-other-server", mode: Stateful, req: at(macA, solicit(llt(macA), pxeEFI(), other))},
		{name: "stateful-solicit-relayed-option-79", mode: Stateful, req: via(peerGlobal, macA, solicit(uu("ipxe"), ipxeClient()))},
		{name: "stateful-solicit-relayed-peer-eui64", mode: Stateful, req: via(peerLL(macB), "", solicit(uu("ipxe"), ipxeClient()))},
		{name: "stateful-solicit-relayed-no-mac", mode: Stateful, req: via(peerGlobal, "", solicit(uu("ipxe"), ipxeClient()))},
		{name: "stateful-solicit-relayed-learned", mode: Stateful,
			prep: []req{at(macB, solicit(uu("ipxe-b"), ipxeClient()))},
			req:  via(peerGlobal, "", solicit(uu("ipxe-b"), ipxeClient()))},
		{name: "stateful-request", mode: Stateful,
			prep: []req{at(macA, solicit(uu("ipxe"), ipxeClient()))},
			req:  at(macA, of(dhcpv6.MessageTypeRequest, uu("ipxe"), ipxeClient(), us))},
		{name: "stateful-request-other-server", mode: Stateful,
			prep: []req{at(macA, solicit(uu("ipxe"), ipxeClient()))},
			req:  at(macA, of(dhcpv6.MessageTypeRequest, uu("ipxe"), ipxeClient(), other))},
		{name: "stateful-request-no-server-id", mode: Stateful,
			req: at(macA, of(dhcpv6.MessageTypeRequest, uu("ipxe"), ipxeClient()))},
		{name: "stateful-renew", mode: Stateful,
			prep: []req{at(macA, solicit(llt(macA))), at(macA, of(dhcpv6.MessageTypeRequest, llt(macA), us))},
			req:  at(macA, of(dhcpv6.MessageTypeRenew, llt(macA), us, withAddr("fd00:a6::100")))},
		{name: "stateful-renew-no-binding", mode: Stateful,
			prep: []req{at(macB, solicit(llt(macB))), at(macB, of(dhcpv6.MessageTypeRequest, llt(macB), us))},
			req:  at(macA, of(dhcpv6.MessageTypeRenew, llt(macA), us, withAddr("fd00:a6::100")))},
		{name: "stateful-rebind-after-restart", mode: Stateful,
			req: at(macA, of(dhcpv6.MessageTypeRebind, llt(macA), withAddr("fd00:a6::102")))},
		{name: "stateful-rebind-off-link", mode: Stateful,
			req: at(macA, of(dhcpv6.MessageTypeRebind, llt(macA), withAddr("fd00:b7::5")))},
		{name: "stateful-confirm-on-link", mode: Stateful,
			req: at(macA, of(dhcpv6.MessageTypeConfirm, llt(macA), withAddr("fd00:a6::100")))},
		{name: "stateful-confirm-off-link", mode: Stateful,
			req: at(macA, of(dhcpv6.MessageTypeConfirm, llt(macA), withAddr("fd00:b7::5")))},
		{name: "stateful-release", mode: Stateful,
			prep: []req{at(macA, solicit(llt(macA))), at(macA, of(dhcpv6.MessageTypeRequest, llt(macA), us))},
			req:  at(macA, of(dhcpv6.MessageTypeRelease, llt(macA), us, withAddr("fd00:a6::100")))},
		{name: "stateful-decline", mode: Stateful,
			prep: []req{at(macA, solicit(llt(macA))), at(macA, of(dhcpv6.MessageTypeRequest, llt(macA), us))},
			req:  at(macA, of(dhcpv6.MessageTypeDecline, llt(macA), us, withAddr("fd00:a6::100")))},
		{name: "stateful-information-request", mode: Stateful,
			req: at(macA, of(dhcpv6.MessageTypeInformationRequest, uu("ipxe"), ipxeClient()))},
		{name: "proxy-solicit-efi", mode: Proxy, req: at(macA, solicit(llt(macA), pxeEFI()))},
		{name: "proxy-solicit-http", mode: Proxy, req: at(macA, solicit(uu("ovmf"), httpClient()))},
		{name: "proxy-solicit-ipxe", mode: Proxy, req: at(macA, solicit(uu("ipxe"), ipxeClient()))},
		{name: "proxy-solicit-not-pxe", mode: Proxy, req: at(macA, solicit(llt(macA), oro(dhcpv6.OptionDNSRecursiveNameServer)))},
		{name: "proxy-solicit-ignored", mode: Proxy, req: at(macIgnored, solicit(ll(macIgnored), pxeEFI()))},
		{name: "proxy-solicit-no-boot-file", mode: Proxy, req: at(macNoBoot, solicit(ll(macNoBoot), pxeEFI()))},
		{name: "proxy-solicit-relayed", mode: Proxy, req: via(peerGlobal, macA, solicit(uu("ovmf"), httpClient()))},
		{name: "proxy-request-names-us", mode: Proxy, req: at(macA, of(dhcpv6.MessageTypeRequest, llt(macA), pxeEFI(), us))},
		{name: "proxy-request-other-server", mode: Proxy, req: at(macA, of(dhcpv6.MessageTypeRequest, llt(macA), pxeEFI(), other))},
		{name: "proxy-information-request", mode: Proxy, req: at(macA, of(dhcpv6.MessageTypeInformationRequest, uu("ipxe"), ipxeClient()))},
		{name: "proxy-renew", mode: Proxy, req: at(macA, of(dhcpv6.MessageTypeRenew, llt(macA), pxeEFI(), us, withAddr("fd00:a6::100")))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newTestServer(t, tc.mode)
			ctx := context.Background()
			all := append(tc.prep, tc.req)
			for i, p := range all {
				pkt, from := p(t)
				// Through the wire format, as ServeConn sees it.
				back, err := dhcpv6.FromBytes(pkt.ToBytes())
				if err != nil {
					t.Fatal(err)
				}
				m, src, err := Unwrap(back, from)
				if err != nil {
					t.Fatalf("Unwrap: %v", err)
				}
				rep, err := s.Reply(ctx, m, src)
				if err != nil {
					t.Fatalf("Reply: %v", err)
				}
				var out dhcpv6.DHCPv6
				if rep != nil {
					if out, err = Wrap(back, rep); err != nil {
						t.Fatalf("Wrap: %v", err)
					}
				}
				got := render(out)
				if out != nil {
					// What goes on the wire reads back the same.
					again, err := dhcpv6.FromBytes(out.ToBytes())
					if err != nil {
						t.Fatalf("the answer does not parse: %v", err)
					}
					if r := render(again); r != got {
						t.Fatalf("the answer reads back differently:\n%s---\n%s", got, r)
					}
				}
				if i == len(all)-1 {
					golden(t, filepath.Join("testdata", "reply", tc.name+".golden"), got)
				}
			}
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to rewrite it)\n--- got\n%s--- want\n%s", path, got, want)
	}
}
