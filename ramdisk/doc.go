// Package ramdisk builds the stock Ironic Python Agent (IPA) ramdisk that
// Anvil's deploy and inspect interfaces talk to: a Debian kernel, an
// initramfs and, when asked for, a bootable ISO, from Debian packages and
// the agent's source release, in one call (or one command,
// cmd/anvil-ramdisk) that takes minutes, where Ironic's own builder
// (ironic-python-agent-builder with diskimage-builder) takes a heavy
// tool chain.
//
// The agent is not patched: its source release is installed as a Python
// package with its entry points (hardware managers, extensions), on a
// root file system from debootstrap holding its Python dependencies and
// the programs it runs (lshw, parted, qemu-img, ipmitool, mdadm, ...).
// What the build controls is made fast for a machine's boot:
//
//   - the Python byte code of the agent, its libraries and the standard
//     library is compiled at build time (unchecked hash-based .pyc), not
//     by every boot;
//   - /init loads only the drivers a machine needs, lets udev settle
//     once, takes a DHCP address on the first NIC (DHCPv4, or DHCPv6
//     when ipa-api-url's host is an IPv6 literal, or both with
//     anvil.dhcp=4,6 on the kernel command line) and starts the agent,
//     printing each stage with the kernel's uptime ("anvil-ipa: network
//     up: ... (7.31s)") so a boot can be timed from its console;
//   - poweroff, reboot and halt are there, as IPA's standby.power_off
//     and reboot run them: they ask /init, which stops the agent, flushes
//     the disks and powers the machine off (or restarts it).
//
// # Usage
//
//	img, err := ramdisk.Build(ctx, ramdisk.Options{
//		Cache:      ramdisk.Cache{Dir: "/var/cache/anvil/ramdisk"},
//		IPATarball: "ironic-python-agent-9.4.3.tar.gz", // or "": from PyPI
//		Packages:   []string{"smartmontools"},          // extra Debian packages
//		ISO:        true,
//	})
//	// img.Kernel.Path, img.Initramfs: the deploy kernel and ramdisk
//	// (driver/pxe's DeployKernel, DeployRamdisk); img.ISO: the
//	// redfish-virtual-media deploy ISO.
//
// Without Options.IPATarball, Build downloads the release from PyPI and
// keeps it only when its SHA-256 is the one the index publishes; a
// machine that cannot reach the index gets an error (wrapping
// ErrUnavailable) saying to give the release as a file. Everything is
// cached by its inputs (Cache): the same inputs build once, a changed
// input (a new kernel package, a new script, another release) builds a
// new image beside the old one. Build needs root (debootstrap chroots)
// and Debian's debootstrap, zstd, kmod and cpio; the ISO needs xorriso
// and isolinux.
//
// The kernel command line the boot interface gives the ramdisk carries
// the agent's settings (ipa-api-url=, ipa-insecure=, ipa-debug=, ...),
// read by the agent itself; rootfstype=ramfs keeps the unpacked
// initramfs out of a size-limited tmpfs on machines with little memory.
package ramdisk
