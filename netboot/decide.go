package netboot

import (
	"context"
	"time"

	"github.com/anvilmetal/anvil/netboot/dhcp"
	"github.com/anvilmetal/anvil/netboot/dhcp6"
)

// resolveTimeout bounds a Resolver call: the decision runs on the DHCP
// packet path, and the firmware retries sooner than a slow store answers.
const resolveTimeout = 2 * time.Second

// planKind is what the server does for a MAC.
type planKind int

const (
	// planNone: nothing to boot (unknown machine and no fallback, or the
	// Resolver failed: an enrolled machine must never get the fallback
	// because its node's record could not be read).
	planNone planKind = iota
	// planConfig: the MAC's boot configuration.
	planConfig
	// planLocal: an enrolled machine without a configuration: local disk.
	planLocal
	// planFallback: a machine nobody enrolled: the fallback ramdisk.
	planFallback
)

type plan struct {
	kind planKind
	cfg  Config // planConfig
	node string // planConfig, planLocal
}

// planFor decides what the machine with mac (normalised) boots. It is
// the one place the decision is made: DHCP, TFTP and HTTP all ask it, so
// they cannot disagree.
func (s *Server) planFor(ctx context.Context, mac string) plan {
	if c, ok := s.lookup(mac); ok {
		return plan{kind: planConfig, cfg: c, node: c.Node}
	}
	if s.opts.Resolver == nil {
		return plan{kind: planNone}
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	node, found, err := s.opts.Resolver.NodeForMAC(ctx, mac)
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "netboot: resolving a MAC failed; not booting it", "mac", mac, "err", err)
		return plan{kind: planNone}
	case found:
		return plan{kind: planLocal, node: node}
	case s.opts.Fallback != nil:
		return plan{kind: planFallback}
	}
	return plan{kind: planNone}
}

// family is how a machine gets to its kernel.
type family int

const (
	familyIPXE   family = iota // iPXE, then HTTP
	familyLoader               // pxelinux (BIOS) or GRUB (UEFI)
)

func (p plan) family() family {
	if p.kind == planConfig && (p.cfg.Interface == PXE || p.cfg.Interface == HTTP) {
		return familyLoader
	}
	return familyIPXE
}

// load is what a client loads next, whatever the address family: the
// MAC's iPXE script (script), or a boot loader binary (file).
type load struct {
	script bool
	file   binaryFile
	// http: the client boots over HTTP (UEFI HTTP boot, iPXE), so the
	// answer is a URL; else TFTP.
	http bool
	uefi bool
}

// chooseLoad is the family-neutral half of the boot decision: by the
// plan's family, the client's firmware and its iPXE and HTTP boot flags,
// what it loads next; false for an architecture without binaries here
// (32-bit and ARM UEFI).
func (s *Server) chooseLoad(p plan, arch dhcp.Arch, ipxe, httpBoot bool) (load, bool) {
	switch arch {
	case dhcp.ArchUnknown, dhcp.ArchBIOS, dhcp.ArchEFIx64, dhcp.ArchEFIx64HTTP:
	default:
		return load{}, false
	}
	l := load{uefi: arch.UEFI(), http: httpBoot}
	if httpBoot && !l.uefi {
		// HTTP boot without an architecture (or claiming BIOS): x86-64
		// UEFI is the only HTTP boot firmware served here.
		l.uefi = true
	}
	switch p.family() {
	case familyIPXE:
		switch {
		case ipxe:
			l.script, l.http = true, true
		case l.uefi:
			l.file = binaryFile(s.opts.UEFIIPXE)
		default:
			l.file = fileUndionly
		}
	case familyLoader:
		switch {
		case l.uefi && p.cfg.SecureBoot && !l.http:
			// Secure boot: the signed shim, which loads the signed GRUB.
			l.file = fileShim
		case l.uefi:
			l.file = fileGRUB
		default:
			l.file = filePXELinux
		}
	}
	return l, true
}

