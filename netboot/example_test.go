package netboot_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/netip"

	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/netboot/dhcp"
	"github.com/anvilmetal/anvil/netboot/stage"
)

// A boot server for an iPXE deploy: the boot interface stores the node's
// configuration, the DHCP server asks what a client boots, and the HTTP
// handler serves the script, kernel and ramdisk. It needs Debian's ipxe
// package in /usr/lib/ipxe.
func Example() {
	ctx := context.Background()
	srv, err := netboot.New(netboot.Options{
		HTTPBase:   "http://192.0.2.1:8080",
		TFTPServer: netip.MustParseAddr("192.0.2.1"),
		Observer: stage.ObserverFunc(func(r stage.Record) {
			log.Printf("%s: %s", r.Node, r.Phrase())
		}),
	})
	if err != nil {
		log.Fatal(err) // e.g. undionly.kpxe not found at /usr/lib/ipxe/undionly.kpxe (install the Debian package ipxe ...)
	}
	err = srv.PutConfig(ctx, netboot.Config{
		Node:      "1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
		MACs:      []string{"52:54:00:12:34:56"},
		Interface: netboot.IPXE,
		Mode:      netboot.UEFI,
		Action:    netboot.Ramdisk,
		Purpose:   "deploy",
		Kernel:    "/var/lib/anvil/images/ipa.kernel",
		Ramdisk:   "/var/lib/anvil/images/ipa.initramfs",
		Params:    []string{"ipa-api-url=http://192.0.2.1:6385", "console=ttyS0,115200n8"},
	})
	if err != nil {
		log.Fatal(err)
	}

	// The firmware's PXE asks first, then iPXE.
	fmt.Println(srv.DecideBoot(ctx, dhcp.Client{MAC: "52:54:00:12:34:56", Arch: dhcp.ArchEFIx64, PXEClient: true}).BootFile)
	fmt.Println(srv.DecideBoot(ctx, dhcp.Client{MAC: "52:54:00:12:34:56", Arch: dhcp.ArchEFIx64, IPXE: true}).BootFile)

	// The HTTP side, on the address HTTPBase names (the embedder owns
	// its lifetime: Shutdown on exit).
	hs := &http.Server{Addr: "192.0.2.1:8080", Handler: srv.Handler()}
	_ = hs
	// tftp.Server{Handler: srv, OnTransfer: srv.OnTransfer}.Serve(ctx, conn)
	// dhcp.Server{Decider: srv, Observer: srv, ...}.Serve(ctx)
}

func ExampleParseMAC() {
	mac, ok := netboot.ParseMAC("52-54-00-AB-CD-EF")
	fmt.Println(mac, ok)
	fmt.Println(netboot.ScriptPath(mac))
	fmt.Println(netboot.PXELinuxConfigName(mac))
	// Output:
	// 52:54:00:ab:cd:ef true
	// /boot/52-54-00-ab-cd-ef/boot.ipxe
	// pxelinux.cfg/01-52-54-00-ab-cd-ef
}
