package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// On a machine without the build tools every image is reported as
// unavailable, one line each, and the run is no failure: the tests that
// need the images skip with the same reason. The marker initramfs needs
// only busybox-static, so it is built where that is installed.
func TestRunReportsUnavailableImages(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no apt-cache, debootstrap, syslinux, xorriso...
	cache := t.TempDir()
	t.Setenv("ANVIL_VMLAB_CACHE", cache)
	var out strings.Builder
	err := run(context.Background(), []string{"-ipa-tarball", filepath.Join(t.TempDir(), "none.tar.gz")}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 10 || lines[0] != "cache "+cache {
		t.Fatalf("want the cache line and one line per image, got:\n%s", out.String())
	}
	for i, name := range []string{"kernel", "marker-initramfs", "os-image", "os-image-uefi", "os-image-uefi-sb", "os-image-part", "os-image-raid", "ipa-ramdisk", "ipa-iso"} {
		line := lines[i+1]
		if !strings.HasPrefix(line, name+" ") {
			t.Fatalf("line %d is not %s's: %q", i+1, name, line)
		}
		if name == "marker-initramfs" {
			if _, err := os.Stat("/bin/busybox"); err == nil && strings.Contains(line, " ready in ") {
				continue
			}
		}
		if !strings.Contains(line, " unavailable after ") {
			t.Errorf("%s: %q, want it unavailable", name, line)
		}
	}
}

func TestRunRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{{"-timeout", "0s"}, {"-timeout", "-1m"}, {"extra"}, {"-no-such-flag"}} {
		var out strings.Builder
		if err := run(context.Background(), args, &out); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}
