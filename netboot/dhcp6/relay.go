package dhcp6

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// MaxRelayHops bounds the Relay-Forward headers around a request
// (RFC 8415's HOP_COUNT_LIMIT).
const MaxRelayHops = 32

// Relay is one Relay-Forward header around a request.
type Relay struct {
	// LinkAddr is the relay's address on the client's link (may be
	// unspecified), PeerAddr the address it received the message from.
	LinkAddr, PeerAddr netip.Addr
	// ClientLinkLayer is the Ethernet address of the relay's Client
	// Link-Layer Address option (79), or nil.
	ClientLinkLayer net.HardwareAddr
	// InterfaceID is the relay's Interface-ID option (18), or nil.
	InterfaceID []byte
}

// Source is how a request reached the server.
type Source struct {
	// Peer is the packet's source address: a direct client's (normally
	// link-local) address, or the relay nearest the server.
	Peer netip.Addr
	// Relays are the Relay-Forward headers the request came in, nearest
	// the server first; none for a direct client.
	Relays []Relay
}

// Relayed reports whether the request came through relay agents.
func (s Source) Relayed() bool { return len(s.Relays) > 0 }

// nearestClient is the relay nearest the client (the last header), or
// nil.
func (s Source) nearestClient() *Relay {
	if len(s.Relays) == 0 {
		return nil
	}
	return &s.Relays[len(s.Relays)-1]
}

// ErrNotClientMessage is what Unwrap returns for a packet that is not a
// client's request (an Advertise, a Reply, a Relay-Reply, another
// server's message), or whose relay headers are malformed or too deep.
var ErrNotClientMessage = errors.New("dhcp6: not a client message")

// Unwrap takes the client's message out of pkt, which arrived from peer:
// the message itself for a direct client, or the innermost message of a
// Relay-Forward chain (at most MaxRelayHops deep), with the relays'
// addresses and options. Relay handling lives here and in Wrap, around
// Reply: Reply sees the client's message and its Source only.
func Unwrap(pkt dhcpv6.DHCPv6, peer netip.Addr) (*dhcpv6.Message, Source, error) {
	src := Source{Peer: peer.Unmap()}
	for hops := 0; ; hops++ {
		switch m := pkt.(type) {
		case *dhcpv6.Message:
			if !clientType(m.MessageType) {
				return nil, src, fmt.Errorf("%w: %s", ErrNotClientMessage, m.MessageType)
			}
			return m, src, nil
		case *dhcpv6.RelayMessage:
			if m.MessageType != dhcpv6.MessageTypeRelayForward {
				return nil, src, fmt.Errorf("%w: %s", ErrNotClientMessage, m.MessageType)
			}
			if hops >= MaxRelayHops {
				return nil, src, fmt.Errorf("%w: more than %d relay headers", ErrNotClientMessage, MaxRelayHops)
			}
			r := Relay{}
			r.LinkAddr, _ = netip.AddrFromSlice(m.LinkAddr)
			r.PeerAddr, _ = netip.AddrFromSlice(m.PeerAddr)
			if t, hw := m.Options.ClientLinkLayerAddress(); t == iana.HWTypeEthernet && len(hw) == 6 {
				r.ClientLinkLayer = hw
			}
			if id := m.Options.InterfaceID(); id != nil {
				r.InterfaceID = id
			}
			src.Relays = append(src.Relays, r)
			inner := m.Options.RelayMessage()
			if inner == nil {
				return nil, src, fmt.Errorf("%w: a Relay-Forward without a relayed message", ErrNotClientMessage)
			}
			pkt = inner
		default:
			return nil, src, fmt.Errorf("%w: %T", ErrNotClientMessage, pkt)
		}
	}
}

// Wrap is the answer to send for rep, the reply to the message Unwrap
// took out of pkt: rep itself to a direct client, or a Relay-Reply chain
// mirroring pkt's Relay-Forward headers (with their Interface-ID and
// Remote-ID options).
func Wrap(pkt dhcpv6.DHCPv6, rep *dhcpv6.Message) (dhcpv6.DHCPv6, error) {
	rf, ok := pkt.(*dhcpv6.RelayMessage)
	if !ok {
		return rep, nil
	}
	return dhcpv6.NewRelayReplFromRelayForw(rf, rep)
}

// clientType reports whether t is a message a client sends to servers.
func clientType(t dhcpv6.MessageType) bool {
	switch t {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeConfirm,
		dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind, dhcpv6.MessageTypeRelease,
		dhcpv6.MessageTypeDecline, dhcpv6.MessageTypeInformationRequest:
		return true
	}
	return false
}
