package vmlab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
)

// TestBootISOFromKernelAndRamdiskBoots builds, with
// rfdriver.BuildBootISO and Debian's boot loaders, the ISO that the
// redfish-virtual-media boot interface builds from deploy_kernel and
// deploy_ramdisk (here the Debian kernel and the marker initramfs), and
// boots it from a CD with SeaBIOS (ISOLINUX) and with OVMF (GRUB from the
// El Torito EFI system partition image) when installed: each boot's
// kernel prints the command line with the parameters baked into the
// ISO's boot loader configurations.
func TestBootISOFromKernelAndRamdiskBoots(t *testing.T) {
	n := NewTestNetwork(t)
	loaders := rfdriver.DefaultBootLoaders()
	if !loaders.BIOS() {
		t.Skip("no ISOLINUX (Debian packages isolinux, syslinux-common): the boot ISO is not built")
	}
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
	const args = "console=ttyS0,115200 ipa-api-url=http://192.0.2.1:6385 ipa-global-request-id=req-built-iso"
	dir := t.TempDir()
	iso := filepath.Join(dir, "boot.iso")
	out, err := os.Create(iso)
	if err != nil {
		t.Fatal(err)
	}
	k, err := os.Open(kernel.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	r, err := os.Open(initrd)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start := time.Now()
	rep, err := rfdriver.BuildBootISO(ctx, k, r, args, loaders, dir, out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot ISO built in %.2fs: BIOS %v, UEFI %v (ESP %d bytes)", time.Since(start).Seconds(), rep.BIOS, rep.UEFI, rep.ESPSize)
	fws := []Firmware{BIOS}
	if _, err := os.Stat(OVMFCode); err == nil && rep.UEFI {
		fws = append(fws, UEFI)
	} else {
		t.Logf("no %s or no GRUB (Debian packages ovmf, grub-efi-amd64-bin): the UEFI boot is not tried", OVMFCode)
	}
	for _, fw := range fws {
		// 1 GiB: GRUB runs out of memory loading the kernel in OVMF with
		// 256 MiB.
		vm, err := StartVM(ctx, n, VMOptions{Name: "bootiso-" + string(fw), MAC: "52:54:00:a0:00:32", Firmware: fw, NoROM: true, MemoryMB: 1024,
			ExtraArgs: []string{"-drive", "id=cd0,if=none,file=" + iso + ",media=cdrom,readonly=on",
				"-device", "ide-cd,drive=cd0,bootindex=0"}})
		if err != nil {
			t.Fatal(err)
		}
		line, err := vm.Console.WaitFor(ctx, CmdlinePrefix)
		if err != nil {
			vm.Stop()
			t.Fatalf("%s: no command line: %v\n%s", fw, err, vm.Console.Transcript(vm.Started, 40))
		}
		if !strings.Contains(line.Text, args) {
			t.Errorf("%s: command line %q lacks the ISO's parameters %q", fw, line.Text, args)
		}
		t.Logf("%s: the built ISO's kernel printed its command line %.1fs after QEMU started", fw, line.At.Sub(vm.Started).Seconds())
		vm.Stop()
	}
}
