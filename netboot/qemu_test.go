package netboot

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/netboot/dhcp"
	"github.com/anvilmetal/anvil/netboot/tftp"
)

// The firmware test: real iPXE (Debian's ipxe-qemu option ROM), real
// pxelinux and real GRUB boot a kernel and an initramfs this test builds
// through what the Server generates, under QEMU (TCG) with QEMU's user
// network. QEMU's own DHCP and TFTP stand in for netboot/dhcp and
// netboot/tftp (they are tested on their own): the boot file is the one
// DecideBoot chose, QEMU's TFTP directory holds exactly what OpenTFTP
// returns for the names the loaders ask, and iPXE fetches over HTTP from
// Handler on 127.0.0.1 (10.0.2.2 inside the guest). The initramfs prints
// its kernel command line, so the test sees BOOTIF and the parameters
// arrive.
//
// It needs qemu-system-x86, ipxe-qemu, busybox-static, and a Debian
// kernel image: set ANVIL_NETBOOT_KERNEL to a bzImage (e.g. vmlinuz of
// linux-image-6.1.0-*-amd64, from apt-get download and dpkg-deb -x).
func TestQEMUBoots(t *testing.T) {
	kernel := os.Getenv("ANVIL_NETBOOT_KERNEL")
	if kernel == "" {
		t.Skip("firmware test: set ANVIL_NETBOOT_KERNEL to a Debian bzImage (needs qemu-system-x86, ipxe-qemu, busybox-static)")
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("firmware test: qemu-system-x86_64 not installed")
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("firmware test: busybox not installed")
	}
	initrd := filepath.Join(t.TempDir(), "initrd.gz")
	writeFile(t, initrd, markerInitramfs(t, busybox))

	for _, tc := range []qemuCase{
		{"ipxe-bios", IPXE, BIOS, "config"},
		{"pxe-bios", PXE, BIOS, "config"},
		{"ipxe-uefi", IPXE, UEFI, "config"},
		{"pxe-uefi", PXE, UEFI, "config"},
		// A machine nobody enrolled boots the fallback over iPXE.
		{"fallback-bios", IPXE, BIOS, "fallback"},
		// Local disk: the disk's boot sector prints a marker.
		{"ipxe-local-bios", IPXE, BIOS, "local"},
		{"pxe-local-bios", PXE, BIOS, "local"},
		{"enrolled-bios", IPXE, BIOS, "enrolled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bootQEMU(t, qemu, kernel, initrd, tc)
		})
	}
}

// qemuCase is one firmware boot: the interface and mode of the node's
// configuration, and the machine: "config" (a ramdisk configuration),
// "local" (a local-disk one), "enrolled" (no configuration, the
// Resolver knows it) or "fallback" (nobody knows it).
type qemuCase struct {
	name    string
	iface   Interface
	mode    Mode
	machine string
}

