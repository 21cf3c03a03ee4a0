package netboottest_test

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/netboot/netboottest"
)

func TestStoreKeepsLogsAndRefusesAnotherNodesMAC(t *testing.T) {
	ctx := context.Background()
	s := netboottest.NewStore()
	mac := "52:54:00:12:34:56"
	ramdisk := func(node, purpose string, macs ...string) netboot.Config {
		return netboot.Config{Node: node, MACs: macs, Interface: netboot.IPXE, Mode: netboot.BIOS,
			Action: netboot.Ramdisk, Purpose: purpose, Kernel: "http://192.0.2.1/k", Ramdisk: "http://192.0.2.1/r"}
	}
	if err := s.PutConfig(ctx, ramdisk("a", "clean", mac)); err != nil {
		t.Fatal(err)
	}
	err := s.PutConfig(ctx, ramdisk("b", "", "52-54-00-12-34-56"))
	var inUse *netboot.MACInUseError
	if !errors.As(err, &inUse) || inUse.Owner != "a" || inUse.Node != "b" || inUse.MAC != mac {
		t.Fatalf("a second node took node a's MAC: err = %v", err)
	}
	if _, ok := s.Config("b"); ok {
		t.Fatal("the refused configuration was kept")
	}
	if c, ok := s.ForMAC("52:54:00:12:34:56"); !ok || c.Node != "a" {
		t.Fatalf("ForMAC = %+v, %v", c, ok)
	}
	if err := s.PutConfig(ctx, netboot.Config{Node: "a", MACs: []string{"52:54:00:12:34:56"}, Interface: netboot.IPXE,
		Mode: netboot.BIOS, Action: netboot.LocalDisk}); err != nil {
		t.Fatal(err)
	}
	_ = s.DeleteConfig(ctx, "a")
	_ = s.DeleteConfig(ctx, "a") // nothing left: not logged
	if got, want := s.Writes("a"), []string{"put ramdisk/clean", "put local", "delete"}; !slices.Equal(got, want) {
		t.Fatalf("Writes = %q, want %q", got, want)
	}
}

