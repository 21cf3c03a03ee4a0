package netboot

import (
	"context"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/netboot/dhcp"
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
// A client without option 93 is taken for BIOS.
func (s *Server) DecideBoot(ctx context.Context, c dhcp.Client) dhcp.Decision {
	mac, ok := ParseMAC(c.MAC)
	if !ok {
		return s.noBoot("")
	}
	p := s.planFor(ctx, mac)
	if p.kind == planNone {
		return s.noBoot("")
	}
	d := dhcp.Decision{Node: p.node}
	switch c.Arch {
	case dhcp.ArchUnknown, dhcp.ArchBIOS, dhcp.ArchEFIx64, dhcp.ArchEFIx64HTTP:
	default:
		s.log.DebugContext(ctx, "netboot: no boot loader for this architecture", "mac", mac, "arch", c.Arch, "node", p.node)
		return s.noBoot(p.node)
	}
	uefi := c.Arch.UEFI()
	http := c.HTTPClient
	if http && !uefi {
		// HTTP boot without option 93 (or claiming BIOS): x86-64 UEFI
		// is the only HTTP boot firmware served here.
		uefi = true
	}
	switch p.family() {
	case familyIPXE:
		switch {
		case c.IPXE:
			d.BootFile = s.base + ScriptPath(mac)
		case http:
			d.BootFile = s.base + "/ipxe/" + s.opts.UEFIIPXE
		case uefi:
			d.BootFile = s.opts.UEFIIPXE
		default:
			d.BootFile = string(fileUndionly)
		}
	case familyLoader:
		switch {
		case http:
			d.BootFile = s.base + "/grub/" + string(fileGRUB)
		case uefi:
			d.BootFile = string(fileGRUB)
		default:
			d.BootFile = string(filePXELinux)
		}
	}
	if !strings.HasPrefix(d.BootFile, "http://") {
		d.NextServer = s.opts.TFTPServer
	}
	return d
}

func (s *Server) noBoot(node string) dhcp.Decision {
	if s.opts.DHCPMode == dhcp.Proxy {
		return dhcp.Decision{Ignore: true, Node: node}
	}
	return dhcp.Decision{Node: node}
}

var _ dhcp.Decider = (*Server)(nil)
