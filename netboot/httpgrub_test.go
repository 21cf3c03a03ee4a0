package netboot

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/netboot/dhcp"
)

// TestHTTPGRUB: with Options.HTTPGRUB, UEFI HTTP boot of a GRUB
// interface gets grub/grubhttpx64.efi and the Handler serves that file,
// while UEFI PXE keeps Options.GRUB over TFTP; without it, HTTP boot gets
// GRUB and grubhttpx64.efi is not served; a missing HTTPGRUB refuses the
// http configuration, naming the option.
func TestHTTPGRUB(t *testing.T) {
	ctx := context.Background()
	const httpMAC, pxeMAC = "52:54:00:aa:01:01", "52:54:00:aa:01:02"
	httpBoot := dhcp.Client{MAC: httpMAC, Arch: dhcp.ArchEFIx64HTTP, HTTPClient: true}
	pxeBoot := dhcp.Client{MAC: pxeMAC, Arch: dhcp.ArchEFIx64, PXEClient: true}

	var grubHTTP string
	f := newFixture(t, func(o *Options) {
		grubHTTP = filepath.Join(filepath.Dir(o.GRUB), "grubhttpx64.efi")
		writeFile(t, grubHTTP, []byte("the HTTP boot GRUB\n"))
		o.HTTPGRUB = grubHTTP
	})
	f.put(t, f.ramdiskConfig("node-http", HTTP, UEFI, httpMAC))
	f.put(t, f.ramdiskConfig("node-pxe", PXE, UEFI, pxeMAC))
	if d := f.srv.DecideBoot(ctx, httpBoot); d.BootFile != "http://192.0.2.1:8080/grub/grubhttpx64.efi" {
		t.Errorf("UEFI HTTP boot of interface http got %q, want the HTTP boot GRUB's URL", d.BootFile)
	}
	if d := f.srv.DecideBoot(ctx, pxeBoot); d.BootFile != "grubnetx64.efi" || !d.NextServer.IsValid() {
		t.Errorf("UEFI PXE of interface pxe got %q from %v, want grubnetx64.efi over TFTP", d.BootFile, d.NextServer)
	}
	h := f.srv.Handler()
	if w := get(t, h, http.MethodGet, "/grub/grubhttpx64.efi"); w.Code != http.StatusOK || w.Body.String() != "the HTTP boot GRUB\n" {
		t.Errorf("GET /grub/grubhttpx64.efi: %d %q, want Options.HTTPGRUB's content", w.Code, w.Body.String())
	}
	if w := get(t, h, http.MethodGet, "/grub/grubnetx64.efi"); w.Code != http.StatusOK || w.Body.String() != "grubnetx64.efi\n" {
		t.Errorf("GET /grub/grubnetx64.efi: %d %q, want Options.GRUB's content", w.Code, w.Body.String())
	}
	// The master configuration reads the NIC GRUB's own DHCP configured.
	w := get(t, h, http.MethodGet, "/grub/grub.cfg")
	if !strings.Contains(w.Body.String(), "configfile /boot/${net_efinet0_dhcp_mac}/grub.cfg") {
		t.Errorf("grub/grub.cfg does not read efinet0's configuration:\n%s", w.Body.String())
	}

	g := newFixture(t, nil)
	g.put(t, g.ramdiskConfig("node-http", HTTP, UEFI, httpMAC))
	if d := g.srv.DecideBoot(ctx, httpBoot); d.BootFile != "http://192.0.2.1:8080/grub/grubnetx64.efi" {
		t.Errorf("without HTTPGRUB, UEFI HTTP boot got %q, want Options.GRUB's URL", d.BootFile)
	}
	if w := get(t, g.srv.Handler(), http.MethodGet, "/grub/grubhttpx64.efi"); w.Code != http.StatusNotFound {
		t.Errorf("without HTTPGRUB, GET /grub/grubhttpx64.efi: %d, want 404", w.Code)
	}

	m := newFixture(t, func(o *Options) { o.HTTPGRUB = filepath.Join(t.TempDir(), "none.efi") })
	err := m.srv.PutConfig(ctx, m.ramdiskConfig("node-http", HTTP, UEFI, httpMAC))
	var missing *MissingFileError
	if !errors.As(err, &missing) || missing.Option != "HTTPGRUB" || !strings.Contains(err.Error(), "none.efi") {
		t.Errorf("http configuration with a missing HTTPGRUB: %v, want a MissingFileError naming Options.HTTPGRUB and the path", err)
	}
	// pxe needs only Options.GRUB.
	m.put(t, m.ramdiskConfig("node-pxe", PXE, UEFI, pxeMAC))
}
