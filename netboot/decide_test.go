package netboot

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/anvilmetal/anvil/netboot/dhcp"
	"github.com/anvilmetal/anvil/netboot/dhcp6"
)

// TestDecisionTable is DecideBoot's decision table: every kind of machine
// (a configuration per interface and action, an enrolled machine
// without one, an unknown one with and without a fallback, one the
// Resolver fails on) against every kind of client, in authoritative and
// proxy mode, for DHCPv4 (boot file and next server) and DHCPv6 (the
// boot file URL, with the MAC in its path). testdata/decisions.golden
// is the table (go test -update rewrites it); read it to see what a
// machine is told.
func TestDecisionTable(t *testing.T) {
	clients := []struct {
		name string
		c    dhcp.Client
	}{
		{"pxe-bios", dhcp.Client{Arch: dhcp.ArchBIOS, PXEClient: true}},
		{"pxe-no-arch", dhcp.Client{PXEClient: true}},
		{"pxe-uefi", dhcp.Client{Arch: dhcp.ArchEFIx64, PXEClient: true}},
		{"ipxe-bios", dhcp.Client{Arch: dhcp.ArchBIOS, IPXE: true}},
		{"ipxe-uefi", dhcp.Client{Arch: dhcp.ArchEFIx64, IPXE: true}},
		{"http-uefi", dhcp.Client{Arch: dhcp.ArchEFIx64HTTP, HTTPClient: true}},
		{"pxe-arm64", dhcp.Client{Arch: dhcp.ArchEFIARM64, PXEClient: true}},
	}
	type subject struct {
		name string
		mac  string
	}
	var subjects []subject
	var buf bytes.Buffer
	for _, mode := range []dhcp.Mode{dhcp.Authoritative, dhcp.Proxy} {
		for _, withFallback := range []bool{false, true} {
			f := newFixture(t, func(o *Options) {
				o.DHCPMode = mode
				o.HTTPBase6 = "http://[fd00:a6::1]:8080"
				if withFallback {
					o.Fallback = &Fallback{Kernel: "http://192.0.2.1:8080/ipa.kernel", Ramdisk: "http://192.0.2.1:8080/ipa.initramfs"}
				}
			})
			subjects = subjects[:0]
			n := 0
			for _, iface := range []Interface{IPXE, PXE, HTTP, HTTPIPXE} {
				for _, action := range []Action{Ramdisk, LocalDisk} {
					n++
					mac := fmt.Sprintf("52:54:00:00:00:%02x", n)
					mode := BIOS
					if iface == HTTP || iface == HTTPIPXE {
						mode = UEFI
					}
					c := f.ramdiskConfig(fmt.Sprintf("node-%d", n), iface, mode, mac)
					c.Action = action
					f.put(t, c)
					subjects = append(subjects, subject{fmt.Sprintf("config %s %s", iface, action), mac})
				}
			}
			f.res.m["52:54:00:00:01:01"] = "enrolled-1"
			f.res.m["52:54:00:00:01:03"] = "" // the Resolver fails
			subjects = append(subjects,
				subject{"enrolled, no config", "52:54:00:00:01:01"},
				subject{"unknown", "52:54:00:00:01:02"},
				subject{"resolver error", "52:54:00:00:01:03"},
				subject{"bad MAC", "52:54:00:00:01"})
			fmt.Fprintf(&buf, "## DHCP mode %s, fallback %v\n", mode, withFallback)
			tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "machine\tclient\tboot file\tnext server\tnode\tDHCPv6 boot file URL\tv6 node")
			for _, sub := range subjects {
				for _, cl := range clients {
					c := cl.c
					c.MAC = sub.mac
					d := f.srv.DecideBoot(context.Background(), c)
					file := d.BootFile
					switch {
					case d.Ignore:
						file = "(no answer)"
					case file == "":
						file = "(none)"
					}
					next := "-"
					if d.NextServer.IsValid() {
						next = d.NextServer.String()
					}
					node := d.Node
					if node == "" {
						node = "-"
					}
					if strings.HasPrefix(file, "http") != (next == "-") && !d.Ignore && d.BootFile != "" {
						t.Errorf("%s, %s: boot file %s with next server %s: a TFTP file needs one, a URL none", sub.name, cl.name, file, next)
					}
					d6 := f.srv.DecideBoot6(context.Background(), dhcp6.Client{MAC: c.MAC, Arch: c.Arch, IPXE: c.IPXE,
						HTTPClient: c.HTTPClient, PXEClient: c.PXEClient, WantsBootFileURL: true})
					url6, node6 := d6.BootFileURL, d6.Node
					switch {
					case d6.Ignore:
						url6 = "(no answer)"
					case url6 == "":
						url6 = "(none)"
					}
					if node6 == "" {
						node6 = "-"
					}
					if url6 != "(none)" && url6 != "(no answer)" && !strings.Contains(url6, strings.ReplaceAll(c.MAC, ":", "-")) {
						t.Errorf("%s, %s: DHCPv6 boot file URL %s does not name the MAC", sub.name, cl.name, url6)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sub.name, cl.name, file, next, node, url6, node6)
				}
			}
			tw.Flush()
			buf.WriteString("\n")
		}
	}
	golden(t, "decisions.golden", buf.Bytes())
}

// TestDecideNeverRamdisksAnEnrolledMachine is the rule the table shows,
// stated alone: an enrolled machine without a configuration is told to
// boot its local disk, whatever the Fallback, and a Resolver failure
// never sends a machine to the fallback.
func TestDecideNeverRamdisksAnEnrolledMachine(t *testing.T) {
	f := newFixture(t, func(o *Options) {
		o.Fallback = &Fallback{Kernel: "http://192.0.2.1:8080/ipa.kernel", Ramdisk: "http://192.0.2.1:8080/ipa.initramfs"}
	})
	f.res.m["52:54:00:aa:00:01"] = "active-node"
	f.res.m["52:54:00:aa:00:02"] = ""
	ctx := context.Background()
	if p := f.srv.planFor(ctx, "52:54:00:aa:00:01"); p.kind != planLocal || p.node != "active-node" {
		t.Errorf("enrolled machine: plan %+v, want local disk for active-node", p)
	}
	if p := f.srv.planFor(ctx, "52:54:00:aa:00:02"); p.kind != planNone {
		t.Errorf("resolver failure: plan %+v, want nothing", p)
	}
	if p := f.srv.planFor(ctx, "52:54:00:aa:00:03"); p.kind != planFallback {
		t.Errorf("unknown machine: plan %+v, want the fallback", p)
	}
	script := string(f.srv.script("52:54:00:aa:00:01", f.srv.planFor(ctx, "52:54:00:aa:00:01")))
	if strings.Contains(script, "kernel") || !strings.Contains(script, "sanboot") {
		t.Errorf("enrolled machine's script boots something other than the local disk:\n%s", script)
	}
}
