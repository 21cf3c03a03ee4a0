package netboot

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// FuzzConfigCannotInject: whatever kernel parameters and kernel URL
// PutConfig accepts, the generated iPXE script, pxelinux and GRUB
// configurations keep their shape (same lines, the parameters as single
// words on the kernel line) and carry no character the three languages
// expand or split on.
func FuzzConfigCannotInject(f *testing.F) {
	for _, s := range []string{
		"ipa-api-url=http://192.0.2.1:6385\x00console=ttyS0,115200n8",
		"a b", "x\nshell", "x=${root}", "x;reboot", "x||y", "}\nmenuentry", "\"x", "x&&y", "",
	} {
		f.Add(s, "https://images.example/k?sig=a&e=1")
	}
	fx := newFixture(f, nil)
	const mac = "52:54:00:12:34:56"
	shape := func(b []byte) int { return bytes.Count(b, []byte("\n")) }
	base := fx.ramdiskConfig("node-1", IPXE, UEFI, mac)
	base.Params = []string{"p"}
	wantIPXE := shape(fx.srv.script(mac, plan{kind: planConfig, cfg: base}))
	wantPXE := shape(pxelinuxConfig(base, mac))
	wantGRUB := shape(grubConfig(base, mac))
	f.Fuzz(func(t *testing.T, params, kernelURL string) {
		c := fx.ramdiskConfig("node-1", IPXE, UEFI, mac)
		c.Params = strings.Split(params, "\x00")
		c.Kernel = kernelURL
		if err := fx.srv.PutConfig(context.Background(), c); err != nil {
			c.Kernel = fx.kernel
			if err := fx.srv.PutConfig(context.Background(), c); err != nil {
				return
			}
		}
		got, err := fx.srv.ConfigForMAC(mac)
		if err != nil {
			t.Fatal(err)
		}
		script := fx.srv.script(mac, plan{kind: planConfig, cfg: got})
		if n := shape(script); n != wantIPXE {
			t.Fatalf("params %q: iPXE script has %d lines, want %d:\n%s", c.Params, n, wantIPXE, script)
		}
		for _, doc := range [][]byte{script, pxelinuxConfig(got, mac), grubConfig(got, mac)} {
			for _, line := range strings.Split(string(doc), "\n") {
				// The script's own operator, after the command.
				line = strings.TrimSuffix(line, " || goto retry")
				if strings.HasPrefix(line, "kernel ") || strings.HasPrefix(strings.TrimSpace(line), "linux ") ||
					strings.HasPrefix(strings.TrimSpace(line), "APPEND ") {
					if strings.ContainsAny(line, "$;\"'\\{}#<>|\t\r") {
						t.Fatalf("params %q: kernel line %q has a special character", c.Params, line)
					}
					words := strings.Fields(line)
					for _, p := range got.Params {
						found := false
						for _, w := range words {
							found = found || w == p
						}
						if !found {
							t.Fatalf("param %q is not one word of %q", p, line)
						}
					}
				}
			}
		}
		if n := shape(pxelinuxConfig(got, mac)); n != wantPXE {
			t.Fatalf("params %q: pxelinux config has %d lines, want %d", c.Params, n, wantPXE)
		}
		if n := shape(grubConfig(got, mac)); n != wantGRUB {
			t.Fatalf("params %q: GRUB config has %d lines, want %d", c.Params, n, wantGRUB)
		}
	})
}
