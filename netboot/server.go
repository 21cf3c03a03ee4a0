package netboot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/netboot/dhcp"
	"github.com/anvilmetal/anvil/netboot/stage"
)

// Default locations of the boot loader binaries, as Debian installs them.
const (
	// DefaultIPXEDir is where Debian's ipxe package installs
	// undionly.kpxe, snponly.efi and ipxe.efi.
	DefaultIPXEDir = "/usr/lib/ipxe"
	// DefaultPXELinux is pxelinux.0 of Debian's pxelinux package.
	DefaultPXELinux = "/usr/lib/PXELINUX/pxelinux.0"
	// DefaultSyslinuxModules is the BIOS modules directory of Debian's
	// syslinux-common package (ldlinux.c32).
	DefaultSyslinuxModules = "/usr/lib/syslinux/modules/bios"
	// DefaultGRUB is the monolithic network GRUB of Debian's
	// grub-efi-amd64-bin package. For Secure Boot, point Options.GRUB at
	// grub-efi-amd64-signed's /usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed.
	DefaultGRUB = "/usr/lib/grub/x86_64-efi/monolithic/grubnetx64.efi"
	// DefaultShim is Debian's shim signed by Microsoft (shim-signed).
	DefaultShim = "/usr/lib/shim/shimx64.efi.signed"
	// DefaultSignedGRUB is Debian's signed network GRUB
	// (grub-efi-amd64-signed), which shim loads and trusts.
	DefaultSignedGRUB = "/usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed"
)

// Options configure a Server.
type Options struct {
	// HTTPBase is the plain http URL machines reach the server's Handler
	// at, e.g. "http://192.0.2.1:8080"; the DHCP boot file URLs and the
	// iPXE scripts' URLs start with it. Required. It is what the machines
	// see, not a listen address (that is ListenOptions.HTTPAddr, or the
	// embedder's own HTTP server): behind a proxy or NAT they differ. A
	// path in it ("http://192.0.2.1/netboot") goes into the URLs iPXE
	// and the firmware get, but Handler serves from "/" (mount it with
	// http.StripPrefix), and GRUB (interface http) reads its files from
	// the server's root whatever the path.
	HTTPBase string
	// TFTPServer is the TFTP server's address for DHCP's next-server
	// (siaddr); the zero Addr lets the DHCP server use its own.
	TFTPServer netip.Addr
	// HTTPBase6 is HTTPBase for machines on IPv6 (DHCPv6 boot file URLs,
	// and the scripts and configurations fetched over IPv6), e.g.
	// "http://[fd00:a6::1]:8080"; empty means HTTPBase (a host name, or
	// an IPv6-only network whose HTTPBase is an IPv6 literal).
	HTTPBase6 string
	// TFTPServer6 is the TFTP server's IPv6 address in DHCPv6 boot file
	// URLs (tftp://[addr]/...): a global or unique local address. The
	// zero Addr takes the IPv6 HTTP base's host when that is an IPv6
	// literal; without either, UEFI PXE over IPv6 gets no boot file.
	TFTPServer6 netip.Addr
	// DHCPMode is the mode of the DHCP server asking DecideBoot: in
	// dhcp.Proxy, a machine with nothing to boot gets no answer at all;
	// otherwise (authoritative, or the zero value) an answer without a
	// boot file.
	DHCPMode dhcp.Mode
	// IPXEDir holds undionly.kpxe, snponly.efi and ipxe.efi; default
	// DefaultIPXEDir. New checks they are there.
	IPXEDir string
	// UEFIIPXE is the iPXE binary for UEFI machines, "snponly.efi" (the
	// default: it drives the NIC through the firmware, like Ironic's
	// default) or "ipxe.efi" (iPXE's own NIC drivers).
	UEFIIPXE string
	// PXELinux is pxelinux.0 (default DefaultPXELinux) and
	// SyslinuxModules the directory of ldlinux.c32 (default
	// DefaultSyslinuxModules); GRUB is the network GRUB EFI binary
	// (default DefaultGRUB), which UEFI PXE loads over TFTP. They are
	// checked when a configuration needs them (PutConfig of a pxe or
	// http one).
	PXELinux        string
	SyslinuxModules string
	GRUB            string
	// HTTPGRUB is the GRUB EFI binary UEFI HTTP boot loads by URL
	// (grub/grubhttpx64.efi) for the http interface, and for the pxe
	// one when the firmware boots by HTTP; empty serves GRUB there.
	// That GRUB must configure its network itself and read
	// grub/grub.cfg from this server: UEFI HTTP boot hands it no PXE
	// packet, and Debian 12's grubnetx64.efi (GRUB 2.06) loaded so by
	// OVMF 2022.11 asked for nothing and stopped at its prompt. Package
	// netboot/grubimage builds one for HTTPBase (grub-mkimage with an
	// embedded configuration: net_dhcp, then this server's grub/grub.cfg).
	HTTPGRUB string
	// Shim (default DefaultShim) and SignedGRUB (default
	// DefaultSignedGRUB) are the secure boot chain of a SecureBoot
	// configuration: UEFI PXE loads the shim as shimx64.efi, the shim
	// loads the GRUB as grubx64.efi from beside it. Checked by PutConfig
	// of a SecureBoot configuration.
	Shim       string
	SignedGRUB string
	// Resolver tells enrolled machines without a boot configuration
	// (they boot from local disk) from unknown ones (the Fallback, or
	// nothing). Optional without a Fallback; required with one.
	Resolver Resolver
	// Fallback, when set, boots machines nobody enrolled into a
	// discovery (inspection) ramdisk.
	Fallback *Fallback
	// Observer receives every stage record; nil drops them.
	Observer stage.Observer
	// Logger: nil is slog.Default().
	Logger *slog.Logger
	// Clock: nil is clock.System().
	Clock clock.Clock
	// Dnsmasq, when set, makes PutConfig and DeleteConfig also write the
	// host and option files of an operator's own dnsmasq (Anvil's DHCP
	// server then stays off).
	Dnsmasq *DnsmasqFiles
}

