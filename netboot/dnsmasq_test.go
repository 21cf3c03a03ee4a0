package netboot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// dirListing is every file of dir with its content, for a golden file.
func dirListing(t *testing.T, dirs ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		for _, n := range names {
			data, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "==> %s/%s\n%s", filepath.Base(dir), n, data)
		}
	}
	return b.Bytes()
}

// TestDnsmasqFiles pins the host and option files per interface and boot
// mode (testdata/dnsmasq.golden), and checks that they follow the
// configurations: replaced atomically, stale MACs' files removed, all of
// a node's files removed with its configuration.
func TestDnsmasqFiles(t *testing.T) {
	root := t.TempDir()
	hosts, opts := filepath.Join(root, "hosts"), filepath.Join(root, "opts")
	for _, d := range []string{hosts, opts} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixture(t, func(o *Options) { o.Dnsmasq = &DnsmasqFiles{HostsDir: hosts, OptsDir: opts} })
	ctx := context.Background()
	f.put(t, f.ramdiskConfig("node-ipxe-bios", IPXE, BIOS, "52:54:00:00:00:01", "52:54:00:00:00:02"))
	f.put(t, f.ramdiskConfig("node-ipxe-uefi", IPXE, UEFI, "52:54:00:00:00:03"))
	f.put(t, f.ramdiskConfig("node-http-ipxe", HTTPIPXE, UEFI, "52:54:00:00:00:04"))
	f.put(t, f.ramdiskConfig("node-pxe-bios", PXE, BIOS, "52:54:00:00:00:05"))
	f.put(t, f.ramdiskConfig("node-pxe-uefi", PXE, UEFI, "52:54:00:00:00:06"))
	f.put(t, Config{Node: "node-http", MACs: []string{"52:54:00:00:00:07"}, Interface: HTTP, Mode: UEFI, Action: LocalDisk})
	golden(t, "dnsmasq.golden", dirListing(t, hosts, opts))

	// Replacing node-ipxe-bios with one MAC removes the other's host file.
	f.put(t, f.ramdiskConfig("node-ipxe-bios", IPXE, BIOS, "52:54:00:00:00:02"))
	if _, err := os.Stat(filepath.Join(hosts, "52:54:00:00:00:01")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale host file: %v", err)
	}
	// A refused configuration writes nothing.
	before := dirListing(t, hosts, opts)
	if err := f.srv.PutConfig(ctx, f.ramdiskConfig("node-x", IPXE, BIOS, "52:54:00:00:00:03")); err == nil {
		t.Fatal("PutConfig with another node's MAC succeeded")
	}
	if after := dirListing(t, hosts, opts); !bytes.Equal(before, after) {
		t.Errorf("a refused configuration changed the files:\n%s", after)
	}
	for _, n := range []string{"node-ipxe-bios", "node-ipxe-uefi", "node-http-ipxe", "node-pxe-bios", "node-pxe-uefi", "node-http"} {
		if err := f.srv.DeleteConfig(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if left := dirListing(t, hosts, opts); len(left) != 0 {
		t.Errorf("files left after DeleteConfig:\n%s", left)
	}
	// No temporary files are left either (dnsmasq would skip them, but
	// they would pile up).
	for _, d := range []string{hosts, opts} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("temporary file left: %s", e.Name())
			}
		}
	}
}
