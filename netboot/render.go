package netboot

import (
	"fmt"
	"strings"
	"time"
)

// The generated scripts and configurations. Every value written into
// them was validated by normalize (node, purpose and parameters against
// safe character sets, MACs parsed, paths clean): nothing from a
// configuration can add a command. The golden files under testdata/ are
// their specification.

// retryDelay is the pause of an iPXE script before it fetches again.
const retryDelay = "10"

// bootIF is the BOOTIF= parameter naming the boot NIC, as pxelinux's
// "ipappend 2" writes it ("01-" for Ethernet, hyphens); the agent
// accepts this and the colon form.
func bootIF(mac string) string { return "BOOTIF=01-" + hyphenMAC(mac) }

// imageRef is how a script names a kernel or ramdisk: a URL as given (the
// machine fetches it from there, and the server records no download
// stage for it), or the server's path for a local file.
func imageRef(base, v, path string) string {
	if strings.HasPrefix(v, "/") {
		return base + path
	}
	return v
}

func ipxeTimeout(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	ms := d.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	return fmt.Sprintf(" --timeout %d", ms)
}

// ipxeRamdisk is the iPXE script that boots kernel and ramdisk: fetch
// both, boot, and on any failure wait and start again (a stalled boot
// is failed by the conductor's stage deadlines, not by the script).
// initrd=ramdisk tells a UEFI kernel's EFI stub which of iPXE's images
// is its initrd; it is added for UEFI (and for the fallback, whose boot
// mode nobody knows; BIOS kernels ignore it).
func (s *Server) ipxeRamdisk(mac, comment, kernel, ramdisk string, params []string, uefi bool, timeout time.Duration) []byte {
	var b strings.Builder
	b.WriteString("#!ipxe\n")
	fmt.Fprintf(&b, "# %s\n", comment)
	cmd := []string{"kernel --name kernel" + ipxeTimeout(timeout), kernel}
	if uefi {
		cmd = append(cmd, "initrd=ramdisk")
	}
	cmd = append(cmd, params...)
	cmd = append(cmd, bootIF(mac))
	b.WriteString(":fetch\n")
	b.WriteString("imgfree\n")
	fmt.Fprintf(&b, "%s || goto retry\n", strings.Join(cmd, " "))
	fmt.Fprintf(&b, "initrd --name ramdisk%s %s || goto retry\n", ipxeTimeout(timeout), ramdisk)
	b.WriteString("boot || goto retry\n")
	b.WriteString(":retry\n")
	fmt.Fprintf(&b, "echo Fetching the kernel or ramdisk failed, trying again in %s s\n", retryDelay)
	fmt.Fprintf(&b, "sleep %s\n", retryDelay)
	b.WriteString("goto fetch\n")
	return []byte(b.String())
}

// ipxeLocal is the iPXE script that boots the local disk: exit back to
// the firmware's next boot entry on UEFI, sanboot of the first BIOS
// disk on BIOS; with mode unknown (an enrolled machine without a
// configuration) the script asks iPXE which platform it runs on.
func ipxeLocal(comment string, mode Mode) []byte {
	var b strings.Builder
	b.WriteString("#!ipxe\n")
	fmt.Fprintf(&b, "# %s\n", comment)
	switch mode {
	case UEFI:
		b.WriteString("exit\n")
	case BIOS:
		b.WriteString("sanboot --no-describe --drive 0x80\n")
	default:
		b.WriteString("iseq ${platform} efi && exit ||\n")
		b.WriteString("sanboot --no-describe --drive 0x80\n")
	}
	return []byte(b.String())
}

// script is the iPXE script for a MAC under p, for a machine on IPv4.
func (s *Server) script(mac string, p plan) []byte { return s.scriptAt(s.base, mac, p) }

// scriptAt is the iPXE script for a MAC under p whose URLs start with
// base (HTTPBase, or HTTPBase6 for a machine on IPv6).
func (s *Server) scriptAt(base, mac string, p plan) []byte {
	switch p.kind {
	case planConfig:
		c := p.cfg
		if c.Action == LocalDisk {
			return ipxeLocal(fmt.Sprintf("Anvil: node %s boots from its local disk (%s).", c.Node, mac), c.Mode)
		}
		return s.ipxeRamdisk(mac, configComment(c, mac),
			imageRef(base, c.Kernel, KernelPath(mac)), imageRef(base, c.Ramdisk, RamdiskPath(mac)),
			c.Params, c.Mode == UEFI, c.IPXETimeout)
	case planLocal:
		return ipxeLocal(fmt.Sprintf("Anvil: %s is enrolled and has no boot configuration: local disk.", mac), "")
	case planFallback:
		f := s.opts.Fallback
		return s.ipxeRamdisk(mac, fmt.Sprintf("Anvil: %s is not enrolled: fallback (discovery) ramdisk.", mac),
			imageRef(base, f.Kernel, KernelPath(mac)), imageRef(base, f.Ramdisk, RamdiskPath(mac)),
			f.Params, true, f.IPXETimeout)
	}
	return nil
}

