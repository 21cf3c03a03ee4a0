package vmlab

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	if rep.KernelLines != 2 || len(rep.BootEntries) != 2 || rep.BootEntries[0].Platform != 0 || !rep.BootEntries[0].BootTable ||
		rep.BootEntries[1].Platform != 0xef || rep.BootEntries[1].Path != "efiboot.img" {
		t.Errorf("re-master report %+v: want two kernel lines (isolinux, grub), a BIOS entry with a boot info table and a UEFI one", rep)
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
	g, err := fs.OpenFile("/boot/grub/grub.cfg", os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Reset()
	if _, err := cfg.ReadFrom(g); err != nil {
		t.Fatal(err)
	}
	if want := "linux /vmlinuz console=ttyS0,115200 rootfstype=ramfs ipa-debug=1 " + args + "\n"; !strings.Contains(cfg.String(), want) {
		t.Errorf("re-mastered grub.cfg:\n%s\nwant the line %q", cfg, want)
	}
}

// TestIPAISOBootsBIOSAndUEFI boots an ISO built by BuildIPAISO, from a
// CD, with SeaBIOS (ISOLINUX) and with OVMF (GRUB from the El Torito EFI
// image), holding the Debian kernel and the marker initramfs in place of
// the agent's: each prints the kernel command line of its boot loader's
// configuration.
func TestIPAISOBootsBIOSAndUEFI(t *testing.T) {
	n := NewTestNetwork(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cache, err := DefaultCache()
	if err != nil {
		t.Fatal(err)
	}
	kernel, err := DebianKernel(ctx, cache)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	initrd, err := MarkerInitramfs(cache, "")
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	iso, err := BuildIPAISO(ctx, cache, IPARamdisk{Kernel: kernel, Initramfs: initrd})
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, fw := range []Firmware{UEFI, BIOS} {
		if fw == UEFI {
			if _, err := os.Stat(OVMFCode); err != nil {
				t.Skipf("no %s (Debian package ovmf): the UEFI boot is not tried", OVMFCode)
			}
		}
		// 1 GiB, as the agent's machines have: GRUB runs out of memory
		// loading the kernel in OVMF with 256 MiB.
		vm, err := StartVM(ctx, n, VMOptions{Name: "iso-" + string(fw), MAC: "52:54:00:a0:00:31", Firmware: fw, NoROM: true, MemoryMB: 1024,
			// bootindex 0: ahead of the NIC's bootindex 1 (OVMF boots
			// only what has one).
			ExtraArgs: []string{"-drive", "id=cd0,if=none,file=" + iso.Path + ",media=cdrom,readonly=on",
				"-device", "ide-cd,drive=cd0,bootindex=0"}})
		if err != nil {
			t.Fatal(err)
		}
		line, err := vm.Console.WaitFor(ctx, CmdlinePrefix)
		if err != nil {
			vm.Stop()
			t.Fatalf("%s: no command line: %v\n%s", fw, err, vm.Console.Transcript(vm.Started, 40))
		}
		if !strings.Contains(line.Text, "console=ttyS0,115200 rootfstype=ramfs ipa-debug=1") {
			t.Errorf("%s: command line %q lacks the ISO's parameters", fw, line.Text)
		}
		t.Logf("%s: the ISO's kernel printed its command line %.1fs after QEMU started", fw, line.At.Sub(vm.Started).Seconds())
		vm.Stop()
	}
}
