package netboot

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/netboot/stage"
)

func TestPutConfigNormalisesAndReplaces(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	c := f.ramdiskConfig("node-1", IPXE, UEFI, "52:54:00:AA:00:01", "52-54-00-aa-00-02", "52:54:00:aa:00:01")
	f.put(t, c)
	got, err := f.srv.Config("node-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"52:54:00:aa:00:01", "52:54:00:aa:00:02"}; !reflect.DeepEqual(got.MACs, want) {
		t.Errorf("MACs = %v, want %v (lower case, colons, no duplicates)", got.MACs, want)
	}
	if byMAC, err := f.srv.ConfigForMAC("52-54-00-AA-00-02"); err != nil || byMAC.Node != "node-1" {
		t.Errorf("ConfigForMAC = %+v, %v", byMAC, err)
	}
	// The returned configuration is a copy.
	got.MACs[0] = "changed"
	if again, _ := f.srv.Config("node-1"); again.MACs[0] != "52:54:00:aa:00:01" {
		t.Errorf("Config returned the server's own slice")
	}

	// Replacing drops the MACs the node no longer has.
	c2 := f.ramdiskConfig("node-1", IPXE, UEFI, "52:54:00:aa:00:02")
	f.put(t, c2)
	if _, err := f.srv.ConfigForMAC("52:54:00:aa:00:01"); !errors.Is(err, ErrNoConfig) {
		t.Errorf("dropped MAC still maps: %v", err)
	}
	// ... so another node may take it.
	f.put(t, f.ramdiskConfig("node-2", IPXE, BIOS, "52:54:00:aa:00:01"))

	if err := f.srv.DeleteConfig(ctx, "node-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.srv.Config("node-1"); !errors.Is(err, ErrNoConfig) {
		t.Errorf("Config after DeleteConfig: %v", err)
	}
	if _, err := f.srv.ConfigForMAC("52:54:00:aa:00:02"); !errors.Is(err, ErrNoConfig) {
		t.Errorf("ConfigForMAC after DeleteConfig: %v", err)
	}
	if err := f.srv.DeleteConfig(ctx, "node-1"); err != nil {
		t.Errorf("DeleteConfig of a node without one: %v", err)
	}
	if _, err := f.srv.ConfigForMAC("not a mac"); !errors.Is(err, ErrNoConfig) {
		t.Errorf("ConfigForMAC(bad) = %v", err)
	}

	// Each Ramdisk PutConfig records Prepared; a LocalDisk one does not.
	f.put(t, Config{Node: "node-2", MACs: []string{"52:54:00:aa:00:01"}, Interface: IPXE, Mode: BIOS, Action: LocalDisk})
	var prepared []string
	for _, r := range f.rec.Records() {
		if r.Stage == stage.Prepared {
			prepared = append(prepared, r.Node)
			if !r.At.Equal(testTime) {
				t.Errorf("Prepared at %v, want the server's clock %v", r.At, testTime)
			}
		}
	}
	if want := []string{"node-1", "node-1", "node-2"}; !reflect.DeepEqual(prepared, want) {
		t.Errorf("Prepared records for %v, want %v", prepared, want)
	}
}

