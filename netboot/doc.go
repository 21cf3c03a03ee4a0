// Package netboot is Anvil's boot server: DHCP (authoritative, or proxyDHCP
// beside an existing server), TFTP and HTTP for network boot, serving each
// node the boot configuration its boot interface wrote, and recording
// each stage it served (package netboot/stage) so that an operator can see
// where a boot stopped. It runs in the embedding process, with no external
// daemon, and is usable without the conductor.
//
// # Pieces
//
// The protocol engines are their own packages: netboot/dhcp (a DHCPv4
// server that classifies clients and asks a dhcp.Decider what they boot),
// netboot/dhcp6 (the same for DHCPv6, asking a dhcp6.Decider),
// netboot/ra (router advertisements with the managed flag) and
// netboot/tftp (a read-only TFTP server that asks a tftp.Handler for
// files). This package is the rest, the Server:
//
//   - a ConfigStore: the boot interfaces PutConfig a node's Config
//     (interface pxe, ipxe, http or http-ipxe; bios or uefi; a ramdisk to
//     boot, or the local disk) keyed by its MACs, and DeleteConfig it.
//     PutConfig validates everything that will be written into a script
//     (kernel parameters against a safe character set, paths, URLs) and
//     refuses a MAC another node holds, changing nothing on error;
//   - DecideBoot, the dhcp.Decider: by the client's architecture, iPXE
//     and HTTP boot flags and the MAC's Config, the boot file or URL;
//     DecideBoot6, the dhcp6.Decider: the same decision as a boot file
//     URL (option 59) naming the MAC in its path
//     (testdata/decisions.golden is the whole table, both families);
//   - OpenTFTP and OnTransfer, the tftp.Handler and its transfer callback;
//   - Handler, the http.Handler for scripts, configurations, kernels,
//     ramdisks and the boot loaders of UEFI HTTP boot;
//   - ObserveBootStage, to pass as the DHCP server's Observer: the Server
//     learns which address belongs to which MAC (so that a TFTP request
//     for undionly.kpxe is recorded against the right node) and forwards
//     every record to Options.Observer;
//   - Collectors, the Prometheus metrics of every stage.
//
// DHCP, TFTP and HTTP ask one function what a MAC boots, so they cannot
// disagree: the MAC's Config when there is one; "boot from local disk"
// for a machine the Resolver says is enrolled (an active or available
// node nobody is working on must never get a ramdisk: the reboot loops
// of tinkerbell #951 and smee #10); the Fallback (a discovery ramdisk)
// for a machine nobody enrolled; and nothing when the Resolver fails.
//
// # Files and paths
//
// The boot loaders come from Debian packages, found at configurable
// paths, never downloaded: ipxe (/usr/lib/ipxe: undionly.kpxe,
// snponly.efi, ipxe.efi; checked by New), pxelinux and syslinux-common
// (pxelinux.0, ldlinux.c32) and grub-efi-amd64-bin (grubnetx64.efi),
// checked by PutConfig when a configuration needs them. UEFI HTTP boot of
// GRUB (the http interface) needs a GRUB that configures its own network
// (Options.HTTPGRUB, served as grubhttpx64.efi; package netboot/grubimage
// builds one). A SecureBoot configuration (pxe, uefi) boots through
// shim-signed's shim (Options.Shim, served as shimx64.efi) and
// grub-efi-amd64-signed's network GRUB (Options.SignedGRUB, served as
// grubx64.efi, the name shim loads from beside itself). The same names
// are served on TFTP and HTTP:
//
//	boot.ipxe                        chains to boot/${netX/mac:hexhyp}/boot.ipxe
//	boot/<mac>/boot.ipxe             the MAC's iPXE script
//	boot/<mac>/grub.cfg              the MAC's GRUB configuration
//	boot/<mac>/kernel, boot/<mac>/ramdisk
//	grub/grub.cfg                    GRUB's master configuration
//	grub/grub.cfg-01-<mac>           the MAC's GRUB configuration, by GRUB's naming
//	pxelinux.cfg/01-<mac>            the MAC's pxelinux configuration
//	undionly.kpxe, snponly.efi, ipxe.efi, pxelinux.0, ldlinux.c32, grubnetx64.efi,
//	grubhttpx64.efi, shimx64.efi, grubx64.efi
//	                                 (also under ipxe/ and grub/, for HTTP boot URLs)
//
// boot/<mac>/<binary> serves a boot loader named for a MAC, as DHCPv6
// boot file URLs name them. <mac> is written with hyphens
// (52-54-00-12-34-56) or colons. Scripts and configurations fetched
// over IPv6 name Options.HTTPBase6's URLs. Kernels
// and ramdisks given as absolute local paths are served at
// boot/<mac>/kernel and boot/<mac>/ramdisk, with Range requests on HTTP,
// and their downloads are recorded with bytes and duration. Given as
// http(s) URLs (ipxe and http-ipxe only) the script sends iPXE there,
// and the download is not observed: the records then stop at the
// script.
//
// # Usage
//
// With the conductor: the conductor is the Server's Resolver (which
// enrolled node owns a MAC) and Observer (stage records into node history
// and Watch, and the per-stage deadlines), and the Server is the
// ConfigStore of the network boot interfaces (package driver/pxe). A
// registry takes implementations at any time before the conductor
// starts, so the three are built in this order:
//
//	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{"ipmi"}})
//	cond, err := conductor.New(store, reg, conductor.Options{...})
//	srv, err := netboot.New(netboot.Options{
//		HTTPBase:   "http://192.0.2.1:8080",
//		TFTPServer: netip.MustParseAddr("192.0.2.1"),
//		Resolver:   cond,
//		Observer:   cond,
//	})
//	reg.MustRegister(pxe.New(srv, pxe.Options{DeployKernel: ..., DeployRamdisk: ...}).Bundle())
//	go srv.Run(ctx, netboot.ListenOptions{
//		DHCP: &dhcp.Options{Mode: dhcp.Authoritative, Interface: "prov0",
//			ServerIP: netip.MustParseAddr("192.0.2.1"), Subnet: netip.MustParsePrefix("192.0.2.0/24"),
//			PoolStart: netip.MustParseAddr("192.0.2.100"), PoolEnd: netip.MustParseAddr("192.0.2.200")},
//		TFTPAddr: "192.0.2.1:69",
//		HTTPAddr: "192.0.2.1:8080",
//	})
//	cond.Launch(ctx)
//
// On an IPv6 network add ListenOptions.DHCP6 (dhcp6.Options, Stateful)
// and RA (ra.Options with Managed and the link's Prefix), and set
// Options.HTTPBase6 (or give HTTPBase as an IPv6 literal).
//
// Listen opens the listening sockets on the calling goroutine and Serve
// serves them; Run is both. (A caller that switched only its thread into a
// network namespace also sets TFTP.ListenTransfer; see Listen.) Each service is
// optional: leave DHCP out beside an existing DHCP server you configure
// yourself, or mount Handler on your own HTTP server. The engines can
// also be run by hand:
//
//	// DHCP:  dhcp.New(dhcp.Options{Decider: srv, Observer: srv, ...})
//	// TFTP:  tftp.Server{Handler: srv, OnTransfer: srv.OnTransfer, ...}
//	// HTTP:  http.Server{Handler: srv.Handler(), ...}
//
// With an operator's own dnsmasq instead of Anvil's DHCP, set
// Options.Dnsmasq: PutConfig and DeleteConfig then also write dnsmasq's
// --dhcp-hostsdir and --dhcp-optsdir files (see DnsmasqFiles).
package netboot
