package netboot

import (
	"strings"
	"testing"
)

func TestParseMAC(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"52:54:00:12:34:56", "52:54:00:12:34:56", true},
		{"52:54:00:AB:cD:EF", "52:54:00:ab:cd:ef", true},
		{"52-54-00-12-34-56", "52:54:00:12:34:56", true},
		{"52:54:00-12:34:56", "", false}, // mixed separators
		{"52:54:00:12:34", "", false},
		{"52:54:00:12:34:567", "", false},
		{"5254.0012.3456", "", false},
		{"525400123456", "", false},
		{"52:54:00:12:34:5g", "", false},
		{"", "", false},
		{"52:54:00:12:34:56:78:9a", "", false},
		{"../54:00:12:34:56", "", false},
	}
	for _, tc := range tests {
		got, ok := ParseMAC(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseMAC(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPathTable is the MAC → path mapping and its inverse: every name the
// server serves, and names it must not.
func TestPathTable(t *testing.T) {
	const mac = "52:54:00:12:34:56"
	if got := ScriptPath(mac); got != "/boot/52-54-00-12-34-56/boot.ipxe" {
		t.Errorf("ScriptPath = %s", got)
	}
	if got := KernelPath(mac); got != "/boot/52-54-00-12-34-56/kernel" {
		t.Errorf("KernelPath = %s", got)
	}
	if got := RamdiskPath(mac); got != "/boot/52-54-00-12-34-56/ramdisk" {
		t.Errorf("RamdiskPath = %s", got)
	}
	if got := PXELinuxConfigName(mac); got != "pxelinux.cfg/01-52-54-00-12-34-56" {
		t.Errorf("PXELinuxConfigName = %s", got)
	}
	if got := GRUBConfigName(mac); got != "grub/grub.cfg-01-52-54-00-12-34-56" {
		t.Errorf("GRUBConfigName = %s", got)
	}
	tests := []struct {
		path string
		want route
	}{
		{"/boot.ipxe", route{kind: routeGenericScript}},
		{"/boot/52-54-00-12-34-56/boot.ipxe", route{kind: routeScript, mac: mac}},
		{"boot/52:54:00:12:34:56/boot.ipxe", route{kind: routeScript, mac: mac}},
		{"/boot/52-54-00-12-34-56/kernel", route{kind: routeKernel, mac: mac}},
		{"/boot/52-54-00-12-34-56/ramdisk", route{kind: routeRamdisk, mac: mac}},
		{"boot/52:54:00:12:34:56/grub.cfg", route{kind: routeGRUBConfig, mac: mac}},
		{"grub/grub.cfg-01-52-54-00-12-34-56", route{kind: routeGRUBConfig, mac: mac}},
		{"grub/grub.cfg", route{kind: routeGRUBMaster}},
		{"pxelinux.cfg/01-52-54-00-12-34-56", route{kind: routePXELinuxCfg, mac: mac}},
		{"pxelinux.cfg/01-52-54-00-AB-CD-EF", route{kind: routePXELinuxCfg, mac: "52:54:00:ab:cd:ef"}},
		{"undionly.kpxe", route{kind: routeBinary, file: fileUndionly}},
		{"/ipxe/snponly.efi", route{kind: routeBinary, file: fileSNPOnly}},
		{"ipxe.efi", route{kind: routeBinary, file: fileIPXEEFI}},
		{"pxelinux.0", route{kind: routeBinary, file: filePXELinux}},
		{"ldlinux.c32", route{kind: routeBinary, file: fileLDLinux}},
		{"grubnetx64.efi", route{kind: routeBinary, file: fileGRUB}},
		{"/grub/grubnetx64.efi", route{kind: routeBinary, file: fileGRUB}},
		// Not served: probes, traversals, directories, near misses.
		{"pxelinux.cfg/01-52:54:00:12:34:56", route{}},
		{"pxelinux.cfg/default", route{}},
		{"pxelinux.cfg/C000021", route{}},
		{"grub/x86_64-efi/grub.cfg", route{}},
		{"/boot/../etc/passwd", route{}},
		{"/boot/52-54-00-12-34-56/../../../etc/passwd", route{}},
		{"/boot/52-54-00-12-34-56/", route{}},
		{"/boot/52-54-00-12-34-56", route{}},
		{"/boot/", route{}},
		{"/", route{}},
		{"", route{}},
		{"//boot.ipxe", route{}},
		{"/boot//52-54-00-12-34-56/kernel", route{}},
		{"/boot/52-54-00-12-34-56/kernel/", route{}},
		{"/etc/passwd", route{}},
		{"/ipxe/../ipxe.efi", route{}},
		{"/pxelinux.cfg/01-52-54-00-12-34-56x", route{}},
		{"/" + strings.Repeat("a", maxPathLen), route{}},
	}
	for _, tc := range tests {
		if got := parsePath(tc.path); got != tc.want {
			t.Errorf("parsePath(%q) = %+v, want %+v", tc.path, got, tc.want)
		}
	}
}

// FuzzParsePath checks that a parsed path names only what the layout
// names: a route's MAC is normalised, and a path that parses is one the
// server would write itself (no traversal can reach a route).
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"/boot.ipxe", "/boot/52-54-00-12-34-56/boot.ipxe", "boot/52:54:00:12:34:56/grub.cfg",
		"pxelinux.cfg/01-52-54-00-12-34-56", "grub/grub.cfg-01-52-54-00-12-34-56", "/ipxe/snponly.efi",
		"/boot/../../etc/passwd", "grub/grub.cfg", "//x", "undionly.kpxe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rt := parsePath(p)
		if rt.kind == routeNone {
			return
		}
		if len(p) > maxPathLen {
			t.Fatalf("parsePath(%d bytes) = %+v beyond the bound", len(p), rt)
		}
		for _, el := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
			if el == "" || el == "." || el == ".." {
				t.Fatalf("parsePath(%q) = %+v: a path with an empty, . or .. element parsed", p, rt)
			}
		}
		if rt.mac != "" {
			if m, ok := ParseMAC(rt.mac); !ok || m != rt.mac {
				t.Fatalf("parsePath(%q) gave MAC %q, not normalised", p, rt.mac)
			}
		}
		var want []string
		switch rt.kind {
		case routeScript:
			want = []string{ScriptPath(rt.mac)}
		case routeKernel:
			want = []string{KernelPath(rt.mac)}
		case routeRamdisk:
			want = []string{RamdiskPath(rt.mac)}
		case routePXELinuxCfg:
			want = []string{"/" + PXELinuxConfigName(rt.mac)}
		case routeGRUBConfig:
			want = []string{"/" + GRUBConfigName(rt.mac), "/boot/" + hyphenMAC(rt.mac) + "/grub.cfg"}
		default:
			return
		}
		canon := "/" + strings.TrimPrefix(p, "/")
		// The MAC may have been written with colons or upper case.
		canon = strings.ToLower(canon)
		for _, w := range want {
			if strings.EqualFold(strings.ReplaceAll(canon, ":", "-"), w) {
				return
			}
		}
		t.Fatalf("parsePath(%q) = %+v, which is served at %v", p, rt, want)
	})
}
