package vmlab

import (
	"context"
	"fmt"
	"net"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// startRouterAdvertiser sends an IPv6 router advertisement on the bridge
// every second: no prefix, router lifetime 0 (not a default router), no DHCPv6
// flags. It tells a client that there is nothing to configure over IPv6,
// so iPXE ends its network configuration when DHCPv4 is done, instead of
// waiting 15-20 s for a router that never answers. It sends only to the
// all-nodes group on the bridge, inside the namespace.
func (n *Network) startRouterAdvertiser() (stop func(), err error) {
	iface, err := n.bridgeInterface()
	if err != nil {
		return nil, err
	}
	var conn *icmp.PacketConn
	if err := n.Do(func() error {
		var err error
		conn, err = icmp.ListenPacket("ip6:ipv6-icmp", "::")
		return err
	}); err != nil {
		return nil, fmt.Errorf("vmlab: router advertisements: %w", err)
	}
	pc := conn.IPv6PacketConn()
	if err := pc.SetMulticastHopLimit(255); err != nil {
		conn.Close()
		return nil, err
	}
	if err := pc.SetMulticastInterface(iface); err != nil {
		conn.Close()
		return nil, err
	}
	body := []byte{
		64, 0, // current hop limit, flags (no M, no O)
		0, 0, // router lifetime 0: not a default router
		0, 0, 0, 0, // reachable time
		0, 0, 0, 0, // retransmission timer
		1, 1, // option: source link-layer address, 8 bytes
	}
	body = append(body, iface.HardwareAddr...)
	msg := icmp.Message{Type: ipv6.ICMPTypeRouterAdvertisement, Body: &icmp.RawBody{Data: body}}
	wire, err := msg.Marshal(nil) // the kernel fills in the ICMPv6 checksum
	if err != nil {
		conn.Close()
		return nil, err
	}
	dst := &net.IPAddr{IP: net.ParseIP("ff02::1"), Zone: iface.Name}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			// Fails until the bridge has a link-local address (a port
			// with carrier): the next tick tries again.
			_, _ = conn.WriteTo(wire, dst)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		conn.Close()
	}, nil
}

func (n *Network) bridgeInterface() (*net.Interface, error) {
	var iface *net.Interface
	err := n.Do(func() error {
		var err error
		iface, err = net.InterfaceByName(BridgeName)
		return err
	})
	return iface, err
}
