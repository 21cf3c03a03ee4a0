package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/netboot/grubimage"
)

func TestRun(t *testing.T) {
	if _, err := exec.LookPath("grub-mkimage"); err != nil {
		t.Skip("no grub-mkimage (Debian package grub-common)")
	}
	if _, err := os.Stat(filepath.Join(grubimage.DefaultModulesDir, "efinet.mod")); err != nil {
		t.Skip("no GRUB x86_64-efi modules (Debian package grub-efi-amd64-bin)")
	}
	out := filepath.Join(t.TempDir(), "grubhttpx64.efi")
	var stdout bytes.Buffer
	if err := run([]string{"-http-base", "http://192.0.2.1:8080", "-o", out}, &stdout); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(out)
	if err != nil || !bytes.Contains(img, []byte("set root=(http,192.0.2.1:8080)")) {
		t.Fatalf("the image lacks its embedded configuration (%v)", err)
	}
	if !strings.Contains(stdout.String(), "192.0.2.1:8080") {
		t.Errorf("output %q does not name the server", stdout.String())
	}
}

func TestRunRefuses(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.efi")
	err := run([]string{"-http-base", "https://192.0.2.1", "-o", out}, &bytes.Buffer{})
	var e *grubimage.Error
	if !errors.As(err, &e) || e.Field != "HTTPBase" {
		t.Errorf("an https base: %v, want an Error on HTTPBase", err)
	}
	if err := run([]string{"-http-base", "http://192.0.2.1", "-o", out, "extra"}, &bytes.Buffer{}); err == nil {
		t.Error("an extra argument was accepted")
	}
}
