package vmlab

import (
	"testing"

	"github.com/anvilmetal/anvil/netboot/stage"
)

// TestIPXEBootsOverDnsmasq proves the harness against a boot server
// nobody here wrote: SeaBIOS runs the NIC's iPXE ROM, which gets an
// address and the script URL from dnsmasq and fetches script, kernel and
// initramfs from the Go HTTP server in the namespace; the initramfs prints
// the marker.
func TestIPXEBootsOverDnsmasq(t *testing.T) {
	n := NewTestNetwork(t)
	RunNetbootScenario(t, n, Scenario{
		Firmware: BIOS,
		Expect:   []stage.Stage{stage.DHCPDiscover, stage.DHCPOffer, stage.DHCPAck, stage.Script, stage.Kernel, stage.Ramdisk},
	}, DnsmasqBootServer())
}
