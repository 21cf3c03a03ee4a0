// Package grubimage builds the GRUB EFI binary that the boot server's
// http boot interface serves to UEFI HTTP boot (netboot.Options.HTTPGRUB).
//
// UEFI HTTP boot hands the loader no PXE DHCP packet: the firmware's
// DHCP answer and the boot URL live in its own HTTP boot driver. Debian
// 12's monolithic grubnetx64.efi (GRUB 2.06) learns its network and its
// prefix only from that PXE packet, so loaded by UEFI HTTP boot it has
// neither, finds no configuration and stops at its prompt (seen with
// OVMF 2022.11). The image built here carries an embedded configuration
// that does what the firmware does not hand over:
//
//   - net_dhcp: GRUB's own DHCP on every NIC (the boot server answers
//     it: the NIC's MAC is enrolled), which gives each NIC an address
//     and the variables net_<card>_dhcp_mac;
//   - root and prefix: the boot server's HTTP address (host and port of
//     netboot.Options.HTTPBase, baked in at build time), so GRUB's
//     normal mode reads grub/grub.cfg from the boot server, whose master
//     configuration reads the configuration of the NIC the server knows
//     (boot/<mac>/grub.cfg), and that loads kernel and initrd over HTTP.
//
// The image is therefore built for one boot server address: rebuild it
// when HTTPBase changes. It is IPv4 only (net_dhcp), and unsigned (no
// Secure Boot). Build needs grub-mkimage (Debian package grub-common)
// and the x86_64-efi modules (grub-efi-amd64-bin); it takes a second.
package grubimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultModulesDir is where Debian's grub-efi-amd64-bin installs the
// x86_64-efi modules.
const DefaultModulesDir = "/usr/lib/grub/x86_64-efi"

// Modules are the GRUB modules built into the image: the network (efinet,
// net with net_dhcp, http), the configuration language of normal mode and
// the commands the boot server's configurations use (configfile, echo,
// test, linux with gzio for compressed initrds, boot, exit).
var Modules = []string{
	"efinet", "net", "http", "normal", "configfile", "echo", "test",
	"linux", "gzio", "boot", "minicmd", "sleep",
}

// Options say what to build.
type Options struct {
	// HTTPBase is the boot server's netboot.Options.HTTPBase, e.g.
	// "http://192.0.2.1:8080": plain http, an IPv4 address or a host
	// name, an optional port. A path in it is ignored (GRUB reads its
	// files from the server's root, as netboot serves them). Required.
	HTTPBase string
	// Out is the file to write (replaced atomically). Required.
	Out string
	// ModulesDir is the x86_64-efi modules directory; default
	// DefaultModulesDir.
	ModulesDir string
	// MkImage is the grub-mkimage program; default "grub-mkimage" from
	// PATH.
	MkImage string
}

// Error is a refusal of an Options field, or a failed build: it names the
// field (or "grub-mkimage") and why.
type Error struct {
	Field  string
	Reason string
	Err    error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("grubimage: %s: %s", e.Field, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// ErrNoTool is wrapped by Build's error when grub-mkimage or the modules
// directory is missing.
var ErrNoTool = errors.New("grub-mkimage or the GRUB x86_64-efi modules are not installed (Debian packages grub-common, grub-efi-amd64-bin)")

// Server returns the "host:port" GRUB's http device names for httpBase
// (port 80 when the URL has none).
func Server(httpBase string) (string, error) {
	bad := func(reason string) error { return &Error{Field: "HTTPBase", Reason: reason} }
	if httpBase == "" {
		return "", bad("empty (the boot server's HTTP base, e.g. http://192.0.2.1:8080)")
	}
	u, err := url.Parse(httpBase)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", bad(fmt.Sprintf("%.80q is not a plain http URL with a host (GRUB 2.06 speaks plain http)", httpBase))
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil && !a.Is4() {
		return "", bad(fmt.Sprintf("host %s is not IPv4: the image configures its network with DHCPv4 (net_dhcp)", host))
	}
	// A host name: letters, digits, '-' and '.', nothing GRUB's device
	// syntax or its script language would read otherwise.
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return "", bad(fmt.Sprintf("host %.80q holds %q: want an IPv4 address or a DNS name", host, r))
		}
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", bad(fmt.Sprintf("port %.20q is not 1-65535", port))
	}
	return net.JoinHostPort(host, port), nil
}

// EmbeddedConfig is the configuration built into the image for httpBase.
// GRUB runs it with its rescue parser (commands and assignments only),
// then enters normal mode, which reads $prefix/grub.cfg: the boot
// server's grub/grub.cfg.
func EmbeddedConfig(httpBase string) ([]byte, error) {
	srv, err := Server(httpBase)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Anvil: GRUB for UEFI HTTP boot from the boot server at %s.\n", srv)
	b.WriteString("# UEFI HTTP boot hands GRUB 2.06 no network: ask DHCP on every NIC.\n")
	b.WriteString("echo \"anvil-grub-http: DHCP\"\n")
	b.WriteString("net_dhcp\n")
	fmt.Fprintf(&b, "set root=(http,%s)\n", srv)
	b.WriteString("set prefix=($root)/grub\n")
	fmt.Fprintf(&b, "echo \"anvil-grub-http: reading $prefix/grub.cfg\"\n")
	return b.Bytes(), nil
}

// Build writes the image for o.HTTPBase to o.Out with grub-mkimage.
func Build(ctx context.Context, o Options) error {
	cfg, err := EmbeddedConfig(o.HTTPBase)
	if err != nil {
		return err
	}
	if o.Out == "" {
		return &Error{Field: "Out", Reason: "empty (the file to write)"}
	}
	if o.ModulesDir == "" {
		o.ModulesDir = DefaultModulesDir
	}
	if o.MkImage == "" {
		o.MkImage = "grub-mkimage"
	}
	mk, err := exec.LookPath(o.MkImage)
	if err != nil {
		return &Error{Field: "MkImage", Reason: fmt.Sprintf("%s not found", o.MkImage), Err: errors.Join(ErrNoTool, err)}
	}
	for _, m := range Modules {
		if _, err := os.Stat(filepath.Join(o.ModulesDir, m+".mod")); err != nil {
			return &Error{Field: "ModulesDir", Reason: fmt.Sprintf("no module %s in %s", m, o.ModulesDir), Err: errors.Join(ErrNoTool, err)}
		}
	}
	dir := filepath.Dir(o.Out)
	tmp, err := os.MkdirTemp(dir, ".grubimage-")
	if err != nil {
		return &Error{Field: "Out", Reason: "cannot write beside " + o.Out, Err: err}
	}
	defer os.RemoveAll(tmp)
	cfgPath := filepath.Join(tmp, "embedded.cfg")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return &Error{Field: "Out", Reason: "cannot write the embedded configuration", Err: err}
	}
	img := filepath.Join(tmp, "grubhttpx64.efi")
	// The prefix given here is replaced by the embedded configuration's.
	args := append([]string{"-O", "x86_64-efi", "-d", o.ModulesDir, "-o", img, "-p", "/grub", "-c", cfgPath}, Modules...)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, mk, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return &Error{Field: "grub-mkimage", Reason: strings.TrimSpace(tail(out.String(), 400)), Err: err}
	}
	if err := os.Chmod(img, 0o644); err != nil {
		return &Error{Field: "Out", Reason: "chmod", Err: err}
	}
	if err := os.Rename(img, o.Out); err != nil {
		return &Error{Field: "Out", Reason: "cannot move the image into place", Err: err}
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