// DecideBoot tells the DHCP server what the client boots; the Server is
// its dhcp.Decider. The decision table (testdata/decisions.golden):
//
//   - a configuration with interface ipxe or http-ipxe, an enrolled
//     machine without one (local disk), or an unknown one with a
//     Fallback: iPXE gets the MAC's script URL, UEFI HTTP boot the iPXE
//     EFI URL, PXE firmware undionly.kpxe (BIOS) or Options.UEFIIPXE
//     (UEFI) over TFTP;
//   - interface pxe or http: UEFI HTTP boot gets the GRUB URL, PXE
//     firmware pxelinux.0 (BIOS) or grubnetx64.efi (UEFI) over TFTP;
//   - anything else (an unknown machine without a Fallback, a MAC the
//     Resolver failed on, an architecture without binaries here: 32-bit
//     and ARM UEFI) gets no boot file; in proxy mode, no answer.
//
// A client without option 93 is taken for BIOS. DecideBoot6 is the same
// decision rendered for DHCPv6.
func (s *Server) DecideBoot(ctx context.Context, c dhcp.Client) dhcp.Decision {
	mac, ok := ParseMAC(c.MAC)
	if !ok {
		return s.noBoot("")
	}
	p := s.planFor(ctx, mac)
	if p.kind == planNone {
		return s.noBoot("")
	}
	l, ok := s.chooseLoad(p, c.Arch, c.IPXE, c.HTTPClient)
	if !ok {
		s.log.DebugContext(ctx, "netboot: no boot loader for this architecture", "mac", mac, "arch", c.Arch, "node", p.node)
		return s.noBoot(p.node)
	}
	d := dhcp.Decision{Node: p.node}
	switch {
	case l.script:
		d.BootFile = s.base + ScriptPath(mac)
	case l.http && l.file == fileGRUB:
		d.BootFile = s.base + "/grub/" + string(s.httpGRUB())
	case l.http:
		d.BootFile = s.base + "/ipxe/" + string(l.file)
	default:
		d.BootFile = string(l.file)
		d.NextServer = s.opts.TFTPServer
	}
	return d
}

// DecideBoot6 is DecideBoot for the DHCPv6 server (the Server is its
// dhcp6.Decider): the same plan and load, rendered as the boot file URL
// of option 59, with the MAC in the path so that TFTP and HTTP know the
// machine without an address book (SLAAC addresses never pass the DHCP
// server): iPXE gets the MAC's script URL, UEFI HTTP boot
// HTTPBase6/boot/<mac>/<loader>, UEFI PXE
// tftp://[TFTPServer6]/boot/<mac>/<loader>. A BIOS client that is not
// iPXE gets no boot file: BIOS PXE ROMs have no IPv6, and pxelinux
// neither. Without a TFTP address for IPv6 (TFTPServer6, or an IPv6
// literal in the IPv6 HTTP base) UEFI PXE gets none either.
func (s *Server) DecideBoot6(ctx context.Context, c dhcp6.Client) dhcp6.Decision {
	mac, ok := ParseMAC(c.MAC)
	if !ok {
		return s.noBoot6("")
	}
	p := s.planFor(ctx, mac)
	if p.kind == planNone {
		return s.noBoot6("")
	}
	l, ok := s.chooseLoad(p, c.Arch, c.IPXE, c.HTTPClient)
	if !ok {
		s.log.DebugContext(ctx, "netboot: no boot loader for this architecture", "mac", mac, "arch", c.Arch, "node", p.node)
		return s.noBoot6(p.node)
	}
	d := dhcp6.Decision{Node: p.node}
	dir := "/boot/" + hyphenMAC(mac) + "/"
	switch {
	case l.script:
		d.BootFileURL = s.base6 + ScriptPath(mac)
	case l.http:
		d.BootFileURL = s.base6 + dir + string(l.file)
	case !l.uefi:
		s.log.DebugContext(ctx, "netboot: a BIOS PXE client over IPv6: no boot loader speaks it", "mac", mac, "node", p.node)
		return s.noBoot6(p.node)
	case !s.tftp6.IsValid():
		s.log.WarnContext(ctx, "netboot: UEFI PXE over IPv6 needs Options.TFTPServer6", "mac", mac, "node", p.node)
		return s.noBoot6(p.node)
	default:
		d.BootFileURL = "tftp://[" + s.tftp6.String() + "]" + dir + string(l.file)
	}
	return d
}

func (s *Server) noBoot6(node string) dhcp6.Decision {
	if s.opts.DHCPMode == dhcp.Proxy {
		return dhcp6.Decision{Ignore: true, Node: node}
	}
	return dhcp6.Decision{Node: node}
}

func (s *Server) noBoot(node string) dhcp.Decision {
	if s.opts.DHCPMode == dhcp.Proxy {
		return dhcp.Decision{Ignore: true, Node: node}
	}
	return dhcp.Decision{Node: node}
}

var (
	_ dhcp.Decider  = (*Server)(nil)
	_ dhcp6.Decider = (*Server)(nil)
)