// Fallback is the ramdisk a machine nobody enrolled boots (over iPXE):
// Metal3's inspector.ipxe, Ironic's discovery for enroll-on-inspection.
type Fallback struct {
	// Kernel and Ramdisk are http(s) URLs or absolute local paths.
	Kernel, Ramdisk string
	// Params are the kernel parameters (e.g. ipa-inspection-callback-url=...).
	Params []string
	// IPXETimeout bounds each fetch; zero is iPXE's default.
	IPXETimeout time.Duration
}

// Server is the boot server's core: the boot configurations (it is a
// ConfigStore), the boot decision for the DHCP server (a dhcp.Decider),
// the TFTP files (a tftp.Handler) and the HTTP Handler, and the stage
// records of all of them. Its methods are safe for concurrent use.
type Server struct {
	opts    Options
	base    string
	base6   string     // the base for IPv6 clients
	tftp6   netip.Addr // the TFTP address in DHCPv6 boot file URLs, or none
	log     *slog.Logger
	clock   clock.Clock
	metrics *metrics

	mu      sync.RWMutex
	configs map[string]Config // by node
	macs    map[string]string // mac -> node

	addrs addrBook
}

// New checks o and returns a Server with no configurations.
func New(o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.IPXEDir == "" {
		o.IPXEDir = DefaultIPXEDir
	}
	if o.PXELinux == "" {
		o.PXELinux = DefaultPXELinux
	}
	if o.SyslinuxModules == "" {
		o.SyslinuxModules = DefaultSyslinuxModules
	}
	if o.GRUB == "" {
		o.GRUB = DefaultGRUB
	}
	if o.Shim == "" {
		o.Shim = DefaultShim
	}
	if o.SignedGRUB == "" {
		o.SignedGRUB = DefaultSignedGRUB
	}
	switch o.UEFIIPXE {
	case "":
		o.UEFIIPXE = string(fileSNPOnly)
	case string(fileSNPOnly), string(fileIPXEEFI):
	default:
		return nil, &OptionsError{Field: "UEFIIPXE", Reason: fmt.Sprintf("%q is not snponly.efi or ipxe.efi", o.UEFIIPXE)}
	}
	base, err := checkBase("HTTPBase", o.HTTPBase)
	if err != nil {
		return nil, err
	}
	base6 := base
	if o.HTTPBase6 != "" {
		if base6, err = checkBase("HTTPBase6", o.HTTPBase6); err != nil {
			return nil, err
		}
	}
	tftp6 := o.TFTPServer6
	if tftp6.IsValid() {
		if !tftp6.Is6() || tftp6.Is4In6() || tftp6.IsUnspecified() || tftp6.IsLinkLocalUnicast() || tftp6.IsMulticast() || tftp6.Zone() != "" {
			return nil, &OptionsError{Field: "TFTPServer6", Reason: fmt.Sprintf("%v is not a global or unique local IPv6 address", tftp6)}
		}
	} else if u, err := url.Parse(base6); err == nil {
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && a.Is6() && !a.Is4In6() && !a.IsLinkLocalUnicast() {
			tftp6 = a
		}
	}
	if o.Fallback != nil {
		if o.Resolver == nil {
			return nil, &OptionsError{Field: "Fallback", Reason: "needs a Resolver: without one an enrolled machine " +
				"with no boot configuration (an active node) cannot be told from a new one and would boot the fallback ramdisk"}
		}
		for _, f := range []struct{ name, v string }{{"Kernel", o.Fallback.Kernel}, {"Ramdisk", o.Fallback.Ramdisk}} {
			if reason := checkImage(f.v, true); reason != "" {
				return nil, &OptionsError{Field: "Fallback." + f.name, Reason: reason}
			}
		}
		if err := checkParams(o.Fallback.Params); err != nil {
			return nil, &OptionsError{Field: "Fallback." + err.Field, Reason: err.Reason}
		}
	}
	if o.Dnsmasq != nil {
		if err := o.Dnsmasq.check(o.TFTPServer); err != nil {
			return nil, err
		}
	}
	s := &Server{
		opts:    o,
		base:    base,
		base6:   base6,
		tftp6:   tftp6,
		log:     o.Logger,
		clock:   o.Clock,
		metrics: newMetrics(),
		configs: make(map[string]Config),
		macs:    make(map[string]string),
		addrs:   newAddrBook(addrBookSize),
	}
	for _, f := range []binaryFile{fileUndionly, fileSNPOnly, fileIPXEEFI} {
		if _, err := s.binaryPath(f, true); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func checkBase(field, b string) (string, error) {
	bad := func(reason string) error { return &OptionsError{Field: field, Reason: reason} }
	if b == "" {
		return "", bad("empty (the URL machines reach the Handler at, e.g. http://192.0.2.1:8080)")
	}
	u, err := url.Parse(b)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return "", bad(fmt.Sprintf("%q is not an http URL with a host (iPXE and firmware HTTP boot speak plain http)", truncate(b, 80)))
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", bad("no user, query or fragment")
	}
	if h := u.Hostname(); strings.Count(h, ":") > 0 && !strings.HasPrefix(u.Host, "[") {
		return "", bad(fmt.Sprintf("%q: an IPv6 literal goes in brackets (http://[fd00::1]:8080)", truncate(b, 80)))
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil && a.Zone() != "" {
		return "", bad("a link-local address with a zone: firmware cannot use it; give a global or unique local address")
	}
	if i := firstBad(b, paramByte); i >= 0 {
		return "", bad(badByteReason(b, i))
	}
	return strings.TrimSuffix(b, "/"), nil
}

// binaryPath is the local path of a boot loader binary; with check, it
// fails with a MissingFileError when the file is not there.
func (s *Server) binaryPath(f binaryFile, check bool) (string, error) {
	var p, pkg, opt string
	switch f {
	case fileUndionly, fileSNPOnly, fileIPXEEFI:
		p, pkg, opt = filepath.Join(s.opts.IPXEDir, string(f)), "ipxe", "IPXEDir"
	case filePXELinux:
		p, pkg, opt = s.opts.PXELinux, "pxelinux", "PXELinux"
	case fileLDLinux:
		p, pkg, opt = filepath.Join(s.opts.SyslinuxModules, string(f)), "syslinux-common", "SyslinuxModules"
	case fileGRUB:
		p, pkg, opt = s.opts.GRUB, "grub-efi-amd64-bin", "GRUB"
	case fileShim:
		p, pkg, opt = s.opts.Shim, "shim-signed", "Shim"
	case fileSignedGRUB:
		p, pkg, opt = s.opts.SignedGRUB, "grub-efi-amd64-signed", "SignedGRUB"
	case fileHTTPGRUB:
		if s.opts.HTTPGRUB == "" {
			return "", &MissingFileError{File: string(f), Path: "(none)", Package: "grub-efi-amd64-bin, built with netboot/grubimage",
				Option: "HTTPGRUB", Err: errors.New("no HTTP boot GRUB is configured")}
		}
		p, pkg, opt = s.opts.HTTPGRUB, "grub-efi-amd64-bin, built with netboot/grubimage", "HTTPGRUB"
	default:
		return "", fmt.Errorf("netboot: unknown binary %q", f)
	}
	if check {
		fi, err := os.Stat(p)
		if err == nil && !fi.Mode().IsRegular() {
			err = fmt.Errorf("not a regular file")
		}
		if err != nil {
			return "", &MissingFileError{File: string(f), Path: p, Package: pkg, Option: opt, Err: err}
		}
	}
	return p, nil
}

// httpGRUB is the GRUB that UEFI HTTP boot loads: Options.HTTPGRUB, or
// Options.GRUB without one.
func (s *Server) httpGRUB() binaryFile {
	if s.opts.HTTPGRUB != "" {
		return fileHTTPGRUB
	}
	return fileGRUB
}

// neededBinaries are the binaries a configuration's machine loads from
// the server before its kernel.
func (s *Server) neededBinaries(c Config) []binaryFile {
	switch c.Interface {
	case PXE:
		if c.Mode == BIOS {
			return []binaryFile{filePXELinux, fileLDLinux}
		}
		if c.SecureBoot {
			return []binaryFile{fileShim, fileSignedGRUB}
		}
		return []binaryFile{fileGRUB}
	case HTTP:
		return []binaryFile{s.httpGRUB()}
	}
	return nil // iPXE: checked by New
}

// PutConfig stores c (see ConfigStore): it validates c, checks the boot
// loader files it needs, refuses a MAC another node holds, and on
// success records stage.Prepared for a Ramdisk configuration. On any
// error nothing is changed (with Dnsmasq, a failed file write may leave
// files the next PutConfig or DeleteConfig replaces).
func (s *Server) PutConfig(ctx context.Context, c Config) error {
	c, err := c.Normalize()
	if err != nil {
		return err
	}
	for _, f := range s.neededBinaries(c) {
		if _, err := s.binaryPath(f, true); err != nil {
			return fmt.Errorf("netboot: node %s: interface %s in %s mode: %w", c.Node, c.Interface, c.Mode, err)
		}
	}
	if c.Action == Ramdisk {
		for _, f := range []struct{ name, p string }{{"kernel", c.Kernel}, {"ramdisk", c.Ramdisk}} {
			if !strings.HasPrefix(f.p, "/") {
				continue
			}
			if fi, err := os.Stat(f.p); err != nil || !fi.Mode().IsRegular() {
				return &InvalidConfigError{Node: c.Node, Field: f.name, Reason: "the server cannot read " + f.p + " as a regular file"}
			}
		}
	}
	c.MACs = slices.Clone(c.MACs)
	c.Params = slices.Clone(c.Params)

	s.mu.Lock()
	defer s.mu.Unlock()
	for _, mac := range c.MACs {
		if owner, ok := s.macs[mac]; ok && owner != c.Node {
			return &MACInUseError{MAC: mac, Node: c.Node, Owner: owner}
		}
	}
	old, hadOld := s.configs[c.Node]
	if s.opts.Dnsmasq != nil {
		var stale []string
		if hadOld {
			for _, m := range old.MACs {
				if !slices.Contains(c.MACs, m) {
					stale = append(stale, m)
				}
			}
		}
		if err := s.opts.Dnsmasq.put(c, stale, s.dnsmasqBoot(c)); err != nil {
			return err
		}
	}
	if hadOld {
		for _, m := range old.MACs {
			delete(s.macs, m)
		}
	}
	s.configs[c.Node] = c
	for _, m := range c.MACs {
		s.macs[m] = c.Node
	}
	if c.Action == Ramdisk {
		s.observe(stage.Record{Node: c.Node, Stage: stage.Prepared, Note: preparedNote(c)})
	}
	s.log.InfoContext(ctx, "netboot: boot configuration stored", "node", c.Node, "macs", c.MACs,
		"interface", c.Interface, "mode", c.Mode, "action", c.Action, "purpose", c.Purpose)
	return nil
}

func preparedNote(c Config) string {
	p := c.Purpose
	if p == "" {
		p = "ramdisk"
	}
	return fmt.Sprintf("boot configuration written (%s, %s, %s)", p, c.Interface, c.Mode)
}

// DeleteConfig removes the node's configuration (see ConfigStore).
func (s *Server) DeleteConfig(ctx context.Context, node string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.configs[node]
	if !ok {
		return nil
	}
	if s.opts.Dnsmasq != nil {
		if err := s.opts.Dnsmasq.remove(c); err != nil {
			return err
		}
	}
	for _, m := range c.MACs {
		delete(s.macs, m)
	}
	delete(s.configs, node)
	s.log.InfoContext(ctx, "netboot: boot configuration removed", "node", node)
	return nil
}

// Config returns the node's configuration (a copy), or ErrNoConfig.
func (s *Server) Config(node string) (Config, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.configs[node]
	if !ok {
		return Config{}, fmt.Errorf("netboot: node %s: %w", node, ErrNoConfig)
	}
	return cloneConfig(c), nil
}

// ConfigForMAC returns the configuration that holds mac (any form
// ParseMAC accepts), or ErrNoConfig.
func (s *Server) ConfigForMAC(mac string) (Config, error) {
	m, ok := ParseMAC(mac)
	if !ok {
		return Config{}, fmt.Errorf("netboot: %q is not a MAC address: %w", truncate(mac, 40), ErrNoConfig)
	}
	c, ok := s.lookup(m)
	if !ok {
		return Config{}, fmt.Errorf("netboot: MAC %s: %w", m, ErrNoConfig)
	}
	return c, nil
}

func (s *Server) lookup(mac string) (Config, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	node, ok := s.macs[mac]
	if !ok {
		return Config{}, false
	}
	return cloneConfig(s.configs[node]), true
}

func cloneConfig(c Config) Config {
	c.MACs = slices.Clone(c.MACs)
	c.Params = slices.Clone(c.Params)
	return c
}

// observe stamps r, counts it and hands it to the Observer.
func (s *Server) observe(r stage.Record) {
	if r.At.IsZero() {
		r.At = s.clock.Now()
	}
	s.metrics.record(r)
	if s.opts.Observer != nil {
		s.opts.Observer.ObserveBootStage(r)
	}
}

// ObserveBootStage makes the Server an Observer for the DHCP server: it
// remembers which MAC and node each offered or acknowledged address
// belongs to (so that a TFTP or HTTP request for a file that does not
// name a MAC, such as undionly.kpxe, is recorded against the right
// node), then passes r on like its own records.
func (s *Server) ObserveBootStage(r stage.Record) {
	if r.Stage == stage.DHCPOffer || r.Stage == stage.DHCPAck {
		if a, err := netip.ParseAddr(r.Addr); err == nil && r.MAC != "" {
			s.addrs.put(a, r.MAC, r.Node)
		}
	}
	s.observe(r)
}

var _ ConfigStore = (*Server)(nil)
var _ stage.Observer = (*Server)(nil)
