package vmlab

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"

	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
)

// TestBuildIPAISO builds the ISO from a stand-in kernel and initramfs
// (twice: the second comes from the cache, the same bytes as a fresh
// build elsewhere), and re-masters it as the redfish-virtual-media boot
// interface does: the append line gets the node's parameters.
func TestBuildIPAISO(t *testing.T) {
	dir := t.TempDir()
	kernel, initrd := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initramfs")
	if err := os.WriteFile(kernel, bytes.Repeat([]byte("kernel"), 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(initrd, bytes.Repeat([]byte("initrd"), 3000), 0o644); err != nil {
		t.Fatal(err)
	}
	rd := IPARamdisk{Kernel: Kernel{Path: kernel}, Initramfs: initrd}
	ctx := context.Background()
	iso, err := BuildIPAISO(ctx, Cache{Dir: filepath.Join(dir, "cache")}, rd)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	if !iso.Built {
		t.Error("first build not reported as built")
	}
	again, err := BuildIPAISO(ctx, Cache{Dir: filepath.Join(dir, "cache")}, rd)
	if err != nil || again.Built || again.Path != iso.Path {
		t.Errorf("second call: %+v, %v; want the cached %s", again, err, iso.Path)
	}
	other, err := BuildIPAISO(ctx, Cache{Dir: filepath.Join(dir, "cache2")}, rd)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(iso.Path)
	b, _ := os.ReadFile(other.Path)
	if !bytes.Equal(a, b) {
		t.Error("two builds of the same inputs differ")
	}

	src, err := os.Open(iso.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	st, _ := src.Stat()
	dst, err := os.Create(filepath.Join(dir, "node.iso"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	args := "ipa-api-url=http://192.0.2.1:6385 ipa-global-request-id=x"
	rep, err := rfdriver.Remaster(ctx, src, st.Size(), dst, args, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if rep.KernelLines != 1 || len(rep.BootEntries) != 1 || !rep.BootEntries[0].BootTable {
		t.Errorf("re-master report %+v: want one kernel line, one BIOS entry with a boot info table", rep)
	}
	fi, _ := dst.Stat()
	fs, err := iso9660.Read(file.New(dst, true), fi.Size(), 0, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fs.OpenFile("/isolinux/isolinux.cfg", os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	cfg := new(bytes.Buffer)
	if _, err := cfg.ReadFrom(f); err != nil {
		t.Fatal(err)
	}
	if want := "append initrd=/initrd.img console=ttyS0,115200 rootfstype=ramfs ipa-debug=1 " + args + "\n"; !strings.Contains(cfg.String(), want) {
		t.Errorf("re-mastered isolinux.cfg:\n%s\nwant the line %q", cfg, want)
	}
}
