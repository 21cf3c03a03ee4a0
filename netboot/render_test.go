package netboot

import (
	"testing"
	"time"
)

// TestGoldenScripts pins every script and configuration the server
// generates, per interface, boot mode and action: the golden files under
// testdata/ are the templates' specification (go test -update rewrites
// them).
func TestGoldenScripts(t *testing.T) {
	f := newFixture(t, func(o *Options) {
		o.Fallback = &Fallback{
			Kernel: "http://192.0.2.1:8080/images/ipa.kernel", Ramdisk: "http://192.0.2.1:8080/images/ipa.initramfs",
			Params: []string{"ipa-inspection-callback-url=http://192.0.2.1:5050/v1/continue", "ipa-collect-lldp=1"},
		}
	})
	const mac = "52:54:00:12:34:56"
	s := f.srv
	ramdisk := func(iface Interface, mode Mode) Config {
		c := f.ramdiskConfig("node-1", iface, mode, mac)
		return c
	}
	local := func(iface Interface, mode Mode) Config {
		return Config{Node: "node-1", MACs: []string{mac}, Interface: iface, Mode: mode, Action: LocalDisk}
	}
	urls := ramdisk(IPXE, UEFI)
	urls.Kernel = "https://images.example/ipa.kernel?temp_url_sig=ab12&temp_url_expires=1700000000"
	urls.Ramdisk = "https://images.example/ipa.initramfs"
	urls.IPXETimeout = 90 * time.Second
	urls.Purpose = "inspect"
	cfg := func(c Config) plan { return plan{kind: planConfig, cfg: c, node: c.Node} }

	cases := []struct {
		name string
		got  []byte
	}{
		{"ipxe-ramdisk-bios.ipxe", s.script(mac, cfg(ramdisk(IPXE, BIOS)))},
		{"ipxe-ramdisk-uefi.ipxe", s.script(mac, cfg(ramdisk(IPXE, UEFI)))},
		{"ipxe-ramdisk-uefi-urls-timeout.ipxe", s.script(mac, cfg(urls))},
		{"http-ipxe-ramdisk-uefi.ipxe", s.script(mac, cfg(ramdisk(HTTPIPXE, UEFI)))},
		{"ipxe-local-bios.ipxe", s.script(mac, cfg(local(IPXE, BIOS)))},
		{"ipxe-local-uefi.ipxe", s.script(mac, cfg(local(IPXE, UEFI)))},
		{"enrolled-local.ipxe", s.script(mac, plan{kind: planLocal, node: "node-1"})},
		{"fallback.ipxe", s.script(mac, plan{kind: planFallback})},
		{"generic-boot.ipxe", s.genericScript()},
		{"pxelinux-ramdisk-bios.cfg", pxelinuxConfig(ramdisk(PXE, BIOS), mac)},
		{"pxelinux-local-bios.cfg", pxelinuxConfig(local(PXE, BIOS), mac)},
		{"grub-ramdisk-uefi.cfg", grubConfig(ramdisk(PXE, UEFI), mac)},
		{"grub-local-uefi.cfg", grubConfig(local(HTTP, UEFI), mac)},
		{"grub-master.cfg", grubMaster()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.got) == 0 {
				t.Fatal("nothing generated")
			}
			golden(t, tc.name, tc.got)
		})
	}
}