// TestPutConfigRefusesWithoutChanging: a refused configuration leaves the
// store as it was, and the error names what was wrong.
func TestPutConfigRefusesWithoutChanging(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.put(t, f.ramdiskConfig("node-1", IPXE, UEFI, "52:54:00:aa:00:01"))
	f.put(t, f.ramdiskConfig("node-2", IPXE, UEFI, "52:54:00:aa:00:02"))
	before2, _ := f.srv.Config("node-2")

	// Another node's MAC.
	err := f.srv.PutConfig(ctx, f.ramdiskConfig("node-2", IPXE, UEFI, "52:54:00:aa:00:03", "52:54:00:AA:00:01"))
	var inUse *MACInUseError
	if !errors.As(err, &inUse) || inUse.MAC != "52:54:00:aa:00:01" || inUse.Node != "node-2" || inUse.Owner != "node-1" {
		t.Fatalf("PutConfig with node-1's MAC: %v", err)
	}
	for _, want := range []string{"node-1", "node-2", "52:54:00:aa:00:01"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}

	bad := func(edit func(*Config)) Config {
		c := f.ramdiskConfig("node-2", IPXE, UEFI, "52:54:00:aa:00:04")
		edit(&c)
		return c
	}
	tests := []struct {
		name  string
		c     Config
		field string
	}{
		{"space in a param", bad(func(c *Config) { c.Params = append(c.Params, "a b") }), "params[3]"},
		{"ipxe command injection", bad(func(c *Config) { c.Params = []string{"x\nshell"} }), "params[0]"},
		{"ipxe expansion", bad(func(c *Config) { c.Params = []string{"x=${root-path}"} }), "params[0]"},
		{"grub separator", bad(func(c *Config) { c.Params = []string{"x;reboot"} }), "params[0]"},
		{"quote", bad(func(c *Config) { c.Params = []string{`x="y"`} }), "params[0]"},
		{"initrd given", bad(func(c *Config) { c.Params = []string{"initrd=foo"} }), "params[0]"},
		{"empty param", bad(func(c *Config) { c.Params = []string{""} }), "params[0]"},
		{"too long", bad(func(c *Config) { c.Params = []string{"a=" + strings.Repeat("b", 3000)} }), "params[0]"},
		{"command line too long", bad(func(c *Config) {
			c.Params = []string{strings.Repeat("a", 1000), strings.Repeat("b", 1000), strings.Repeat("c", 100)}
		}), "params"},
		{"bad MAC", bad(func(c *Config) { c.MACs = []string{"52:54:00:aa:00"} }), "macs[0]"},
		{"no MAC", bad(func(c *Config) { c.MACs = nil }), "macs"},
		{"bad node", bad(func(c *Config) { c.Node = "../etc" }), "node"},
		{"bad interface", bad(func(c *Config) { c.Interface = "floppy" }), "interface"},
		{"bad mode", bad(func(c *Config) { c.Mode = "" }), "mode"},
		{"http in bios", bad(func(c *Config) { c.Interface, c.Mode = HTTPIPXE, BIOS }), "mode"},
		{"bad action", bad(func(c *Config) { c.Action = "" }), "action"},
		{"relative kernel", bad(func(c *Config) { c.Kernel = "vmlinuz" }), "kernel"},
		{"unclean kernel", bad(func(c *Config) { c.Kernel = "/srv/../etc/shadow" }), "kernel"},
		{"missing ramdisk", bad(func(c *Config) { c.Ramdisk = "/nonexistent/initrd" }), "ramdisk"},
		{"URL for pxe", bad(func(c *Config) { c.Interface, c.Kernel = PXE, "http://192.0.2.1/k" }), "kernel"},
		{"URL with a space", bad(func(c *Config) { c.Kernel = "http://192.0.2.1/k x" }), "kernel"},
		{"URL with &&", bad(func(c *Config) { c.Kernel = "http://192.0.2.1/k?a=1&&b" }), "kernel"},
		{"bad purpose", bad(func(c *Config) { c.Purpose = "deploy now" }), "purpose"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := f.srv.PutConfig(ctx, tc.c)
			var inv *InvalidConfigError
			if !errors.As(err, &inv) || inv.Field != tc.field {
				t.Fatalf("PutConfig: %v, want an InvalidConfigError on %s", err, tc.field)
			}
			if _, err := f.srv.ConfigForMAC("52:54:00:aa:00:04"); !errors.Is(err, ErrNoConfig) {
				t.Errorf("refused configuration's MAC maps: %v", err)
			}
		})
	}
	after2, _ := f.srv.Config("node-2")
	if !reflect.DeepEqual(before2, after2) {
		t.Errorf("node-2's configuration changed by refused puts:\n%+v\n%+v", before2, after2)
	}
	if _, err := f.srv.ConfigForMAC("52:54:00:aa:00:03"); !errors.Is(err, ErrNoConfig) {
		t.Errorf("a refused configuration's MAC maps: %v", err)
	}
}

