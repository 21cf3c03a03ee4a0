package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/console/ipmisol"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/driver/pxe"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ironicHardwareTypes is Ironic's enabled_hardware_types default. anvild
// enables those of them whose plugin it finds when the option is unset.
var ironicHardwareTypes = []string{"ipmi", "redfish"}

// ironicEnabledInterfaces are Ironic master's enabled_<kind>_interfaces
// defaults. Management and power are absent: Ironic computes them from
// the enabled hardware types (the first supported implementation of
// each), and so does the registry for a kind with no list.
func ironicEnabledInterfaces() map[driver.Kind][]string {
	return map[driver.Kind][]string{
		driver.KindBIOS:     {driver.NoBIOS, "redfish"},
		driver.KindBoot:     {pxe.NameIPXE, pxe.NamePXE, "redfish-virtual-media"},
		driver.KindConsole:  {driver.NoConsole},
		driver.KindDeploy:   {agentdeploy.AutodetectName, agentdeploy.Name, agentdeploy.RamdiskName, "bootc"},
		driver.KindFirmware: {driver.NoFirmware},
		driver.KindInspect:  {agentdeploy.InspectName, driver.NoInspect, "redfish"},
		driver.KindNetwork:  {driver.Flat, driver.Noop},
		driver.KindRAID:     {agentdeploy.RAIDName, driver.NoRAID, "redfish"},
		driver.KindRescue:   {driver.NoRescue},
		driver.KindStorage:  {"cinder", driver.Noop},
		driver.KindVendor:   {"ipmitool", "redfish", driver.NoVendor},
	}
}

// catalog is what anvild could register: the hardware types and
// implementation names of every bundle, before the registry is built.
type catalog struct {
	hw    map[string]bool
	impls map[driver.Kind]map[string]bool
}

func newCatalog() *catalog {
	return &catalog{hw: map[string]bool{}, impls: map[driver.Kind]map[string]bool{}}
}

func (c *catalog) add(b driver.Bundle) {
	for _, h := range b.HardwareTypes {
		c.hw[h.Name] = true
	}
	for _, i := range b.Implementations {
		c.addName(i.Kind, i.Name)
	}
}

func (c *catalog) addName(k driver.Kind, name string) {
	if c.impls[k] == nil {
		c.impls[k] = map[string]bool{}
	}
	c.impls[k][name] = true
}

// driverDefaults fills what the configuration leaves unset with Ironic's
// defaults, restricted to what anvild has (cat):
//   - enabled_hardware_types unset: ipmi and redfish, those whose plugin
//     was found; when neither was, fake-hardware alone, with a warning
//     (Ironic would refuse to start; anvild stays usable for a first try);
//   - enabled_<kind>_interfaces unset: Ironic's default list without the
//     names nothing provides (bootc, cinder, ...), plus fake when
//     fake-hardware is enabled (its nodes need the fake implementations,
//     as Ironic's own test jobs enable them).
//
// A list the configuration sets is kept as written: a name nothing
// provides then stops anvild, as it stops Ironic. notes are what to log.
func driverDefaults(in driver.Config, cat *catalog, pluginDirs []string) (out driver.Config, warnings, notes []string) {
	out = driver.Config{
		EnabledHardwareTypes: slices.Clone(in.EnabledHardwareTypes),
		EnabledInterfaces:    map[driver.Kind][]string{},
		DefaultInterfaces:    map[driver.Kind]string{},
	}
	for k, v := range in.EnabledInterfaces {
		out.EnabledInterfaces[k] = slices.Clone(v)
	}
	for k, v := range in.DefaultInterfaces {
		out.DefaultInterfaces[k] = v
	}
	if in.EnabledHardwareTypes == nil {
		var missing []string
		for _, h := range ironicHardwareTypes {
			if cat.hw[h] {
				out.EnabledHardwareTypes = append(out.EnabledHardwareTypes, h)
			} else {
				missing = append(missing, h)
			}
		}
		switch {
		case len(out.EnabledHardwareTypes) == 0:
			out.EnabledHardwareTypes = []string{builtin.FakeHardware}
			warnings = append(warnings, fmt.Sprintf(
				"no driver plugin for Ironic's default hardware types (ipmi, redfish) in %s: enabling fake-hardware alone (simulated machines); "+
					"install the plugins beside anvild (go install github.com/anvilmetal/anvil/cmd/...) or set [DEFAULT]enabled_hardware_types",
				dirList(pluginDirs)))
		case len(missing) > 0:
			notes = append(notes, fmt.Sprintf("hardware type(s) %s not enabled: no plugin for them in %s", strings.Join(missing, ", "), dirList(pluginDirs)))
		}
	}
	fakeOn := slices.Contains(out.EnabledHardwareTypes, builtin.FakeHardware)
	for k, def := range ironicEnabledInterfaces() {
		if _, set := in.EnabledInterfaces[k]; set {
			continue
		}
		var list, absent []string
		for _, name := range def {
			if cat.impls[k][name] {
				list = append(list, name)
			} else {
				absent = append(absent, name)
			}
		}
		if fakeOn && cat.impls[k][fake.Name] {
			list = append(list, fake.Name)
		}
		if len(absent) > 0 {
			notes = append(notes, fmt.Sprintf("enabled_%s_interfaces: Ironic's default %s not available here, left out", k, strings.Join(absent, ", ")))
		}
		out.EnabledInterfaces[k] = list
	}
	return out, warnings, notes
}

