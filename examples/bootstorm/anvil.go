package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/netboot/dhcp"
)

// anvilMain is Anvil's boot server process: it runs inside the server
// namespace, holds one ramdisk boot configuration per machine (an iPXE
// deploy, as the pxe boot interface writes it), and serves DHCP, TFTP and
// HTTP until it is stopped.
func anvilMain(ctx context.Context, cfg roleConfig) error {
	nw, err := parseNetwork(cfg.subnet)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	base := "http://" + nw.server.String() + ":8080"
	srv, err := netboot.New(netboot.Options{HTTPBase: base, TFTPServer: nw.server, DHCPMode: dhcp.Authoritative, Logger: log})
	if err != nil {
		return err
	}
	images := filepath.Join(cfg.dir, "images")
	for i := range cfg.n {
		mode := netboot.BIOS
		if i%2 == 1 {
			mode = netboot.UEFI
		}
		if err := srv.PutConfig(ctx, netboot.Config{
			Node: fmt.Sprintf("node-%d", i), MACs: []string{macFor(i).String()},
			Interface: netboot.IPXE, Mode: mode, Action: netboot.Ramdisk, Purpose: "deploy",
			Kernel: filepath.Join(images, "deploy_kernel"), Ramdisk: filepath.Join(images, "deploy_ramdisk"),
			Params: []string{"ipa-api-url=http://" + nw.server.String() + ":6385"},
		}); err != nil {
			return err
		}
	}
	l, err := srv.Listen(netboot.ListenOptions{
		DHCP: &dhcp.Options{Mode: dhcp.Authoritative, Interface: cfg.iface, ServerIP: nw.server,
			Subnet: nw.prefix, PoolStart: nw.poolStart, PoolEnd: nw.poolEnd, MaxLeases: 4*cfg.n + 100},
		TFTPAddr: netip.AddrPortFrom(nw.server, 69).String(),
		HTTPAddr: netip.AddrPortFrom(nw.server, 8080).String(),
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "bootstorm: anvil ready")
	return l.Serve(ctx)
}