// TestMissingBootLoaders: iPXE is checked at New, pxelinux and GRUB when
// a configuration needs them; the error names the path and the package.
func TestMissingBootLoaders(t *testing.T) {
	dir := t.TempDir()
	o := binaries(t, dir)
	os.Remove(filepath.Join(dir, "ipxe/snponly.efi"))
	_, err := New(o)
	var missing *MissingFileError
	if !errors.As(err, &missing) || missing.Package != "ipxe" || missing.Path != filepath.Join(dir, "ipxe/snponly.efi") {
		t.Fatalf("New without snponly.efi: %v", err)
	}
	if !strings.Contains(err.Error(), "ipxe") || !strings.Contains(err.Error(), missing.Path) {
		t.Errorf("error %q names neither the package nor the path", err)
	}

	f := newFixture(t, func(o *Options) {
		o.PXELinux = filepath.Join(dir, "none/pxelinux.0")
		o.GRUB = filepath.Join(dir, "none/grubnetx64.efi")
	})
	ctx := context.Background()
	// ipxe needs neither.
	f.put(t, f.ramdiskConfig("node-1", IPXE, BIOS, "52:54:00:aa:00:01"))
	for _, tc := range []struct {
		iface Interface
		mode  Mode
		pkg   string
	}{{PXE, BIOS, "pxelinux"}, {PXE, UEFI, "grub-efi-amd64-bin"}, {HTTP, UEFI, "grub-efi-amd64-bin"}} {
		err := f.srv.PutConfig(ctx, f.ramdiskConfig("node-2", tc.iface, tc.mode, "52:54:00:aa:00:02"))
		if !errors.As(err, &missing) || missing.Package != tc.pkg {
			t.Errorf("%s %s without its loader: %v, want a MissingFileError for %s", tc.iface, tc.mode, err, tc.pkg)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		edit  func(*Options)
		field string
	}{
		{"no base", func(o *Options) { o.HTTPBase = "" }, "HTTPBase"},
		{"https base", func(o *Options) { o.HTTPBase = "https://192.0.2.1" }, "HTTPBase"},
		{"base with a query", func(o *Options) { o.HTTPBase = "http://192.0.2.1/?x=1" }, "HTTPBase"},
		{"IPv6 base without brackets", func(o *Options) { o.HTTPBase6 = "http://fd00:a6::1" }, "HTTPBase6"},
		{"IPv6 base with a zone", func(o *Options) { o.HTTPBase6 = "http://[fe80::1%25eth0]:8080" }, "HTTPBase6"},
		{"link-local TFTP server", func(o *Options) { o.TFTPServer6 = netip.MustParseAddr("fe80::1") }, "TFTPServer6"},
		{"IPv4 TFTP server for IPv6", func(o *Options) { o.TFTPServer6 = netip.MustParseAddr("192.0.2.1") }, "TFTPServer6"},
		{"bad UEFI iPXE", func(o *Options) { o.UEFIIPXE = "undionly.kpxe" }, "UEFIIPXE"},
		{"fallback without a resolver", func(o *Options) {
			o.Fallback = &Fallback{Kernel: "http://192.0.2.1/k", Ramdisk: "http://192.0.2.1/r"}
		}, "Fallback"},
		{"fallback bad param", func(o *Options) {
			o.Resolver = &mapResolver{}
			o.Fallback = &Fallback{Kernel: "http://192.0.2.1/k", Ramdisk: "http://192.0.2.1/r", Params: []string{"a b"}}
		}, "Fallback.params[0]"},
		{"dnsmasq relative", func(o *Options) { o.Dnsmasq = &DnsmasqFiles{HostsDir: "hosts", OptsDir: dir} }, "Dnsmasq.HostsDir"},
		{"dnsmasq without TFTP address", func(o *Options) {
			o.Dnsmasq = &DnsmasqFiles{HostsDir: dir, OptsDir: dir}
			o.TFTPServer = netip.Addr{}
		}, "TFTPServer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := binaries(t, dir)
			tc.edit(&o)
			_, err := New(o)
			var oe *OptionsError
			if !errors.As(err, &oe) || oe.Field != tc.field {
				t.Fatalf("New: %v, want an OptionsError on %s", err, tc.field)
			}
		})
	}
}