func dirList(dirs []string) string {
	if len(dirs) == 0 {
		return "no plugin directory"
	}
	return strings.Join(dirs, ", ")
}

// defaultPluginDirs are where anvild looks for driver plugins when
// [anvil]plugin_dirs is unset: the directory of its own executable (where
// go install puts anvild and the anvil-driver-* commands together) and
// $XDG_DATA_HOME/anvil/plugins ($HOME/.local/share/anvil/plugins when
// XDG_DATA_HOME is unset). Directories that do not exist are left out.
func defaultPluginDirs(executable string, getenv func(string) string) []string {
	var dirs []string
	if executable != "" {
		if p, err := filepath.EvalSymlinks(executable); err == nil {
			executable = p
		}
		dirs = append(dirs, filepath.Dir(executable))
	}
	if x := getenv("XDG_DATA_HOME"); x != "" && filepath.IsAbs(x) {
		dirs = append(dirs, filepath.Join(x, "anvil", "plugins"))
	} else if h := getenv("HOME"); h != "" {
		dirs = append(dirs, filepath.Join(h, ".local", "share", "anvil", "plugins"))
	}
	var out []string
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// drivers is what anvild registers: the registry with the built-in
// implementations, the library's agent and console implementations and
// the plugins' bundles. The network boot interfaces come later
// (registerNetboot): they write into the boot server, which needs the
// conductor.
type drivers struct {
	reg     *driver.Registry
	config  driver.Config
	host    *plugin.Host
	console *console.Manager
}

// driverDeps are what loadDrivers needs from the rest of anvild.
type driverDeps struct {
	Client *agentclient.Client
	Log    *slog.Logger
	// Executable is anvild's own path (os.Executable), for the default
	// plugin directory; Getenv reads XDG_DATA_HOME and HOME.
	Executable string
	Getenv     func(string) string
	// TracerProvider, when not nil, traces the plugin calls, and the
	// plugins export their own spans of each call to OTLPTraces.
	TracerProvider *sdktrace.TracerProvider
	OTLPTraces     string
	// Images are the direct deploy's image options (sources, the
	// conductor's image cache).
	Images agentdeploy.Options
}

// libraryBundles are the implementations the library has and anvild runs
// in its own process: the agent-based deploy, inspect, RAID and rescue
// interfaces, and the ipmitool-socat console (a long-running process and
// a TCP port on the conductor host).
//
// The autodetect interface chooses among Ironic's
// autodetect_deploy_interfaces (ramdisk, bootc, direct) those registered
// and enabled, which deployLookup answers once the registry exists.
func libraryBundles(d driverDeps, cm *console.Manager, deployLookup func(string) driver.Interface) ([]driver.Bundle, error) {
	inspect, err := agentdeploy.NewInspect(agentdeploy.InspectOptions{Logger: d.Log.With("component", "inspect")})
	if err != nil {
		return nil, err
	}
	agent := driver.Bundle{Implementations: []driver.Implementation{
		{Kind: driver.KindDeploy, Name: agentdeploy.Name, Impl: agentdeploy.NewWithOptions(d.Client, d.Images)},
		{Kind: driver.KindInspect, Name: agentdeploy.InspectName, Impl: inspect},
		{Kind: driver.KindRAID, Name: agentdeploy.RAIDName, Impl: agentdeploy.NewRAID()},
		{Kind: driver.KindRescue, Name: agentdeploy.RescueName, Impl: agentdeploy.NewRescue()},
		{Kind: driver.KindDeploy, Name: agentdeploy.CustomAgentName, Impl: agentdeploy.NewCustomAgent(d.Client)},
		{Kind: driver.KindDeploy, Name: agentdeploy.RamdiskName, Impl: agentdeploy.NewRamdisk()},
		{Kind: driver.KindDeploy, Name: agentdeploy.AutodetectName, Impl: agentdeploy.NewAutodetect(agentdeploy.DefaultAutodetectCandidates(), deployLookup)},
	}}
	return []driver.Bundle{
		builtin.Bundle(fake.Config{}),
		agent,
		ipmisol.New(cm, ipmisol.Options{Logger: d.Log.With("component", "ipmisol")}).Bundle(),
	}, nil
}

// loadDrivers discovers the plugins, settles the enabled lists (see
// driverDefaults) and registers everything. The caller closes what it
// returns (closeDrivers) when it is done.
func loadDrivers(ctx context.Context, cfg *Config, d driverDeps) (*drivers, error) {
	out := &drivers{console: console.NewManager(console.Options{Logger: d.Log.With("component", "console")})}
	bundles, err := libraryBundles(d, out.console, func(name string) driver.Interface {
		if out.reg == nil || !slices.Contains(out.config.EnabledInterfaces[driver.KindDeploy], name) {
			return nil
		}
		impl, _ := out.reg.Interface(driver.KindDeploy, name)
		return impl
	})
	if err != nil {
		out.close()
		return nil, err
	}
	sources := make([]string, len(bundles))
	for i := range sources {
		sources[i] = "builtin"
	}
	dirs := cfg.PluginDirs
	if dirs == nil {
		dirs = defaultPluginDirs(d.Executable, d.Getenv)
	}
	if len(dirs) > 0 {
		hc := plugin.HostConfig{Dirs: dirs, Logger: d.Log, PluginEnv: mediaEnv(cfg)}
		if d.TracerProvider != nil {
			hc.TracerProvider = d.TracerProvider
			hc.PluginEnv = append(hc.PluginEnv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="+d.OTLPTraces)
		}
		out.host = plugin.NewHost(hc)
		rep, err := out.host.Discover(ctx)
		if err == nil {
			err = rep.Err()
		}
		if err != nil {
			out.close()
			return nil, fmt.Errorf("anvild: plugin discovery: %w", err)
		}
		for _, p := range rep.Plugins {
			st := p.Status()
			d.Log.Info("driver plugin", "name", st.Name, "version", st.Version, "path", st.Path)
			b, err := p.Bundle()
			if err != nil {
				out.close()
				return nil, fmt.Errorf("anvild: driver plugin %s: %w", st.Path, err)
			}
			bundles = append(bundles, b)
			sources = append(sources, "plugin "+p.Name()+" ("+st.Path+")")
		}
	}
	cat := newCatalog()
	for _, b := range bundles {
		cat.add(b)
	}
	if cfg.Netboot {
		for _, n := range []string{pxe.NameIPXE, pxe.NamePXE, pxe.NameHTTPIPXE, pxe.NameHTTP} {
			cat.addName(driver.KindBoot, n)
		}
	}
	var warnings, notes []string
	out.config, warnings, notes = driverDefaults(cfg.Drivers, cat, dirs)
	for _, w := range warnings {
		d.Log.Warn(w)
	}
	for _, n := range notes {
		d.Log.Info(n)
	}
	out.reg = driver.NewRegistry(out.config)
	for _, w := range out.config.Warnings() {
		d.Log.Warn(w.String())
	}
	var errs []error
	for i, b := range bundles {
		errs = append(errs, out.reg.RegisterFrom(sources[i], b))
	}
	if err := errors.Join(errs...); err != nil {
		out.close()
		return nil, err
	}
	return out, nil
}

// vmediaConfig are the options of the boot ISO that the redfish
// plugin builds from deploy_kernel and deploy_ramdisk.
type vmediaConfig struct {
	ISOLINUX, LDLinux, GRUBEFI string
	KernelAppendParams         string
}

// mediaEnv is the plugins' environment for [deploy]http_root and
// http_url (where the redfish plugin publishes virtual media images),
// [DEFAULT]isolinux_bin and ldlinux_c32, [anvil]grub_efi (the boot
// loaders of the boot ISO it builds) and [redfish]kernel_append_params.
func mediaEnv(cfg *Config) []string {
	var env []string
	if cfg.HTTPRoot != "" && cfg.HTTPURL != "" {
		env = append(env, "ANVIL_REDFISH_HTTP_ROOT="+cfg.HTTPRoot, "ANVIL_REDFISH_HTTP_URL="+cfg.HTTPURL)
	}
	for _, kv := range [][2]string{{"ANVIL_REDFISH_ISOLINUX_BIN", cfg.VMedia.ISOLINUX}, {"ANVIL_REDFISH_LDLINUX_C32", cfg.VMedia.LDLinux},
		{"ANVIL_REDFISH_GRUB_EFI", cfg.VMedia.GRUBEFI}, {"ANVIL_REDFISH_KERNEL_APPEND_PARAMS", cfg.VMedia.KernelAppendParams}} {
		if kv[1] != "" {
			env = append(env, kv[0]+"="+kv[1])
		}
	}
	return env
}

// registerNetboot adds the network boot interfaces writing into boot.
func (d *drivers) registerNetboot(boot *pxe.Interfaces) error {
	return d.reg.Register(boot.Bundle())
}

func (d *drivers) close() {
	if d.host != nil {
		_ = d.host.Close()
	}
	if d.console != nil {
		d.console.Close()
	}
}
