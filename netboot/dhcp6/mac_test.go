package dhcp6

import (
	"net/netip"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// TestClientMAC is ClientMAC's order as a table: relay option 79, then
// the relay's peer EUI-64, then a link-layer DUID, then (direct clients
// only) the link-local source's EUI-64; nothing else is guessed.
func TestClientMAC(t *testing.T) {
	global := netip.MustParseAddr("fd00:b7::99")
	privacy := netip.MustParseAddr("fe80::1c2d:3e4f:5a6b:7c8d") // no ff:fe: not EUI-64
	cases := []struct {
		name string
		duid dhcpv6.DUID
		src  Source
		want string
		from MACSource
	}{
		{"option 79 beats everything", duidLL(t, macB), Source{Peer: global, Relays: []Relay{
			{PeerAddr: linkLocal(t, macB), ClientLinkLayer: hw(t, macA)}}}, macA, MACFromRelayOption},
		{"the nearest relay's option counts", duidUUID("x"), Source{Peer: global, Relays: []Relay{
			{PeerAddr: global, ClientLinkLayer: hw(t, macB)}, {PeerAddr: global, ClientLinkLayer: hw(t, macA)}}}, macA, MACFromRelayOption},
		{"relay peer EUI-64 beats the DUID", duidLL(t, macB), Source{Peer: global, Relays: []Relay{{PeerAddr: linkLocal(t, macA)}}}, macA, MACFromRelayPeer},
		{"DUID-LL", duidLL(t, macA), Source{Peer: global, Relays: []Relay{{PeerAddr: global}}}, macA, MACFromDUID},
		{"DUID-LLT beats the link-local source", duidLLT(t, macA), direct(t, macB), macA, MACFromDUID},
		{"link-local EUI-64 of a direct client", duidUUID("x"), direct(t, macA), macA, MACFromLinkLocal},
		{"a relayed client's source is the relay's", duidUUID("x"), Source{Peer: linkLocal(t, macA), Relays: []Relay{{PeerAddr: global}}}, "", ""},
		{"a privacy link-local address", duidUUID("x"), Source{Peer: privacy}, "", ""},
		{"a global source address", duidUUID("x"), Source{Peer: global}, "", ""},
		{"DUID-EN", &dhcpv6.DUIDEN{EnterpriseNumber: 9, EnterpriseIdentifier: []byte{1, 2, 3}}, Source{Peer: global}, "", ""},
		{"no DUID", nil, Source{Peer: global}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := msg(t, dhcpv6.MessageTypeSolicit, tc.duid)
			mac, from := ClientMAC(m, tc.src)
			got := ""
			if mac != nil {
				got = mac.String()
			}
			if got != tc.want || from != tc.from {
				t.Errorf("ClientMAC = %q from %q, want %q from %q", got, from, tc.want, tc.from)
			}
		})
	}
}

// TestEUI64MAC checks the interface identifier decoding: the U/L bit
// flipped back, ff:fe required, group addresses refused.
func TestEUI64MAC(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"fe80::5054:ff:fe00:a", "52:54:00:00:00:0a"},
		{"fe80::ff:fe00:a", "02:00:00:00:00:0a"},
		{"fe80::0301:02ff:fe03:0405", ""}, // 01:01:02:03:04:05 is a group address
		{"fd00::5054:ff:fe00:a", ""},      // not link-local
		{"fe80::5054:ff:fd00:a", ""},
		{"192.0.2.1", ""},
	} {
		got := ""
		if m := eui64MAC(netip.MustParseAddr(tc.addr)); m != nil {
			got = m.String()
		}
		if got != tc.want {
			t.Errorf("eui64MAC(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}