func bootQEMU(t *testing.T, qemu, kernel, initrd string, tc qemuCase) {
	const mac = "52:54:00:12:34:56"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	rec := &recorder{}
	marker := fmt.Sprintf("m%d", time.Now().UnixNano())
	params := []string{"console=ttyS0", "anvil.marker=" + marker, "panic=-1"}
	res := &mapResolver{m: map[string]string{}}
	o := Options{
		HTTPBase: fmt.Sprintf("http://10.0.2.2:%d", port),
		Observer: rec,
		Resolver: res,
		Clock:    clock.System(),
		Logger:   slog.New(slog.DiscardHandler),
	}
	if tc.machine == "fallback" {
		o.Fallback = &Fallback{Kernel: kernel, Ramdisk: initrd, Params: params}
	}
	srv, err := New(o)
	if err != nil {
		t.Skip("firmware test: ", err)
	}
	ctx := context.Background()
	var want string // the stages recorded (iPXE only: the others use QEMU's TFTP)
	c := Config{Node: "node-1", MACs: []string{mac}, Interface: tc.iface, Mode: tc.mode, Action: Ramdisk, Purpose: "deploy",
		Kernel: kernel, Ramdisk: initrd, Params: params}
	switch tc.machine {
	case "fallback":
		want = "fallback,kernel,ramdisk"
	case "enrolled":
		res.m[mac] = "node-1"
		want = "local boot"
	case "local":
		c = Config{Node: "node-1", MACs: []string{mac}, Interface: tc.iface, Mode: tc.mode, Action: LocalDisk}
		want = "local boot"
	default:
		want = "boot prepared,boot script,kernel,ramdisk"
	}
	if tc.machine == "config" || tc.machine == "local" {
		if err := srv.PutConfig(ctx, c); err != nil {
			t.Skip("firmware test: ", err)
		}
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	// What QEMU's DHCP tells the firmware: DecideBoot's answer to a PXE
	// client (for ipxe, its answer to iPXE: the ROM is iPXE).
	d := srv.DecideBoot(ctx, dhcpClient(mac, tc.mode, tc.iface == IPXE))
	tftpDir := t.TempDir()
	if !strings.HasPrefix(d.BootFile, "http://") {
		// QEMU's TFTP serves what OpenTFTP returns for every name the
		// loader will ask.
		names := []string{d.BootFile}
		if tc.machine == "config" {
			names = append(names, strings.TrimPrefix(KernelPath(mac), "/"), strings.TrimPrefix(RamdiskPath(mac), "/"))
		}
		if tc.mode == BIOS {
			names = append(names, "ldlinux.c32", PXELinuxConfigName(mac))
		} else {
			// GRUB reads grub/grub.cfg, which reads the MAC's by
			// ${net_default_mac}, with colons.
			names = append(names, "grub/grub.cfg", "boot/"+mac+"/grub.cfg")
		}
		for _, name := range names {
			f, err := srv.OpenTFTP(ctx, &tftp.Request{Filename: name})
			if err != nil {
				t.Fatalf("OpenTFTP(%s): %v", name, err)
			}
			data, _ := io.ReadAll(io.NewSectionReader(f, 0, f.Size()))
			f.Close()
			writeFile(t, filepath.Join(tftpDir, name), data)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	args := []string{"-accel", "tcg", "-m", "512", "-nographic", "-no-reboot",
		"-netdev", "user,id=n0,tftp=" + tftpDir + ",bootfile=" + d.BootFile,
		"-device", "virtio-net-pci,netdev=n0,mac=" + mac, "-boot", "n"}
	if tc.mode == UEFI {
		const ovmf = "/usr/share/qemu/OVMF.fd"
		if _, err := os.Stat(ovmf); err != nil {
			t.Skip("firmware test: no UEFI firmware at " + ovmf + " (qemu-system-data or ovmf)")
		}
		args = append(args, "-bios", ovmf)
	}
	if tc.machine == "local" || tc.machine == "enrolled" {
		disk := filepath.Join(t.TempDir(), "disk.img")
		writeFile(t, disk, markerDisk())
		args = append(args, "-drive", "file="+disk+",format=raw,if=none,id=d0", "-device", "ide-hd,drive=d0")
		if tc.iface == IPXE {
			// The NIC only, strictly: a script that failed and returned
			// to the BIOS must not reach the disk by the boot order;
			// the script's sanboot reaches it through INT 13h.
			// (pxelinux's LOCALBOOT 0 is "the BIOS's next device", so the
			// pxe case keeps the default order; a broken configuration
			// would leave pxelinux at its prompt.)
			i := slices.Index(args, "virtio-net-pci,netdev=n0,mac="+mac)
			args[i] += ",bootindex=1"
			args[slices.Index(args, "-boot")+1] = "strict=on"
		}
	}
	cmd := exec.CommandContext(ctx, qemu, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
		cmd.Wait()
	})
	var log bytes.Buffer
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var cmdline string
	local := false
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		if strings.Contains(line, localDiskMarker) {
			local = true
			break
		}
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ANVIL-CMDLINE "); ok {
			cmdline = rest
			break
		}
	}
	took := time.Since(start).Round(time.Second)
	switch tc.machine {
	case "local", "enrolled":
		if !local {
			t.Fatalf("the local disk did not boot in %s (command line %q); console:\n%s", took, cmdline, tail(log.String(), 3000))
		}
		t.Logf("local disk booted in %s", took)
	default:
		if cmdline == "" {
			t.Fatalf("no command line from the guest in %s; console:\n%s", took, tail(log.String(), 3000))
		}
		t.Logf("booted in %s: %s", took, cmdline)
		for _, want := range []string{"anvil.marker=" + marker, "BOOTIF=01-52-54-00-12-34-56", "console=ttyS0"} {
			if !strings.Contains(cmdline, want) {
				t.Errorf("command line %q lacks %s", cmdline, want)
			}
		}
	}
	if tc.iface == IPXE {
		if got := stages(rec.all()); got != want {
			t.Errorf("stages %s, want %s", got, want)
		}
		for _, r := range rec.all() {
			t.Logf("stage: %s", r.Phrase())
		}
	}
}