func TestStoreNormalizesMACs(t *testing.T) {
	s := netboottest.NewStore()
	c := netboot.Config{Node: "a", MACs: []string{"52-54-00-AB-CD-EF", "52:54:00:ab:cd:ef"}, Interface: netboot.IPXE,
		Mode: netboot.BIOS, Action: netboot.LocalDisk}
	if err := s.PutConfig(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Config("a")
	if want := []string{"52:54:00:ab:cd:ef"}; !slices.Equal(got.MACs, want) {
		t.Fatalf("MACs = %q, want %q", got.MACs, want)
	}
	if _, ok := s.ForMAC("52-54-00-ab-cd-ef"); !ok {
		t.Fatal("ForMAC does not find the hyphenated MAC")
	}
}

// realServer is a netboot.Server over fake boot loader files and a local
// kernel and ramdisk, so that it refuses configurations only for what
// they say.
func realServer(t *testing.T) (srv *netboot.Server, kernel, ramdisk string) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"ipxe/undionly.kpxe", "ipxe/snponly.efi", "ipxe/ipxe.efi", "pxelinux/pxelinux.0",
		"syslinux/ldlinux.c32", "grub/grubnetx64.efi", "images/vmlinuz", "images/initrd.img"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(filepath.Base(f)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := netboot.New(netboot.Options{
		HTTPBase:        "http://192.0.2.1:8080",
		TFTPServer:      netip.MustParseAddr("192.0.2.1"),
		IPXEDir:         filepath.Join(dir, "ipxe"),
		PXELinux:        filepath.Join(dir, "pxelinux/pxelinux.0"),
		SyslinuxModules: filepath.Join(dir, "syslinux"),
		GRUB:            filepath.Join(dir, "grub/grubnetx64.efi"),
		Logger:          slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, filepath.Join(dir, "images/vmlinuz"), filepath.Join(dir, "images/initrd.img")
}

// TestStoreRefusesWhatTheServerRefuses puts each configuration into a real
// Server and into a Store: both must accept it, or both refuse it with the
// same *netboot.InvalidConfigError.
func TestStoreRefusesWhatTheServerRefuses(t *testing.T) {
	srv, kernel, ramdisk := realServer(t)
	base := func(iface netboot.Interface, mode netboot.Mode) netboot.Config {
		return netboot.Config{Node: "n1", MACs: []string{"52:54:00:00:00:01"}, Interface: iface, Mode: mode,
			Action: netboot.Ramdisk, Purpose: "deploy", Kernel: kernel, Ramdisk: ramdisk,
			Params: []string{"ipa-api-url=http://192.0.2.1:6385", "console=ttyS0,115200n8"}}
	}
	tests := []struct {
		name  string
		edit  func(*netboot.Config)
		field string // "" when both accept it
	}{
		{"pxe bios local files", func(*netboot.Config) {}, ""},
		{"ipxe urls", func(c *netboot.Config) {
			c.Interface, c.Kernel, c.Ramdisk = netboot.IPXE, "http://192.0.2.1/k?temp_url_sig=ab&x=1", "https://192.0.2.1/r"
		}, ""},
		{"local disk without images", func(c *netboot.Config) {
			c.Action, c.Kernel, c.Ramdisk, c.Params = netboot.LocalDisk, "", "", nil
		}, ""},
		{"hyphenated upper-case MAC", func(c *netboot.Config) { c.MACs = []string{"52-54-00-AA-00-01"} }, ""},
		{"pxe URL kernel", func(c *netboot.Config) { c.Kernel = "http://192.0.2.1/k" }, "kernel"},
		{"http URL ramdisk", func(c *netboot.Config) {
			c.Interface, c.Mode, c.Ramdisk = netboot.HTTP, netboot.UEFI, "http://192.0.2.1/r"
		}, "ramdisk"},
		{"param with a quote", func(c *netboot.Config) { c.Params = append(c.Params, `a="b c"`) }, "params[2]"},
		{"param with $", func(c *netboot.Config) { c.Params = []string{"x=${net0/ip}"} }, "params[0]"},
		{"BOOTIF param", func(c *netboot.Config) { c.Params = []string{"BOOTIF=01-52-54-00-00-00-01"} }, "params[0]"},
		{"too long command line", func(c *netboot.Config) {
			c.Params = []string{strings.Repeat("a", 1000), strings.Repeat("b", 1000), strings.Repeat("c", 100)}
		}, "params"},
		{"no node", func(c *netboot.Config) { c.Node = "" }, "node"},
		{"node with a slash", func(c *netboot.Config) { c.Node = "../x" }, "node"},
		{"no MAC", func(c *netboot.Config) { c.MACs = nil }, "macs"},
		{"bad MAC", func(c *netboot.Config) { c.MACs = []string{"52:54:00:00:00:01", "5254.0000.0001"} }, "macs[1]"},
		{"no interface", func(c *netboot.Config) { c.Interface = "" }, "interface"},
		{"bad mode", func(c *netboot.Config) { c.Mode = "legacy" }, "mode"},
		{"http boot in bios", func(c *netboot.Config) { c.Interface = netboot.HTTPIPXE }, "mode"},
		{"bad action", func(c *netboot.Config) { c.Action = "reboot" }, "action"},
		{"bad purpose", func(c *netboot.Config) { c.Purpose = "de ploy" }, "purpose"},
		{"negative iPXE timeout", func(c *netboot.Config) { c.IPXETimeout = -1 }, "ipxe_timeout"},
		{"no kernel", func(c *netboot.Config) { c.Kernel = "" }, "kernel"},
		{"unclean kernel path", func(c *netboot.Config) { c.Kernel = "/srv/../etc/shadow" }, "kernel"},
		{"relative ramdisk", func(c *netboot.Config) { c.Ramdisk = "images/initrd.img" }, "ramdisk"},
		{"tftp URL", func(c *netboot.Config) { c.Interface, c.Kernel = netboot.IPXE, "tftp://192.0.2.1/k" }, "kernel"},
		{"URL with &&", func(c *netboot.Config) { c.Interface, c.Kernel = netboot.IPXE, "http://192.0.2.1/k?a&&b" }, "kernel"},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base(netboot.PXE, netboot.BIOS)
			tt.edit(&c)
			fromServer := srv.PutConfig(ctx, c)
			fromStore := netboottest.NewStore().PutConfig(ctx, c)
			_ = srv.DeleteConfig(ctx, c.Node)
			if tt.field == "" {
				if fromServer != nil || fromStore != nil {
					t.Fatalf("server: %v; store: %v; want both to accept it", fromServer, fromStore)
				}
				return
			}
			var es, ed *netboot.InvalidConfigError
			if !errors.As(fromServer, &es) || !errors.As(fromStore, &ed) {
				t.Fatalf("server: %v; store: %v; want both to refuse field %s", fromServer, fromStore, tt.field)
			}
			if es.Field != tt.field || *es != *ed {
				t.Fatalf("server: %+v; store: %+v; want field %s from both", es, ed, tt.field)
			}
		})
	}
}
