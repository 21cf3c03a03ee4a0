package vmlab

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat16"
)

// TestESPFilesIgnoresAccessDates builds a disk with a FAT16 ESP at
// 1 MiB, copies it, and checks espDiff: a directory entry's access date
// rewritten (what a Linux mount that reads the file does on a later
// day) is no difference, a changed byte of a file's contents, a missing
// file and an extra one are, each named.
func TestESPFilesIgnoresAccessDates(t *testing.T) {
	const off, size = 1 << 20, 32 << 20
	dir := t.TempDir()
	img := filepath.Join(dir, "image.raw")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(off + size + 1<<20); err != nil {
		t.Fatal(err)
	}
	fs, err := fat16.Create(file.New(f, false), size, off, 512, "ANVILESP", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/EFI", "/EFI/BOOT", "/EFI/anvil"} {
		if err := fs.Mkdir(d); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, data []byte) {
		w, err := fs.OpenFile(p, os.O_CREATE|os.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write("/EFI/BOOT/BOOTX64.EFI", bytes.Repeat([]byte("shim"), 5000))
	write("/EFI/anvil/BOOTX64.CSV", []byte("grubx64.efi,anvil-os,,\n"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	want, err := espFiles(img, off, size)
	if err != nil {
		t.Fatal(err)
	}
	if len(want["EFI/anvil/BOOTX64.CSV"]) == 0 || want["EFI/BOOT"] != nil || len(want) != 5 {
		t.Fatalf("espFiles read %d paths, want 5 with the CSV's contents: %q", len(want), keys(want))
	}

	disk := filepath.Join(dir, "disk.raw")
	check := func(name string, change func(b []byte), wantDiff string) {
		t.Helper()
		b := bytes.Clone(raw)
		change(b)
		if err := os.WriteFile(disk, b, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := espFiles(disk, off, size)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := espDiff(want, got); !strings.Contains(d, wantDiff) || (wantDiff == "") != (d == "") {
			t.Errorf("%s: espDiff = %q, want %q", name, d, wantDiff)
		}
	}
	entry := func(b []byte, short string) int {
		i := bytes.Index(b[off:off+size], []byte(short))
		if i < 0 || i%32 != 0 {
			t.Fatalf("no directory entry %q", short)
		}
		return off + i
	}
	check("access date", func(b []byte) {
		e := entry(b, "BOOTX64 CSV")
		b[e+18], b[e+19] = 0x88, 0x5d // 2026-12-08
	}, "")
	check("contents", func(b []byte) {
		i := bytes.Index(b[off:], []byte("anvil-os"))
		b[off+i] = 'A'
	}, "contents differ: EFI/anvil/BOOTX64.CSV")
	check("missing", func(b []byte) {
		b[entry(b, "BOOTX64 CSV")] = 0xe5 // deleted
	}, "missing EFI/anvil/BOOTX64.CSV")
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