// localDiskMarker is what markerDisk's boot sector prints on COM1.
const localDiskMarker = "ANVIL-LOCALDISK"

// markerDisk is a 1 MiB disk whose MBR boot sector writes
// localDiskMarker to COM1 and halts: the proof that "boot from local
// disk" reached the disk.
func markerDisk() []byte {
	code := []byte{
		0xfc,       // cld
		0x31, 0xc0, // xor ax, ax
		0x8e, 0xd8, // mov ds, ax
		0xba, 0xf8, 0x03, // mov dx, 0x3f8
		0xbe, 0x16, 0x7c, // mov si, 0x7c16 (the message)
		0xac,       // next: lodsb
		0x84, 0xc0, // test al, al
		0x74, 0x03, // jz halt
		0xee,       // out dx, al
		0xeb, 0xf8, // jmp next
		0xf4,       // halt: hlt
		0xeb, 0xfd, // jmp halt
	}
	disk := make([]byte, 1<<20)
	n := copy(disk, code)
	copy(disk[n:], localDiskMarker+"\r\n\x00")
	disk[510], disk[511] = 0x55, 0xaa
	return disk
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// markerInitramfs is a gzip'ed newc cpio with busybox and an /init that
// prints the kernel command line and powers off.
func markerInitramfs(t *testing.T, busybox string) []byte {
	t.Helper()
	bb, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	init := "#!/bin/busybox sh\n/bin/busybox mkdir -p /proc\n/bin/busybox mount -t proc proc /proc\n" +
		"echo \"ANVIL-CMDLINE $(/bin/busybox cat /proc/cmdline)\"\n/bin/busybox poweroff -f\n"
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	w := cpioWriter{w: zw}
	w.entry("bin", 0o40755, nil)
	w.entry("dev", 0o40755, nil)
	w.entry("dev/console", 0o20600, nil) // character device 5:1, below
	w.entry("bin/busybox", 0o100755, bb)
	w.entry("bin/sh", 0o120777, []byte("busybox"))
	w.entry("init", 0o100755, []byte(init))
	w.entry("TRAILER!!!", 0, nil)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type cpioWriter struct {
	w   io.Writer
	ino int
}

// entry writes one newc header and body (4-byte aligned).
func (c *cpioWriter) entry(name string, mode int, data []byte) {
	c.ino++
	rdevMajor, rdevMinor := 0, 0
	if name == "dev/console" {
		rdevMajor, rdevMinor = 5, 1
	}
	nlink := 1
	if mode&0o40000 != 0 && mode&0o100000 == 0 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	io.WriteString(c.w, hdr)
	io.WriteString(c.w, name+"\x00")
	pad := func(n int) { c.w.Write(make([]byte, (4-n%4)%4)) }
	pad(110 + len(name) + 1)
	c.w.Write(data)
	pad(len(data))
}

// dhcpClient is the client QEMU's firmware (iPXE, BIOS or EFI) is: PXE, and iPXE
// when the interface chains through iPXE (the ROM is iPXE itself).
func dhcpClient(mac string, mode Mode, ipxe bool) dhcp.Client {
	arch := dhcp.ArchBIOS
	if mode == UEFI {
		arch = dhcp.ArchEFIx64
	}
	return dhcp.Client{MAC: mac, Arch: arch, PXEClient: true, IPXE: ipxe}
}
