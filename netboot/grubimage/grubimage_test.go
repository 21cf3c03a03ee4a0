package grubimage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestServer(t *testing.T) {
	for _, tc := range []struct{ base, want string }{
		{"http://192.0.2.1:8080", "192.0.2.1:8080"},
		{"http://192.0.2.1", "192.0.2.1:80"},
		{"http://192.0.2.1:8080/netboot/", "192.0.2.1:8080"},
		{"http://boot.example.net:81", "boot.example.net:81"},
	} {
		got, err := Server(tc.base)
		if err != nil || got != tc.want {
			t.Errorf("Server(%q) = %q, %v; want %q", tc.base, got, err, tc.want)
		}
	}
	for _, base := range []string{
		"", "https://192.0.2.1", "ftp://192.0.2.1", "http://[fd00::1]:8080", "http://192.0.2.1:0",
		"http://user:pw@192.0.2.1", "http://192.0.2.1/?x=1", "http://boot_server", "http://192.0.2.1:8080#f",
	} {
		_, err := Server(base)
		var e *Error
		if !errors.As(err, &e) || e.Field != "HTTPBase" || e.Reason == "" {
			t.Errorf("Server(%q): %v, want an Error on HTTPBase", base, err)
		}
	}
}

func TestEmbeddedConfig(t *testing.T) {
	cfg, err := EmbeddedConfig("http://192.0.2.1:8080/")
	if err != nil {
		t.Fatal(err)
	}
	// The rescue parser runs it: one command or assignment a line, no
	// if, for or function.
	var cmds []string
	for _, l := range strings.Split(string(cfg), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, _, _ := strings.Cut(l, " ")
		name, _, _ = strings.Cut(name, "=")
		cmds = append(cmds, name)
	}
	if got, want := strings.Join(cmds, " "), "echo net_dhcp set set echo"; got != want {
		t.Errorf("embedded commands %q, want %q:\n%s", got, want, cfg)
	}
	for _, want := range []string{"net_dhcp\n", "set root=(http,192.0.2.1:8080)\n", "set prefix=($root)/grub\n"} {
		if !bytes.Contains(cfg, []byte(want)) {
			t.Errorf("embedded configuration lacks %q:\n%s", want, cfg)
		}
	}
}

// TestBuild builds the image with Debian's grub-mkimage and modules.
func TestBuild(t *testing.T) {
	if _, err := exec.LookPath("grub-mkimage"); err != nil {
		t.Skip("no grub-mkimage (Debian package grub-common)")
	}
	if _, err := os.Stat(filepath.Join(DefaultModulesDir, "efinet.mod")); err != nil {
		t.Skip("no GRUB x86_64-efi modules (Debian package grub-efi-amd64-bin)")
	}
	out := filepath.Join(t.TempDir(), "grubhttpx64.efi")
	if err := Build(context.Background(), Options{HTTPBase: "http://192.0.2.1:8080", Out: out}); err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(img, []byte("MZ")) {
		t.Errorf("the image is not a PE file: starts %q", img[:min(8, len(img))])
	}
	// grub-mkimage stores the embedded configuration as it is.
	if !bytes.Contains(img, []byte("set root=(http,192.0.2.1:8080)\n")) {
		t.Error("the image does not hold the embedded configuration")
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".grubimage-*"))
	if len(left) != 0 {
		t.Errorf("the build left %v behind", left)
	}
}

func TestBuildRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		o      Options
		field  string
		noTool bool
	}{
		{"no base", Options{Out: filepath.Join(dir, "x.efi")}, "HTTPBase", false},
		{"no out", Options{HTTPBase: "http://192.0.2.1"}, "Out", false},
		{"no mkimage", Options{HTTPBase: "http://192.0.2.1", Out: filepath.Join(dir, "x.efi"), MkImage: filepath.Join(dir, "none")}, "MkImage", true},
		{"no modules", Options{HTTPBase: "http://192.0.2.1", Out: filepath.Join(dir, "x.efi"), MkImage: "/bin/true", ModulesDir: dir}, "ModulesDir", true},
	} {
		err := Build(context.Background(), tc.o)
		var e *Error
		if !errors.As(err, &e) || e.Field != tc.field {
			t.Errorf("%s: %v, want an Error on %s", tc.name, err, tc.field)
		}
		if errors.Is(err, ErrNoTool) != tc.noTool {
			t.Errorf("%s: errors.Is(ErrNoTool) = %v, want %v", tc.name, !tc.noTool, tc.noTool)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.efi")); err == nil {
		t.Error("a refused build wrote its output")
	}
}
