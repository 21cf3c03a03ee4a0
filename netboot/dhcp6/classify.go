package dhcp6

import (
	"encoding/hex"
	"fmt"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/anvilmetal/anvil/internal/macaddr"
	"github.com/anvilmetal/anvil/netboot/dhcp"
)

// Classify says what the server can learn about a client from msg,
// which arrived as src says: it never fails, a field it cannot read
// stays zero (MAC too, when ClientMAC finds none).
func Classify(msg *dhcpv6.Message, src Source) Client {
	c := Client{Relayed: src.Relayed()}
	if r := src.nearestClient(); r != nil && !r.LinkAddr.IsUnspecified() {
		c.Link = r.LinkAddr
	}
	if mac, from := ClientMAC(msg, src); mac != nil {
		c.MAC, c.MACFrom = mac.String(), from
	}
	if d := msg.Options.ClientID(); d != nil {
		c.DUID = hex.EncodeToString(d.ToBytes())
	}
	for _, u := range msg.Options.UserClasses() {
		c.UserClass = append(c.UserClass, string(u))
		if string(u) == "iPXE" {
			c.IPXE = true
		}
	}
	// The vendor class's data: PXE and HTTP boot firmware send one
	// string, "PXEClient:Arch:00007:UNDI:003016" or "HTTPClient:...",
	// as in DHCPv4 (under enterprise number 343), and so does iPXE.
	var vc dhcp.VendorClass
	for _, o := range msg.Options.VendorClasses() {
		if len(o.Data) > 0 {
			c.VendorClass = string(o.Data[0])
			vc = dhcp.ParseVendorClass(c.VendorClass)
			break
		}
	}
	c.PXEClient, c.HTTPClient = vc.PXEClient, vc.HTTPClient
	if archs := msg.Options.ArchTypes(); len(archs) > 0 {
		// The first is the one the firmware is running.
		c.Arch = dhcp.ArchFromCode(uint16(archs[0]))
	} else if vc.HasArch {
		c.Arch = dhcp.ArchFromCode(vc.Arch)
	}
	c.WantsBootFileURL = msg.IsOptionRequested(dhcpv6.OptionBootfileURL)
	return c
}

// parseMAC parses a MAC by Ironic's rule (internal/macaddr) into
// Client.MAC's form.
func parseMAC(s string) (string, error) {
	mac, ok := macaddr.Parse(s)
	if !ok {
		return "", fmt.Errorf("dhcp6: %q is not an Ethernet (6-byte) MAC address", s)
	}
	return mac, nil
}