func configComment(c Config, mac string) string {
	purpose := c.Purpose
	if purpose == "" {
		purpose = "ramdisk"
	}
	return fmt.Sprintf("Anvil: node %s, %s, %s mode, for %s.", c.Node, purpose, c.Mode, mac)
}

// genericScript is served at /boot.ipxe: an iPXE that came up with no
// per-machine URL (a NIC option ROM, a USB stick) chains to the script
// of the NIC it booted from.
func (s *Server) genericScript() []byte { return genericScriptAt(s.base) }

func genericScriptAt(base string) []byte {
	return []byte("#!ipxe\n# Anvil: chain to this machine's own script, by the MAC of the NIC iPXE booted from.\n" +
		"chain " + base + "/boot/${netX/mac:hexhyp}/boot.ipxe\n")
}

// pxelinuxConfig is a MAC's pxelinux configuration (pxe interface, BIOS).
// Paths are relative to pxelinux.0's directory, the TFTP root. BOOTIF is
// written out rather than left to "ipappend 2": the same value, and the
// configuration says it.
func pxelinuxConfig(c Config, mac string) []byte {
	var b strings.Builder
	if c.Action == LocalDisk {
		fmt.Fprintf(&b, "# Anvil: node %s boots from its local disk (%s).\n", c.Node, mac)
		b.WriteString("DEFAULT local\nPROMPT 0\nTIMEOUT 0\n\nLABEL local\n  LOCALBOOT 0\n")
		return []byte(b.String())
	}
	fmt.Fprintf(&b, "# %s\n", configComment(c, mac))
	b.WriteString("DEFAULT anvil\nPROMPT 0\nTIMEOUT 0\n\nLABEL anvil\n")
	fmt.Fprintf(&b, "  KERNEL %s\n", strings.TrimPrefix(KernelPath(mac), "/"))
	args := append([]string{"initrd=" + strings.TrimPrefix(RamdiskPath(mac), "/")}, c.Params...)
	args = append(args, bootIF(mac))
	fmt.Fprintf(&b, "  APPEND %s\n", strings.Join(args, " "))
	return []byte(b.String())
}

// grubConfig is a MAC's GRUB configuration (pxe interface in UEFI, http
// interface). Paths are absolute on GRUB's root device, the server GRUB
// was loaded from (TFTP or HTTP), which serves both.
func grubConfig(c Config, mac string) []byte {
	var b strings.Builder
	if c.Action == LocalDisk {
		fmt.Fprintf(&b, "# Anvil: node %s boots from its local disk (%s): back to the firmware's next boot entry.\n", c.Node, mac)
		b.WriteString("exit\n")
		return []byte(b.String())
	}
	fmt.Fprintf(&b, "# %s\n", configComment(c, mac))
	b.WriteString("set default=0\nset timeout=0\n")
	purpose := c.Purpose
	if purpose == "" {
		purpose = "ramdisk"
	}
	fmt.Fprintf(&b, "menuentry \"anvil %s\" {\n", purpose)
	args := append([]string{"linux", KernelPath(mac)}, c.Params...)
	args = append(args, bootIF(mac))
	fmt.Fprintf(&b, "    %s\n", strings.Join(args, " "))
	fmt.Fprintf(&b, "    initrd %s\n", RamdiskPath(mac))
	b.WriteString("}\n")
	return []byte(b.String())
}

// grubMaxCards is how many NICs grub/grub.cfg tries after GRUB's own
// DHCP (efinet0 and on).
const grubMaxCards = 8

// grubMaster is grub/grub.cfg. Debian's grubnetx64.efi, loaded by PXE,
// has the prefix /grub built in and reads $prefix/grub.cfg (after trying
// $prefix/x86_64-efi/grub.cfg) without searching per-MAC names, and
// net_default_mac is the MAC it booted from: this reads that NIC's
// configuration (the MAC with colons, which the server's paths accept).
// A GRUB loaded by UEFI HTTP boot (netboot/grubimage) has no boot NIC
// from the firmware: it asked DHCP on every NIC (net_dhcp), so this
// reads the configuration of the first NIC, efinet0 on, that the server
// knows (a MAC it has none for is a 404, and GRUB goes on to the next).
func grubMaster() []byte {
	var b strings.Builder
	b.WriteString("# Anvil: read the configuration of the NIC GRUB booted from.\n")
	b.WriteString("set timeout=0\n")
	b.WriteString("if [ -n \"${net_default_mac}\" ]; then\n")
	b.WriteString("  configfile /boot/${net_default_mac}/grub.cfg\n")
	b.WriteString("fi\n")
	b.WriteString("# UEFI HTTP boot: the NICs GRUB configured with net_dhcp.\n")
	for i := range grubMaxCards {
		fmt.Fprintf(&b, "if [ -n \"${net_efinet%[1]d_dhcp_mac}\" ]; then\n  configfile /boot/${net_efinet%[1]d_dhcp_mac}/grub.cfg\nfi\n", i)
	}
	b.WriteString("echo \"Anvil: the boot server has no configuration for any NIC of this machine\"\n")
	return []byte(b.String())
}
