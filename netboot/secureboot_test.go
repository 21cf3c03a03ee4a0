package netboot

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/netboot/dhcp"
	"github.com/anvilmetal/anvil/netboot/dhcp6"
)

// TestSecureBootChain: a SecureBoot configuration (pxe, uefi) sends UEFI
// PXE Debian's signed shim as shimx64.efi and serves the signed GRUB as
// grubx64.efi beside it (TFTP root, and boot/<mac>/ for DHCPv6's URL);
// other interfaces and BIOS refuse SecureBoot naming the field; a missing
// shim is a MissingFileError naming Options.Shim.
func TestSecureBootChain(t *testing.T) {
	ctx := context.Background()
	const mac = "52:54:00:ab:00:01"
	f := newFixture(t, func(o *Options) { o.TFTPServer6 = netip.MustParseAddr("fd00:a6::1") })
	c := f.ramdiskConfig("node-sb", PXE, UEFI, mac)
	c.SecureBoot = true
	f.put(t, c)
	d := f.srv.DecideBoot(ctx, dhcp.Client{MAC: mac, Arch: dhcp.ArchEFIx64, PXEClient: true})
	if d.BootFile != "shimx64.efi" || !d.NextServer.IsValid() {
		t.Errorf("UEFI PXE of a secure boot configuration got %q from %v, want shimx64.efi over TFTP", d.BootFile, d.NextServer)
	}
	d6 := f.srv.DecideBoot6(ctx, dhcp6.Client{MAC: mac, Arch: dhcp.ArchEFIx64})
	if d6.BootFileURL != "tftp://[fd00:a6::1]/boot/52-54-00-ab-00-01/shimx64.efi" {
		t.Errorf("DHCPv6 boot file URL %q, want the shim named for the MAC", d6.BootFileURL)
	}
	for name, want := range map[string]string{
		"shimx64.efi": "shimx64.efi.signed\n", "grubx64.efi": "grubnetx64.efi.signed\n",
		"boot/52-54-00-ab-00-01/grubx64.efi": "grubnetx64.efi.signed\n",
	} {
		got, err := readTFTP(t, f.srv, name)
		if err != nil || string(got) != want {
			t.Errorf("TFTP %s: %q, %v; want %q", name, got, err, want)
		}
	}

	for _, tc := range []struct {
		iface Interface
		mode  Mode
	}{{IPXE, UEFI}, {HTTP, UEFI}, {HTTPIPXE, UEFI}, {PXE, BIOS}} {
		bad := f.ramdiskConfig("node-2", tc.iface, tc.mode, "52:54:00:ab:00:02")
		bad.SecureBoot = true
		err := f.srv.PutConfig(ctx, bad)
		var inv *InvalidConfigError
		if !errors.As(err, &inv) || inv.Field != "secure_boot" || !strings.Contains(err.Error(), string(tc.iface)) {
			t.Errorf("SecureBoot with %s %s: %v, want an InvalidConfigError on secure_boot", tc.iface, tc.mode, err)
		}
	}

	m := newFixture(t, func(o *Options) { o.Shim = filepath.Join(t.TempDir(), "none.efi") })
	c.Node = "node-sb"
	err := m.srv.PutConfig(ctx, c)
	var missing *MissingFileError
	if !errors.As(err, &missing) || missing.Option != "Shim" || missing.Package != "shim-signed" {
		t.Errorf("secure boot configuration without the shim: %v, want a MissingFileError naming Options.Shim", err)
	}
}
