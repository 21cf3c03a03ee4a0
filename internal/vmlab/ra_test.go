package vmlab

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// TestRouterAdvertisements listens on a veth port of the bridge (inside
// the namespace) for the advertisement: from the bridge, nothing to
// configure, the bridge's MAC as source link-layer address.
func TestRouterAdvertisements(t *testing.T) {
	n := NewTestNetworkWith(t, NetworkOptions{RouterAdvertisements: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range [][]string{
		{"link", "add", "ra0", "type", "veth", "peer", "name", "ra1"},
		{"link", "set", "ra0", "master", BridgeName},
		{"link", "set", "ra0", "up"},
		{"link", "set", "ra1", "up"},
	} {
		if err := run(ctx, "ip", append([]string{"-n", n.Name()}, s...)...); err != nil {
			t.Fatal(err)
		}
	}
	bridge, err := n.bridgeInterface()
	if err != nil {
		t.Fatal(err)
	}
	var port *net.Interface
	var conn *icmp.PacketConn
	if err := n.Do(func() error {
		var err error
		if port, err = net.InterfaceByName("ra1"); err != nil {
			return err
		}
		conn, err = icmp.ListenPacket("ip6:ipv6-icmp", "::")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pc := conn.IPv6PacketConn()
	if err := pc.SetControlMessage(ipv6.FlagInterface, true); err != nil {
		t.Fatal(err)
	}
	_ = pc.SetReadDeadline(time.Now().Add(15 * time.Second))
	buf := make([]byte, 1500)
	for {
		nr, cm, _, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatalf("no router advertisement on the bridge's port: %v", err)
		}
		if cm == nil || cm.IfIndex != port.Index {
			continue // the bridge's own copy, or another interface
		}
		m, err := icmp.ParseMessage(58, buf[:nr])
		if err != nil || m.Type != ipv6.ICMPTypeRouterAdvertisement {
			continue
		}
		body := m.Body.(*icmp.RawBody).Data
		if len(body) != 12+8 {
			t.Fatalf("advertisement body %x: want 12 bytes and one 8-byte option", body)
		}
		if lifetime := int(body[2])<<8 | int(body[3]); lifetime != 0 || body[1] != 0 {
			t.Errorf("router lifetime %d, flags %#x: want 0 and 0", lifetime, body[1])
		}
		if body[12] != 1 || body[13] != 1 || !bytes.Equal(body[14:20], bridge.HardwareAddr) {
			t.Errorf("source link-layer option %x: want the bridge's %s", body[12:], bridge.HardwareAddr)
		}
		return
	}
}
