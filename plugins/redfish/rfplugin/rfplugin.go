// Package rfplugin is the anvil-driver-redfish plugin's program, shared
// by cmd/anvil-driver-redfish (what go install installs beside anvild)
// and plugins/redfish. It serves Anvil's redfish hardware type as a
// driver plugin: power, management, redfish-virtual-media boot, inspect,
// bios, raid, firmware and vendor implementations named as Ironic names
// them, talking to BMCs through package rfdriver (gofish).
//
// Build it into a plugin directory under the name the host looks for:
//
//	go build -o /var/lib/anvil/plugins/anvil-driver-redfish ./plugins/redfish
//
// The plugin keeps one Redfish session per BMC for as long as it runs and
// logs every session out when the host stops it. It logs hclog JSON on
// stderr (never passwords), the drivers' lines included (their
// *slog.Logger is plugin.SlogLogger), and never writes to stdout. Run by hand, it
// explains that it must be started by a host and exits with status 1.
// README.md beside this file lists the driver_info properties and steps.
//
// Environment: ANVIL_REDFISH_HTTP_ROOT (a directory) and
// ANVIL_REDFISH_HTTP_URL (where the embedder serves it to the BMCs) let the
// redfish-virtual-media boot interface publish each node's boot ISO (the
// deploy ISO re-mastered with the node's kernel parameters, or the ISO
// built from deploy_kernel and deploy_ramdisk).
// ANVIL_REDFISH_ISOLINUX_BIN, ANVIL_REDFISH_LDLINUX_C32 and
// ANVIL_REDFISH_GRUB_EFI replace Debian's boot loaders that ISO is built
// with (rfdriver.BootLoaders), ANVIL_REDFISH_KERNEL_APPEND_PARAMS is
// rfdriver.Options.KernelAppendParams. anvild sets them from its
// configuration.
package rfplugin

import (
	"context"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
)

// Version is the plugin's own version.
const Version = "1.0.0"

// Main is the plugin's main function: it serves the redfish hardware
// type to the host that started the process, and logs out of the BMC
// sessions when the host is done.
func Main() {
	logger := hclog.New(&hclog.LoggerOptions{Name: "redfish", Level: hclog.Info, JSONFormat: true, Output: os.Stderr})
	// The drivers' own lines (session handling, retries, re-mastered
	// ISOs) go out with the plugin's, for the host to re-level.
	opts := rfdriver.Options{Logger: plugin.SlogLogger(logger)}
	// The per-node boot ISO of virtual media boots is published into a
	// directory the embedder serves to the BMCs.
	if root, url := os.Getenv("ANVIL_REDFISH_HTTP_ROOT"), os.Getenv("ANVIL_REDFISH_HTTP_URL"); root != "" && url != "" {
		opts.Media = rfdriver.DirMediaStore{Dir: root, BaseURL: url}
	}
	opts.BootLoaders = bootLoaders(os.Getenv)
	opts.KernelAppendParams = os.Getenv("ANVIL_REDFISH_KERNEL_APPEND_PARAMS")
	d := rfdriver.NewDrivers(opts)
	plugin.Serve(plugin.ServeConfig{Name: "redfish", Version: Version, Bundle: d.Bundle(), Logger: logger})
	// The host is done with the plugin: free the BMCs' session slots.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		logger.Warn("logging out of BMC sessions", "error", err)
	}
}

// bootLoaders are Debian's boot loaders with those the environment
// names in their place.
func bootLoaders(getenv func(string) string) rfdriver.BootLoaders {
	l := rfdriver.DefaultBootLoaders()
	for _, e := range []struct {
		name string
		dst  *string
	}{{"ANVIL_REDFISH_ISOLINUX_BIN", &l.ISOLINUX}, {"ANVIL_REDFISH_LDLINUX_C32", &l.LDLinux}, {"ANVIL_REDFISH_GRUB_EFI", &l.GRUBEFI}} {
		if v := getenv(e.name); v != "" {
			*e.dst = v
		}
	}
	return l
}
