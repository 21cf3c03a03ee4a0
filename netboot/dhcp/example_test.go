package dhcp_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/anvilmetal/anvil/netboot/dhcp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// Reply answers a UEFI PXE client's DISCOVER with an address from the
// pool and the boot file a DeciderFunc picks by architecture.
func ExampleServer_Reply() {
	decide := dhcp.DeciderFunc(func(_ context.Context, c dhcp.Client) dhcp.Decision {
		switch {
		case c.IPXE:
			return dhcp.Decision{Node: "node-1", BootFile: "http://192.0.2.1:8080/boot.ipxe"}
		case c.Arch == dhcp.ArchBIOS:
			return dhcp.Decision{Node: "node-1", BootFile: "undionly.kpxe"}
		case c.Arch.UEFI():
			return dhcp.Decision{Node: "node-1", BootFile: "snponly.efi"}
		}
		return dhcp.Decision{}
	})
	srv, err := dhcp.New(dhcp.Options{
		Mode:      dhcp.Authoritative,
		ServerIP:  netip.MustParseAddr("192.0.2.1"),
		Subnet:    netip.MustParsePrefix("192.0.2.0/24"),
		PoolStart: netip.MustParseAddr("192.0.2.100"),
		PoolEnd:   netip.MustParseAddr("192.0.2.199"),
		Decider:   decide,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	mac := []byte{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}
	discover, _ := dhcpv4.NewDiscovery(mac,
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003016")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)))
	offer, err := srv.Reply(context.Background(), discover)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(offer.MessageType(), offer.YourIPAddr, offer.ServerIPAddr, offer.BootFileName)
	// Output: OFFER 192.0.2.100 192.0.2.1 snponly.efi
}

// New names the field it refuses.
func ExampleNew() {
	_, err := dhcp.New(dhcp.Options{
		Mode:      dhcp.Authoritative,
		ServerIP:  netip.MustParseAddr("192.0.2.1"),
		Subnet:    netip.MustParsePrefix("192.0.2.0/24"),
		PoolStart: netip.MustParseAddr("192.0.2.200"),
		PoolEnd:   netip.MustParseAddr("192.0.2.100"),
		Decider:   dhcp.DeciderFunc(func(context.Context, dhcp.Client) dhcp.Decision { return dhcp.Decision{} }),
	})
	fmt.Println(err)
	// Output: dhcp: Options.PoolEnd: 192.0.2.100 is before PoolStart 192.0.2.200
}
