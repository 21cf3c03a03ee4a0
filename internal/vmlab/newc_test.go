package vmlab

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteNewcMemberLayout(t *testing.T) {
	var b bytes.Buffer
	if err := writeNewc(&b, []cpioEntry{{Name: "init", Mode: 0o755, Data: []byte("#!/bin/sh\n")}}); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	// 110-byte header, "init\0" padded to 116, 10 data bytes padded to 128.
	wantHeader := "070701" + "00000001" + "000081ed" + "00000000" + "00000000" + "00000001" + "00000000" +
		"0000000a" + "00000000" + "00000000" + "00000000" + "00000000" + "00000005" + "00000000"
	if !strings.HasPrefix(got, wantHeader+"init\x00\x00#!/bin/sh\n\x00\x00") {
		t.Fatalf("member = %q", got[:min(len(got), 140)])
	}
	trailer := got[128:]
	if !strings.HasPrefix(trailer, "070701") || !strings.Contains(trailer, "TRAILER!!!\x00") || len(got)%4 != 0 {
		t.Fatalf("trailer = %q (archive %d bytes)", trailer, len(got))
	}
}

func TestWriteNewcRefuses(t *testing.T) {
	for _, e := range []cpioEntry{
		{Name: "", Mode: 0o644},
		{Name: "/abs", Mode: 0o644},
		{Name: "d", Mode: fs.ModeDir | 0o755, Data: []byte("x")},
		{Name: "p", Mode: fs.ModeNamedPipe | 0o644},
	} {
		if err := writeNewc(&bytes.Buffer{}, []cpioEntry{e}); err == nil {
			t.Errorf("writeNewc(%+v) = nil error", e)
		}
	}
}

// TestMarkerInitramfsUnpacks checks the archive with GNU cpio (the format's
// other implementation here): every member, its type, mode and content.
func TestMarkerInitramfsUnpacks(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("no cpio (Debian package cpio)")
	}
	fakeBusybox := []byte("\x7fELF not really")
	var gz bytes.Buffer
	if err := writeMarkerInitramfs(&gz, fakeBusybox); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := writeMarkerInitramfs(&again, fakeBusybox); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gz.Bytes(), again.Bytes()) {
		t.Fatal("two builds of the same initramfs differ")
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", "gzip -dc | cpio -i --quiet --no-absolute-filenames -v 2>&1")
	cmd.Dir = dir
	cmd.Stdin = &gz
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cpio -i: %v: %s", err, out)
	}
	listed := strings.Fields(string(out))
	want := []string{"bin", "dev", "dev/console", "proc", "sys", "bin/busybox", "bin/sh", "bin/mount", "bin/cat", "bin/echo", "bin/poweroff", "init"}
	if strings.Join(listed, " ") != strings.Join(want, " ") {
		t.Errorf("members %v, want %v", listed, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "bin/busybox")); err != nil || !bytes.Equal(b, fakeBusybox) {
		t.Errorf("bin/busybox = %q, %v", b, err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "bin/sh")); err != nil || target != "busybox" {
		t.Errorf("bin/sh -> %q, %v", target, err)
	}
	st, err := os.Stat(filepath.Join(dir, "init"))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("init: %v %v", st, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "init")); string(b) != markerInit {
		t.Errorf("init = %q", b)
	}
	// The console node is made only as root (cpio -i as another user
	// skips it with a message).
	if os.Geteuid() == 0 {
		st, err := os.Lstat(filepath.Join(dir, "dev/console"))
		if err != nil || st.Mode()&fs.ModeCharDevice == 0 {
			t.Errorf("dev/console: %v %v", st, err)
		}
	}
}

func TestCheckStatic(t *testing.T) {
	if err := checkStatic([]byte("#!/bin/sh")); err == nil {
		t.Error("a script passed as a static binary")
	}
	if b, err := os.ReadFile("/bin/ls"); err == nil {
		if err := checkStatic(b); err == nil {
			t.Error("/bin/ls (dynamically linked) passed as static")
		}
	}
	if b, err := os.ReadFile(BusyboxPath); err == nil {
		if err := checkStatic(b); err != nil {
			t.Logf("%s is not static here: %v", BusyboxPath, err)
		}
	}
}
