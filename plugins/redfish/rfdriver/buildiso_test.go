package rfdriver

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat12"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
)

// testLoaders writes stand-in boot loader files (distinct patterns, the
// GRUB one larger than 1 MiB as a real one is) and returns them.
func testLoaders(t *testing.T) (BootLoaders, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	content := map[string][]byte{
		"isolinux.bin": bytes.Repeat([]byte("ISOLINUX"), 1024),
		"ldlinux.c32":  bytes.Repeat([]byte("LDLINUX."), 2048),
		"grub.efi":     bytes.Repeat([]byte("MZ-GRUB-"), 200000),
	}
	for n, b := range content {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return BootLoaders{ISOLINUX: filepath.Join(dir, "isolinux.bin"), LDLinux: filepath.Join(dir, "ldlinux.c32"),
		GRUBEFI: filepath.Join(dir, "grub.efi")}, content
}

func buildTestISO(t *testing.T, kernel, ramdisk []byte, args string, l BootLoaders) (string, BootISOReport, error) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "boot.iso")
	out, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	rep, err := BuildBootISO(context.Background(), bytes.NewReader(kernel), bytes.NewReader(ramdisk), args, l, dir, out)
	return p, rep, err
}

// TestBuildBootISOContents builds a boot ISO from a kernel and a ramdisk
// and reads it back: the two El Torito entries (BIOS: isolinux.bin, load
// size 4, with a boot info table; UEFI: the EFI system partition image),
// the kernel and ramdisk byte for byte, isolinux.cfg's append line and
// grub.cfg's linux line with the arguments, and the FAT image holding
// GRUB as EFI/BOOT/BOOTX64.EFI and the same grub.cfg; the label; and
// the work directory left empty.
func TestBuildBootISOContents(t *testing.T) {
	l, loaders := testLoaders(t)
	kernel := bytes.Repeat([]byte("kernel"), 50000)
	ramdisk := bytes.Repeat([]byte("ramdisk"), 90000)
	p, rep, err := buildTestISO(t, kernel, ramdisk, testArgs, l)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.BIOS || !rep.UEFI || rep.ESPSize < int64(len(loaders["grub.efi"])) {
		t.Fatalf("report %+v", rep)
	}
	c := readISO(t, p)
	if c.label != BootISOLabel {
		t.Errorf("label %q", c.label)
	}
	if len(c.entries) != 2 {
		t.Fatalf("boot entries %+v", c.entries)
	}
	bios, efi := c.entries[0], c.entries[1]
	if bios.Platform != byte(iso9660.BIOS) || bios.Emulation != 0 || bios.Count != 4 || !bios.BootTable || bios.Path != "isolinux/isolinux.bin" {
		t.Errorf("BIOS entry %+v", bios)
	}
	if efi.Platform != byte(iso9660.EFI) || efi.Emulation != 0 || efi.Path != "boot/esp.img" || int64(efi.Count)*512 != rep.ESPSize {
		t.Errorf("UEFI entry %+v (ESP %d bytes)", efi, rep.ESPSize)
	}
	if !bytes.Equal(c.files["vmlinuz"], kernel) || !bytes.Equal(c.files["initrd"], ramdisk) {
		t.Errorf("kernel %d bytes, ramdisk %d bytes: not those given", len(c.files["vmlinuz"]), len(c.files["initrd"]))
	}
	if !bytes.Equal(c.files["isolinux/ldlinux.c32"], loaders["ldlinux.c32"]) {
		t.Error("ldlinux.c32 differs from the loader given")
	}
	iso := string(c.files["isolinux/isolinux.cfg"])
	if !strings.Contains(iso, "\n  kernel /vmlinuz\n  append initrd=/initrd "+testArgs+"\n") || !strings.Contains(iso, "default boot\n") {
		t.Errorf("isolinux.cfg:\n%s", iso)
	}
	grub := string(c.files["boot/grub/grub.cfg"])
	if !strings.Contains(grub, "\n  linux /vmlinuz "+testArgs+"\n  initrd /initrd\n") || !strings.Contains(grub, "--set=root --label "+BootISOLabel+"\n") {
		t.Errorf("grub.cfg:\n%s", grub)
	}
	espPath := filepath.Join(t.TempDir(), "esp.img")
	if err := os.WriteFile(espPath, c.files["boot/esp.img"], 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(espPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fat, err := fat12.Read(file.New(f, true), rep.ESPSize, 0, 512)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := fat.ReadFile("EFI/BOOT/BOOTX64.EFI"); err != nil || !bytes.Equal(b, loaders["grub.efi"]) {
		t.Errorf("BOOTX64.EFI in the ESP: %d bytes, %v", len(b), err)
	}
	if b, err := fat.ReadFile("EFI/BOOT/grub.cfg"); err != nil || string(b) != grub {
		t.Errorf("grub.cfg in the ESP: %q %v", b, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), "bootiso-*")); len(left) != 0 {
		t.Errorf("scratch left behind: %v", left)
	}
}

// TestBuildBootISOLoaders checks that the entries follow the loaders
// given: BIOS alone, UEFI alone, and neither refused.
func TestBuildBootISOLoaders(t *testing.T) {
	l, _ := testLoaders(t)
	k, r := []byte("k"), []byte("r")
	p, rep, err := buildTestISO(t, k, r, "a=1", BootLoaders{ISOLINUX: l.ISOLINUX, LDLinux: l.LDLinux})
	if err != nil {
		t.Fatal(err)
	}
	c := readISO(t, p)
	if !rep.BIOS || rep.UEFI || len(c.entries) != 1 || c.entries[0].Platform != byte(iso9660.BIOS) || c.files["boot/grub/grub.cfg"] != nil {
		t.Errorf("BIOS only: %+v, entries %+v", rep, c.entries)
	}
	p, rep, err = buildTestISO(t, k, r, "a=1", BootLoaders{GRUBEFI: l.GRUBEFI})
	if err != nil {
		t.Fatal(err)
	}
	c = readISO(t, p)
	if rep.BIOS || !rep.UEFI || len(c.entries) != 1 || c.entries[0].Platform != byte(iso9660.EFI) || c.files["isolinux/isolinux.cfg"] != nil {
		t.Errorf("UEFI only: %+v, entries %+v", rep, c.entries)
	}
	if _, _, err := buildTestISO(t, k, r, "a=1", BootLoaders{ISOLINUX: l.ISOLINUX}); !errors.Is(err, ErrNoBootLoader) {
		t.Errorf("ISOLINUX without ldlinux.c32: %v", err)
	}
	if _, _, err := buildTestISO(t, k, r, "a=1\nb", l); err == nil {
		t.Error("arguments with a line break accepted")
	}
}

// TestBuiltBootISOSeenByXorriso has xorriso, an independent ISO
// implementation, read a boot ISO built with Debian's loaders (when
// installed): BIOS and UEFI El Torito entries, the boot info table, the
// volume id, and grub.cfg; and mtools read the EFI image's loader.
func TestBuiltBootISOSeenByXorriso(t *testing.T) {
	x, err := exec.LookPath("xorriso")
	if err != nil {
		t.Skip("xorriso not installed (apt-get install xorriso)")
	}
	l := DefaultBootLoaders()
	if !l.BIOS() || !l.UEFI() {
		t.Skip("Debian's boot loaders are not installed (isolinux, syslinux-common, grub-efi-amd64-bin)")
	}
	p, _, err := buildTestISO(t, []byte("kernel"), []byte("ramdisk"), testArgs, l)
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		out, err := exec.Command(x, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("xorriso %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	rep := run("-indev", p, "-report_el_torito", "plain")
	norm := strings.Join(strings.Fields(rep), " ")
	for _, want := range []string{"El Torito boot img : 1 BIOS y none 0x0000 0x00 4 ", "El Torito boot img : 2 UEFI y none",
		"El Torito img path : 1 /isolinux/isolinux.bin", "El Torito img opts : 1 boot-info-table", "El Torito img path : 2 /boot/esp.img",
		"El Torito cat path : /boot/boot.cat", "Volume id : '" + BootISOLabel + "'"} {
		if !strings.Contains(norm, want) {
			t.Fatalf("xorriso El Torito report lacks %q:\n%s", want, rep)
		}
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "grub.cfg")
	run("-osirrox", "on", "-indev", p, "-extract", "/boot/grub/grub.cfg", out)
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), "linux /vmlinuz "+testArgs+"\n") {
		t.Fatalf("grub.cfg as xorriso reads it: %q %v", b, err)
	}
	mcopy, err := exec.LookPath("mcopy")
	if err != nil {
		return
	}
	esp := filepath.Join(dir, "esp.img")
	run("-osirrox", "on", "-indev", p, "-extract", "/boot/esp.img", esp)
	loader := filepath.Join(dir, "BOOTX64.EFI")
	cmd := exec.Command(mcopy, "-i", esp, "::EFI/BOOT/BOOTX64.EFI", loader)
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mcopy: %v\n%s", err, b)
	}
	got, _ := os.ReadFile(loader)
	want, _ := os.ReadFile(l.GRUBEFI)
	if !bytes.Equal(got, want) {
		t.Fatalf("mtools read a BOOTX64.EFI of %d bytes, GRUB has %d", len(got), len(want))
	}
}

