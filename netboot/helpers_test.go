package netboot

import (
	"context"
	"flag"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from the current code")

// fixture is a server over a temporary directory of fake boot loader
// binaries (their content is their name), a kernel and a ramdisk.
type fixture struct {
	srv     *Server
	dir     string
	kernel  string // local kernel path (10000 bytes)
	ramdisk string // local ramdisk path (300000 bytes)
	rec     *stage.Recorder
	res     *mapResolver
}

// mapResolver resolves the MACs in its map; a MAC mapped to "" fails.
type mapResolver struct {
	mu sync.Mutex
	m  map[string]string
}

func (r *mapResolver) NodeForMAC(_ context.Context, mac string) (string, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.m[mac]
	if ok && n == "" {
		return "", false, os.ErrDeadlineExceeded
	}
	return n, ok, nil
}

// fixedClock is a clock standing still at t.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time                       { return c.t }
func (c fixedClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

var testTime = time.Date(2026, 12, 1, 10, 42, 0, 0, time.UTC)

func writeFile(t testing.TB, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// binaries writes fake boot loader files under dir and returns Options
// pointing at them.
func binaries(t testing.TB, dir string) Options {
	t.Helper()
	for _, f := range []string{"ipxe/undionly.kpxe", "ipxe/snponly.efi", "ipxe/ipxe.efi", "pxelinux/pxelinux.0",
		"syslinux/ldlinux.c32", "grub/grubnetx64.efi", "shim/shimx64.efi.signed", "grub/grubnetx64.efi.signed"} {
		writeFile(t, filepath.Join(dir, f), []byte(filepath.Base(f)+"\n"))
	}
	return Options{
		HTTPBase:        "http://192.0.2.1:8080",
		TFTPServer:      netip.MustParseAddr("192.0.2.1"),
		IPXEDir:         filepath.Join(dir, "ipxe"),
		PXELinux:        filepath.Join(dir, "pxelinux/pxelinux.0"),
		SyslinuxModules: filepath.Join(dir, "syslinux"),
		GRUB:            filepath.Join(dir, "grub/grubnetx64.efi"),
		Shim:            filepath.Join(dir, "shim/shimx64.efi.signed"),
		SignedGRUB:      filepath.Join(dir, "grub/grubnetx64.efi.signed"),
	}
}

func newFixture(t testing.TB, edit func(*Options)) *fixture {
	t.Helper()
	dir := t.TempDir()
	o := binaries(t, dir)
	f := &fixture{dir: dir, rec: &stage.Recorder{}, res: &mapResolver{m: map[string]string{}},
		kernel: filepath.Join(dir, "images/vmlinuz"), ramdisk: filepath.Join(dir, "images/initrd.img")}
	writeFile(t, f.kernel, pattern(10000))
	writeFile(t, f.ramdisk, pattern(300000))
	o.Observer = f.rec
	o.Resolver = f.res
	o.Clock = fixedClock{testTime}
	o.Logger = slog.New(slog.DiscardHandler)
	if edit != nil {
		edit(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.srv = srv
	return f
}

// ramdiskConfig is a node's deploy configuration on the fixture's files.
func (f *fixture) ramdiskConfig(node string, iface Interface, mode Mode, macs ...string) Config {
	return Config{
		Node: node, MACs: macs, Interface: iface, Mode: mode, Action: Ramdisk, Purpose: "deploy",
		Kernel: f.kernel, Ramdisk: f.ramdisk,
		Params: []string{"ipa-api-url=http://192.0.2.1:6385", "console=ttyS0,115200n8", "nofb"},
	}
}

func (f *fixture) put(t testing.TB, c Config) {
	t.Helper()
	if err := f.srv.PutConfig(context.Background(), c); err != nil {
		t.Fatalf("PutConfig(%s): %v", c.Node, err)
	}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		writeFile(t, p, got)
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func stages(recs []stage.Record) string {
	var parts []string
	for _, r := range recs {
		parts = append(parts, string(r.Stage))
	}
	return strings.Join(parts, ",")
}
