package vmlab

import (
	"testing"

	"github.com/anvilmetal/anvil/netboot/stage"
)

func TestParseDnsmasqLine(t *testing.T) {
	const mac = "52:54:00:a0:00:01"
	for _, tc := range []struct {
		line  string
		ok    bool
		stage stage.Stage
		addr  string
		file  string
	}{
		{"dnsmasq-dhcp[9]: DHCPDISCOVER(br0) 52:54:00:a0:00:01", true, stage.DHCPDiscover, "", ""},
		{"dnsmasq-dhcp[9]: DHCPOFFER(br0) 192.0.2.103 52:54:00:a0:00:01", true, stage.DHCPOffer, "192.0.2.103", ""},
		{"dnsmasq-dhcp[9]: DHCPACK(br0) 192.0.2.103 52:54:00:a0:00:01", true, stage.DHCPAck, "192.0.2.103", ""},
		{"dnsmasq-dhcp[9]: DHCPREQUEST(br0) 192.0.2.103 52:54:00:a0:00:01", false, "", "", ""},
		{"dnsmasq-dhcp[9]: DHCPACK(br0) 192.0.2.104 52:54:00:a0:00:02", false, "", "", ""}, // another machine
		{"dnsmasq-tftp[9]: sent /tmp/x/tftp/snponly.efi to 192.0.2.103", true, stage.TFTPSent, "192.0.2.103", "snponly.efi"},
		{"dnsmasq-dhcp[9]: 1234 vendor class: PXEClient:Arch:00007", false, "", "", ""},
	} {
		r, ok := parseDnsmasqLine(tc.line, mac, "/tmp/x/tftp")
		if ok != tc.ok || r.Stage != tc.stage || r.Addr != tc.addr || r.File != tc.file {
			t.Errorf("parseDnsmasqLine(%q) = %+v, %v", tc.line, r, ok)
		}
	}
}

func TestMissingInOrder(t *testing.T) {
	recs := []stage.Record{{Stage: stage.DHCPOffer}, {Stage: stage.DHCPAck}, {Stage: stage.Script}, {Stage: stage.Kernel}}
	for _, tc := range []struct {
		want    []stage.Stage
		missing string
	}{
		{nil, ""},
		{[]stage.Stage{stage.DHCPAck, stage.Kernel}, ""},
		{[]stage.Stage{stage.Kernel, stage.Script}, `"boot script"`},
		{[]stage.Stage{stage.Ramdisk}, `"ramdisk"`},
	} {
		if got := missingInOrder(recs, tc.want); got != tc.missing {
			t.Errorf("missingInOrder(%v) = %q, want %q", tc.want, got, tc.missing)
		}
	}
}