// kernelTask is task without a deploy ISO: what BMO's driver_info is.
func kernelTask(s *redfishtest.Server, extra map[string]any) *driver.Task {
	tk := task(s, extra)
	delete(tk.DriverInfo, "redfish_deploy_iso")
	return tk
}

// TestVirtualMediaBuildsTheBootISOFromKernelAndRamdisk checks the
// redfish-virtual-media boot interface with BMO's driver_info:
// deploy_kernel and deploy_ramdisk URLs and no deploy ISO. PrepareRamdisk
// builds the boot ISO from them (BIOS and UEFI entries), with
// kernel_append_params and the conductor's parameters on isolinux.cfg's
// and grub.cfg's kernel lines, publishes it and inserts it; a second node
// with the same inputs gets the cached ISO (the kernel and ramdisk only
// revalidated, no new build), new parameters build a new one. Validate
// names what is missing or impossible.
func TestVirtualMediaBuildsTheBootISOFromKernelAndRamdisk(t *testing.T) {
	l, _ := testLoaders(t)
	s, d, dir, web := vmediaSetup(t, Options{BootLoaders: l})
	kernel, ramdisk := bytes.Repeat([]byte("kernel"), 4000), bytes.Repeat([]byte("ramdisk"), 9000)
	if err := os.WriteFile(filepath.Join(dir, "ipa.kernel"), kernel, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ipa.initramfs"), ramdisk, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info := map[string]any{"deploy_kernel": web.URL + "/ipa.kernel", "deploy_ramdisk": web.URL + "/ipa.initramfs", "kernel_append_params": "nofb"}
	tk := kernelTask(s, info)
	b := d.VirtualMediaBoot()
	if err := b.Validate(ctx, tk); err != nil {
		t.Fatal(err)
	}
	params := map[string]any{"ipa-api-url": "http://127.0.0.1:6385"}
	if err := b.PrepareRamdisk(ctx, tk, params); err != nil {
		t.Fatal(err)
	}
	sys := redfishtest.SystemPath(redfishtest.SystemID)
	cd := s.Resource(sys + "/VirtualMedia/CD1")
	if cd["Inserted"] != true || cd["Image"] != web.URL+"/"+bootISOName(tk.NodeUUID) {
		t.Fatalf("the built boot ISO is not in the CD: %v", cd)
	}
	img := s.MediaContent(sys + "/VirtualMedia/CD1")
	p := filepath.Join(t.TempDir(), "cd.iso")
	if err := os.WriteFile(p, img, 0o600); err != nil {
		t.Fatal(err)
	}
	c := readISO(t, p)
	if len(c.entries) != 2 || c.entries[0].Platform != byte(iso9660.BIOS) || c.entries[1].Platform != byte(iso9660.EFI) {
		t.Fatalf("boot entries %+v", c.entries)
	}
	if !bytes.Equal(c.files["vmlinuz"], kernel) || !bytes.Equal(c.files["initrd"], ramdisk) {
		t.Fatal("the ISO's kernel or ramdisk is not the one deploy_kernel or deploy_ramdisk names")
	}
	lines := kernelLines(t, img)
	if len(lines) != 2 {
		t.Fatalf("kernel lines %q", lines)
	}
	for _, line := range lines {
		if !strings.HasSuffix(line, " nofb ipa-api-url=http://127.0.0.1:6385") {
			t.Errorf("kernel line %q lacks the parameters", line)
		}
	}
	built := func() []string {
		m, _ := filepath.Glob(filepath.Join(d.opts.DeployISOCacheDir, "boot-*.iso"))
		return m
	}
	first := built()
	if len(first) != 1 {
		t.Fatalf("built ISOs in the cache: %v", first)
	}
	st1, _ := os.Stat(first[0])

	// A second node, the same inputs: the cached ISO.
	tk2 := kernelTask(s, info)
	tk2.NodeUUID = "2b2b2b2b-0000-4000-8000-000000000002"
	if err := b.PrepareRamdisk(ctx, tk2, params); err != nil {
		t.Fatal(err)
	}
	again := built()
	if st2, err := os.Stat(first[0]); len(again) != 1 || err != nil || !os.SameFile(st1, st2) {
		t.Fatalf("the same inputs built a new ISO: %v", again)
	}
	// Other parameters: another ISO.
	if err := b.PrepareRamdisk(ctx, tk2, map[string]any{"ipa-api-url": "http://127.0.0.2:6385"}); err != nil {
		t.Fatal(err)
	}
	if n := len(built()); n != 2 {
		t.Fatalf("%d built ISOs after new parameters, want 2", n)
	}
	if err := b.CleanUpRamdisk(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if err := b.CleanUpRamdisk(ctx, tk2); err != nil {
		t.Fatal(err)
	}
	if left := storeFiles(t, dir); !slices.Equal(left, []string{"ipa.initramfs", "ipa.kernel"}) {
		t.Fatalf("left in the media store: %v", left)
	}

	var miss *driver.MissingParameterError
	if err := b.Validate(ctx, kernelTask(s, map[string]any{"deploy_kernel": web.URL + "/ipa.kernel"})); !errors.As(err, &miss) ||
		!slices.Equal(miss.Missing, []string{"deploy_ramdisk"}) {
		t.Errorf("deploy_kernel alone: %v", err)
	}
	var inv *driver.InvalidParameterError
	if err := b.Validate(ctx, kernelTask(s, map[string]any{"deploy_kernel": "ipa.kernel", "deploy_ramdisk": web.URL + "/x"})); !errors.As(err, &inv) ||
		inv.Key != "deploy_kernel" {
		t.Errorf("a relative deploy_kernel: %v", err)
	}
	plain := NewDrivers(Options{BootLoaders: l})
	defer plain.Close(ctx)
	if err := plain.VirtualMediaBoot().Validate(ctx, kernelTask(s, info)); !errors.As(err, &inv) || inv.Key != "deploy_kernel" ||
		!strings.Contains(inv.Expected, "media store") {
		t.Errorf("no media store: %v", err)
	}
}

// TestVirtualMediaBootsARamdiskInstance checks a ramdisk deploy's
// instance boot (Metal3's live ISO): PrepareInstance inserts
// instance_info boot_iso as it is and makes the CD the persistent boot
// device; CleanUpInstance ejects it. With instance_info kernel and
// ramdisk instead, the instance ISO is built from them.
func TestVirtualMediaBootsARamdiskInstance(t *testing.T) {
	l, _ := testLoaders(t)
	s, d, dir, web := vmediaSetup(t, Options{BootLoaders: l})
	ctx := context.Background()
	tk := kernelTask(s, nil)
	tk.Interfaces = map[driver.Kind]string{driver.KindDeploy: RamdiskDeploy}
	tk.InstanceInfo = map[string]any{"boot_iso": web.URL + "/ipa.iso"}
	b := d.VirtualMediaBoot()
	if err := b.PrepareInstance(ctx, tk); err != nil {
		t.Fatal(err)
	}
	sys := redfishtest.SystemPath(redfishtest.SystemID)
	if cd := s.Resource(sys + "/VirtualMedia/CD1"); cd["Inserted"] != true || cd["Image"] != web.URL+"/ipa.iso" {
		t.Fatalf("the live ISO is not in the CD: %v", cd)
	}
	boot, _ := s.Resource(sys)["Boot"].(map[string]any)
	if boot["BootSourceOverrideTarget"] != "Cd" || boot["BootSourceOverrideEnabled"] != "Continuous" {
		t.Fatalf("boot override %v, want a persistent boot from CD", boot)
	}
	if err := b.CleanUpInstance(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if cd := s.Resource(sys + "/VirtualMedia/CD1"); cd["Inserted"] != false {
		t.Fatalf("CD not ejected: %v", cd)
	}
	// instance_info kernel and ramdisk: an instance ISO built from them
	// with instance_info kernel_append_params, published, inserted, and
	// removed again by CleanUpInstance.
	if err := os.WriteFile(filepath.Join(dir, "live.kernel"), []byte("live kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "live.initrd"), []byte("live initrd"), 0o644); err != nil {
		t.Fatal(err)
	}
	tk.InstanceInfo = map[string]any{"kernel": web.URL + "/live.kernel", "ramdisk": web.URL + "/live.initrd", "kernel_append_params": "live=1 console=ttyS0"}
	if err := b.PrepareInstance(ctx, tk); err != nil {
		t.Fatal(err)
	}
	cd := s.Resource(sys + "/VirtualMedia/CD1")
	if cd["Inserted"] != true || cd["Image"] != web.URL+"/"+instanceISOName(tk.NodeUUID) {
		t.Fatalf("the instance ISO is not in the CD: %v", cd)
	}
	lines := kernelLines(t, s.MediaContent(sys+"/VirtualMedia/CD1"))
	if len(lines) != 2 || !strings.HasSuffix(lines[0], " live=1 console=ttyS0") || !strings.HasSuffix(lines[1], " live=1 console=ttyS0") {
		t.Fatalf("instance ISO kernel lines %q", lines)
	}
	if err := b.CleanUpInstance(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, instanceISOName(tk.NodeUUID))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the instance ISO is still published: %v", err)
	}

	// Neither boot_iso nor kernel and ramdisk.
	tk.InstanceInfo = map[string]any{"kernel": web.URL + "/k"}
	var miss *driver.MissingParameterError
	if err := b.PrepareInstance(ctx, tk); !errors.As(err, &miss) || miss.Field != "instance_info" {
		t.Fatalf("instance_info with a kernel alone: %v", err)
	}
}
