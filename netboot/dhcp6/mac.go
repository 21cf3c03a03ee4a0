package dhcp6

import (
	"net"
	"net/netip"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// ClientMAC finds the Ethernet address of the client that sent msg, which
// arrived as src says, in this order (the order of tinkerbell's smee): the
// Client Link-Layer Address option (79) of the relay nearest the client;
// the EUI-64 interface identifier of the client's link-local address as
// that relay saw it (its peer-address); a link-layer DUID (DUID-LL or
// DUID-LLT, Ethernet); for a direct client only, the EUI-64 interface
// identifier of its link-local source address. It returns nil when none
// of them yields one: the caller then ignores the request rather than
// guess (Server also looks the DUID up among those it learned).
func ClientMAC(msg *dhcpv6.Message, src Source) (net.HardwareAddr, MACSource) {
	if r := src.nearestClient(); r != nil {
		if len(r.ClientLinkLayer) == 6 {
			return r.ClientLinkLayer, MACFromRelayOption
		}
		if mac := eui64MAC(r.PeerAddr); mac != nil {
			return mac, MACFromRelayPeer
		}
	}
	if mac := duidMAC(msg.Options.ClientID()); mac != nil {
		return mac, MACFromDUID
	}
	if !src.Relayed() {
		if mac := eui64MAC(src.Peer); mac != nil {
			return mac, MACFromLinkLocal
		}
	}
	return nil, ""
}

// duidMAC is the Ethernet address of a DUID-LL or DUID-LLT, or nil.
func duidMAC(d dhcpv6.DUID) net.HardwareAddr {
	switch d := d.(type) {
	case *dhcpv6.DUIDLL:
		if d.HWType == iana.HWTypeEthernet && len(d.LinkLayerAddr) == 6 {
			return d.LinkLayerAddr
		}
	case *dhcpv6.DUIDLLT:
		if d.HWType == iana.HWTypeEthernet && len(d.LinkLayerAddr) == 6 {
			return d.LinkLayerAddr
		}
	}
	return nil
}

// eui64MAC is the MAC a link-local address's modified EUI-64 interface
// identifier (RFC 4291 appendix A) was made from, or nil for any other
// address (a global one, a privacy or stable-privacy link-local one).
func eui64MAC(a netip.Addr) net.HardwareAddr {
	a = a.Unmap()
	if !a.Is6() || !a.IsLinkLocalUnicast() {
		return nil
	}
	b := a.As16()
	if b[11] != 0xff || b[12] != 0xfe {
		return nil
	}
	mac := net.HardwareAddr{b[8] ^ 0x02, b[9], b[10], b[13], b[14], b[15]}
	if mac[0]&0x01 != 0 {
		return nil // a group address is nobody's NIC
	}
	return mac
}
