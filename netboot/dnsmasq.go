package netboot

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// DnsmasqFiles makes the Server write, beside its own configurations, the
// files an operator's own dnsmasq reads from --dhcp-hostsdir and
// --dhcp-optsdir, as Ironic's dnsmasq DHCP provider does: Anvil's DHCP
// server stays off and dnsmasq answers with Anvil's boot files, which
// Anvil's TFTP and HTTP serve.
//
// For each MAC, HostsDir/<mac> holds "<mac>,set:anvil-<node>"; for each
// node, OptsDir/anvil-<node> holds the boot options of that tag (boot
// file name, next-server, and HTTPClient's vendor class for HTTP boot).
// Files are replaced atomically (a temporary dot file, which dnsmasq
// skips, renamed over the old one); DeleteConfig removes them.
//
// dnsmasq must tag iPXE's requests "ipxe", as in
//
//	dhcp-userclass=set:ipxe,iPXE
//
// (the options send iPXE the script and everything else iPXE). dnsmasq
// reads new and changed files by itself but keeps what it read from a
// removed file until SIGHUP; that is harmless here: a machine sent to
// Anvil after its configuration is gone gets "boot from local disk" (an
// enrolled one) or nothing.
type DnsmasqFiles struct {
	HostsDir string
	OptsDir  string
}

func (d *DnsmasqFiles) check(tftp netip.Addr) error {
	for _, f := range []struct{ name, dir string }{{"HostsDir", d.HostsDir}, {"OptsDir", d.OptsDir}} {
		if !filepath.IsAbs(f.dir) {
			return &OptionsError{Field: "Dnsmasq." + f.name, Reason: fmt.Sprintf("%q is not an absolute path", f.dir)}
		}
		if fi, err := os.Stat(f.dir); err != nil || !fi.IsDir() {
			return &OptionsError{Field: "Dnsmasq." + f.name, Reason: fmt.Sprintf("%s is not a directory", f.dir)}
		}
	}
	if !tftp.Is4() {
		return &OptionsError{Field: "TFTPServer", Reason: "an IPv4 address is needed with Dnsmasq (dnsmasq's option server-ip-address)"}
	}
	return nil
}

func dnsmasqTag(node string) string { return "anvil-" + node }

// dnsmasqHosts is the content of a MAC's host file.
func dnsmasqHosts(c Config, mac string) []byte {
	return fmt.Appendf(nil, "# Anvil: node %s\n%s,set:%s\n", c.Node, mac, dnsmasqTag(c.Node))
}

// dnsmasqBoot is the content of a node's option file: the boot file by
// the node's interface and boot mode, for iPXE (tag ipxe) and for the
// firmware (tag !ipxe). iPXE's script is the chaining /boot.ipxe: the
// file is per node, and a node may have several MACs.
func (s *Server) dnsmasqBoot(c Config) []byte {
	tag := "tag:" + dnsmasqTag(c.Node)
	var lines []string
	opt := func(parts ...string) { lines = append(lines, tag+","+strings.Join(parts, ",")) }
	next := func() { opt("option:server-ip-address", s.opts.TFTPServer.String()) }
	switch c.Interface {
	case IPXE:
		file := string(fileUndionly)
		if c.Mode == UEFI {
			file = s.opts.UEFIIPXE
		}
		opt("tag:!ipxe", "option:bootfile-name", file)
		opt("tag:ipxe", "option:bootfile-name", s.base+"/boot.ipxe")
		next()
	case HTTPIPXE:
		opt("tag:!ipxe", "option:bootfile-name", s.base+"/ipxe/"+s.opts.UEFIIPXE)
		opt("tag:!ipxe", "option:vendor-class", "HTTPClient")
		opt("tag:ipxe", "option:bootfile-name", s.base+"/boot.ipxe")
	case PXE:
		file := string(filePXELinux)
		switch {
		case c.Mode == UEFI && c.SecureBoot:
			file = string(fileShim)
		case c.Mode == UEFI:
			file = string(fileGRUB)
		}
		opt("option:bootfile-name", file)
		next()
	case HTTP:
		opt("option:bootfile-name", s.base+"/grub/"+string(s.httpGRUB()))
		opt("option:vendor-class", "HTTPClient")
	}
	return []byte(fmt.Sprintf("# Anvil: node %s, interface %s, %s mode\n%s\n", c.Node, c.Interface, c.Mode, strings.Join(lines, "\n")))
}

// put writes the node's option file, then its MACs' host files (so that
// no host is tagged before its tag has options), and removes the host
// files of stale MACs.
func (d *DnsmasqFiles) put(c Config, stale []string, opts []byte) error {
	if err := writeAtomic(d.OptsDir, dnsmasqTag(c.Node), opts); err != nil {
		return err
	}
	for _, mac := range c.MACs {
		if err := writeAtomic(d.HostsDir, mac, dnsmasqHosts(c, mac)); err != nil {
			return err
		}
	}
	for _, mac := range stale {
		if err := removeFile(filepath.Join(d.HostsDir, mac)); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes the node's host files, then its option file.
func (d *DnsmasqFiles) remove(c Config) error {
	for _, mac := range c.MACs {
		if err := removeFile(filepath.Join(d.HostsDir, mac)); err != nil {
			return err
		}
	}
	return removeFile(filepath.Join(d.OptsDir, dnsmasqTag(c.Node)))
}

func removeFile(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("netboot: dnsmasq: %w", err)
	}
	return nil
}

// writeAtomic replaces dir/name with data: a temporary file whose name
// starts with '.' (dnsmasq ignores those in its watched directories),
// synced, then renamed, so dnsmasq never reads half a file.
func writeAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("netboot: dnsmasq: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("netboot: dnsmasq: writing %s: %w", filepath.Join(dir, name), err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("netboot: dnsmasq: %w", err)
	}
	return nil
}
