package main

import (
	"context"
	"encoding/json"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/netboot/netboottest"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
)

// pluginCatalog is anvild's own bundles plus the ipmi and redfish
// plugins' (as their processes describe them).
func pluginCatalog(t *testing.T, withPlugins, netboot bool) *catalog {
	t.Helper()
	bundles, err := libraryBundles(driverDeps{Log: slog.New(slog.DiscardHandler)}, console.NewManager(console.Options{}), func(string) driver.Interface { return nil })
	if err != nil {
		t.Fatal(err)
	}
	cat := newCatalog()
	for _, b := range bundles {
		cat.add(b)
	}
	if withPlugins {
		cat.add(ipmitool.NewDrivers(ipmitool.Options{}).Bundle())
		cat.add(rfdriver.NewDrivers(rfdriver.Options{}).Bundle())
	}
	if netboot {
		cat.add(pxe.New(netboottest.NewStore(), pxe.Options{}).Bundle())
	}
	return cat
}

// TestDriverDefaults: with nothing configured anvild enables Ironic's
// default hardware types and interface lists, less what nothing here
// provides; fake-hardware when no plugin is found; what the
// configuration sets is kept as written.
func TestDriverDefaults(t *testing.T) {
	for _, tc := range []struct {
		name              string
		in                driver.Config
		plugins, netboot  bool
		wantHW            []string
		want              map[driver.Kind][]string // kinds checked
		warnings, noteHas string
	}{
		{
			name: "plugins found", plugins: true, netboot: true,
			wantHW: []string{"ipmi", "redfish"},
			want: map[driver.Kind][]string{
				driver.KindBIOS:       {"no-bios", "redfish"},
				driver.KindBoot:       {"ipxe", "pxe", "redfish-virtual-media"},
				driver.KindConsole:    {"no-console"},
				driver.KindDeploy:     {"autodetect", "direct", "ramdisk"},
				driver.KindFirmware:   {"no-firmware"},
				driver.KindInspect:    {"agent", "no-inspect", "redfish"},
				driver.KindNetwork:    {"flat", "noop"},
				driver.KindRAID:       {"agent", "no-raid", "redfish"},
				driver.KindRescue:     {"no-rescue"},
				driver.KindStorage:    {"noop"},
				driver.KindVendor:     {"ipmitool", "redfish", "no-vendor"},
				driver.KindManagement: nil, // computed by the registry, as Ironic computes it
				driver.KindPower:      nil,
			},
			noteHas: "enabled_deploy_interfaces: Ironic's default bootc not available here",
		},
		{
			name: "no plugin", wantHW: []string{"fake-hardware"},
			want: map[driver.Kind][]string{
				driver.KindBoot:    {"fake"},
				driver.KindDeploy:  {"autodetect", "direct", "ramdisk", "fake"},
				driver.KindInspect: {"agent", "no-inspect", "fake"},
				driver.KindVendor:  {"no-vendor", "fake"},
			},
			warnings: "no driver plugin for Ironic's default hardware types (ipmi, redfish) in /plugins: enabling fake-hardware alone",
		},
		{
			name:    "configured lists kept",
			plugins: true,
			in: driver.Config{EnabledHardwareTypes: []string{"fake-hardware", "ipmi"},
				EnabledInterfaces: map[driver.Kind][]string{driver.KindDeploy: {"direct", "fake"}, driver.KindBoot: {"fake", "pxe"}, driver.KindRAID: nil}},
			wantHW: []string{"fake-hardware", "ipmi"},
			want: map[driver.Kind][]string{
				driver.KindDeploy:  {"direct", "fake"},
				driver.KindBoot:    {"fake", "pxe"}, // pxe unavailable: the registry's Check refuses it, as Ironic does
				driver.KindRAID:    nil,             // set empty: computed
				driver.KindInspect: {"agent", "no-inspect", "redfish", "fake"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings, notes := driverDefaults(tc.in, pluginCatalog(t, tc.plugins, tc.netboot), []string{"/plugins"})
			if !reflect.DeepEqual(got.EnabledHardwareTypes, tc.wantHW) {
				t.Errorf("hardware types %q, want %q", got.EnabledHardwareTypes, tc.wantHW)
			}
			for k, want := range tc.want {
				if g := got.EnabledInterfaces[k]; !slices.Equal(g, want) {
					t.Errorf("enabled_%s_interfaces %q, want %q", k, g, want)
				}
			}
			if w := strings.Join(warnings, "\n"); tc.warnings == "" && w != "" || !strings.Contains(w, tc.warnings) {
				t.Errorf("warnings %q, want %q", w, tc.warnings)
			}
			if n := strings.Join(notes, "\n"); !strings.Contains(n, tc.noteHas) {
				t.Errorf("notes %q lack %q", n, tc.noteHas)
			}
		})
	}
}

// TestDriverDefaultsMakeUsableNodes: the defaults give an ipmi, a redfish
// and (fallback) a fake-hardware node a valid default for every kind.
func TestDriverDefaultsMakeUsableNodes(t *testing.T) {
	for _, tc := range []struct {
		plugins bool
		hw      []string
	}{{true, []string{"ipmi", "redfish"}}, {false, []string{builtin.FakeHardware}}} {
		cfg, _, _ := driverDefaults(driver.Config{}, pluginCatalog(t, tc.plugins, true), nil)
		reg := driver.NewRegistry(cfg)
		bundles, err := libraryBundles(driverDeps{Log: slog.New(slog.DiscardHandler)}, console.NewManager(console.Options{}), func(string) driver.Interface { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if tc.plugins {
			bundles = append(bundles, ipmitool.NewDrivers(ipmitool.Options{}).Bundle(), rfdriver.NewDrivers(rfdriver.Options{}).Bundle())
		}
		bundles = append(bundles, pxe.New(netboottest.NewStore(), pxe.Options{}).Bundle())
		for _, b := range bundles {
			if err := reg.Register(b); err != nil {
				t.Fatal(err)
			}
		}
		if err := reg.Check(); err != nil {
			t.Fatalf("Check: %v", err)
		}
		for _, hw := range tc.hw {
			got, err := reg.FillDefaults(driver.NodeInterfaces{Node: "n1", HardwareType: hw})
			if err != nil {
				t.Fatalf("%s: %v", hw, err)
			}
			t.Logf("%s defaults: %v", hw, got)
			if hw == "redfish" && (got[driver.KindInspect] != "redfish" || got[driver.KindBoot] != "ipxe") {
				t.Errorf("redfish defaults %v", got)
			}
			if hw == "ipmi" && (got[driver.KindInspect] != "agent" || got[driver.KindPower] != "ipmitool" || got[driver.KindDeploy] != "autodetect") {
				t.Errorf("ipmi defaults %v", got)
			}
			// enabled_network_interfaces = flat,noop, as Ironic's; an ipmi
			// or redfish node defaults to flat (GenericHardware's first).
			if tc.plugins && got[driver.KindNetwork] != driver.Flat {
				t.Errorf("%s network default %q, want flat", hw, got[driver.KindNetwork])
			}
		}
		if enabled := reg.Enabled().Interfaces[driver.KindNetwork]; !slices.Contains(enabled, driver.Flat) || !slices.Contains(enabled, driver.Noop) {
			t.Errorf("enabled network interfaces %v, want flat and noop", enabled)
		}
	}
}

func TestDefaultPluginDirs(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	data := filepath.Join(root, "data")
	home := filepath.Join(root, "home")
	for _, d := range []string{bin, filepath.Join(data, "anvil", "plugins"), filepath.Join(home, ".local", "share", "anvil", "plugins")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	exe := filepath.Join(bin, "anvild")
	if got := defaultPluginDirs(exe, env(map[string]string{"XDG_DATA_HOME": data, "HOME": home})); !slices.Equal(got, []string{bin, filepath.Join(data, "anvil", "plugins")}) {
		t.Errorf("with XDG_DATA_HOME: %q", got)
	}
	if got := defaultPluginDirs(exe, env(map[string]string{"HOME": home})); !slices.Equal(got, []string{bin, filepath.Join(home, ".local", "share", "anvil", "plugins")}) {
		t.Errorf("without XDG_DATA_HOME: %q", got)
	}
	if got := defaultPluginDirs(exe, env(map[string]string{"XDG_DATA_HOME": filepath.Join(root, "none")})); !slices.Equal(got, []string{bin}) {
		t.Errorf("missing data directory: %q", got)
	}
}

// notAnvildImplementations are implementation types of the library that
// anvild does not register, each for a reason.
var notAnvildImplementations = map[string]string{
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet": "simulated machines for benchmarks and examples, not hardware",
	"github.com/anvilmetal/anvil/driver/plugin":               "the plugin host's proxies for implementations in plugin processes",
}

// pluginPackages are the library packages whose implementations anvild
// gets from a plugin process: each must be in its plugin's bundle.
func pluginPackages() map[string]driver.Bundle {
	return map[string]driver.Bundle{
		"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool":    ipmitool.NewDrivers(ipmitool.Options{}).Bundle(),
		"github.com/anvilmetal/anvil/plugins/redfish/rfdriver": rfdriver.NewDrivers(rfdriver.Options{}).Bundle(),
	}
}

// TestAnvildRegistersEveryLibraryImplementation type-checks the module's
// library packages (from the compiler's export data) and finds every
// exported type implementing one of the 13 interface kinds. Each must be
// registered by anvild (with the boot server on), or be in the bundle of
// the plugin that serves its package: a library implementation anvild
// cannot enable fails here.
func TestAnvildRegistersEveryLibraryImplementation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list -export over the module; skipped with -short")
	}
	impls := libraryImplementations(t)
	if len(impls) < 20 {
		t.Fatalf("found only %d implementation types: the scan is broken", len(impls))
	}

	// What anvild registers, the boot server's interfaces included.
	cfg := defaultConfig()
	cfg.PluginDirs = []string{}
	cfg.Netboot = true
	drv, err := loadDrivers(context.Background(), cfg, driverDeps{Log: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.close()
	if err := drv.registerNetboot(pxe.New(netboottest.NewStore(), pxe.Options{})); err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, k := range driver.Kinds() {
		for _, n := range drv.reg.Implementations(k) {
			impl, _ := drv.reg.Interface(k, n)
			registered[string(k)+" "+typeName(impl)] = true
		}
	}
	inPlugin := map[string]map[string]bool{}
	for pkg, b := range pluginPackages() {
		inPlugin[pkg] = map[string]bool{}
		for _, i := range b.Implementations {
			inPlugin[pkg][string(i.Kind)+" "+typeName(i.Impl)] = true
		}
	}
	for _, im := range impls {
		key := string(im.kind) + " " + im.typ
		switch {
		case notAnvildImplementations[im.pkg] != "":
		case inPlugin[im.pkg] != nil:
			if !inPlugin[im.pkg][key] {
				t.Errorf("%s implements the %s interface but its plugin does not serve it", im.typ, im.kind)
			}
		case !registered[key]:
			t.Errorf("%s implements the %s interface but anvild does not register it", im.typ, im.kind)
		}
	}
}

// typeName is "<package path>.<type name>" of impl's named type.
func typeName(impl any) string {
	rt := reflect.TypeOf(impl)
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	return rt.PkgPath() + "." + rt.Name()
}

type libraryImpl struct {
	pkg, typ string
	kind     driver.Kind
}

// kindInterfaces maps each kind to the name of its interface in package
// driver.
var kindInterfaces = map[driver.Kind]string{
	driver.KindBIOS: "BIOSInterface", driver.KindBoot: "BootInterface", driver.KindConsole: "ConsoleInterface",
	driver.KindDeploy: "DeployInterface", driver.KindFirmware: "FirmwareInterface", driver.KindInspect: "InspectInterface",
	driver.KindManagement: "ManagementInterface", driver.KindNetwork: "NetworkInterface", driver.KindPower: "PowerInterface",
	driver.KindRAID: "RAIDInterface", driver.KindRescue: "RescueInterface", driver.KindStorage: "StorageInterface",
	driver.KindVendor: "VendorInterface",
}

// libraryImplementations lists the exported types of the module's library
// packages (not commands, examples, internal test harnesses or the *test
// and *mock packages) that implement a kind's interface.
func libraryImplementations(t *testing.T) []libraryImpl {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Name,Export,Module", "github.com/anvilmetal/anvil/...")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath, Name, Export string
		Module                   *struct{ Path string }
	}
	exports := map[string]string{}
	var ours []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == "github.com/anvilmetal/anvil" {
			ours = append(ours, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	dpkg, err := imp.Import("github.com/anvilmetal/anvil/driver")
	if err != nil {
		t.Fatal(err)
	}
	ifaces := map[driver.Kind]*types.Interface{}
	for k, n := range kindInterfaces {
		ifaces[k] = dpkg.Scope().Lookup(n).Type().Underlying().(*types.Interface)
	}
	var found []libraryImpl
	for _, p := range ours {
		rel := strings.TrimPrefix(p.ImportPath, "github.com/anvilmetal/anvil")
		if p.Name == "main" || strings.HasPrefix(rel, "/internal/") || strings.HasPrefix(rel, "/examples/") ||
			strings.Contains(rel, "/internal/") || strings.HasSuffix(p.Name, "test") || strings.HasSuffix(p.Name, "mock") {
			continue
		}
		tp, err := imp.Import(p.ImportPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range tp.Scope().Names() {
			tn, ok := tp.Scope().Lookup(name).(*types.TypeName)
			if !ok || !tn.Exported() || types.IsInterface(tn.Type()) {
				continue
			}
			for k, it := range ifaces {
				if types.Implements(tn.Type(), it) || types.Implements(types.NewPointer(tn.Type()), it) {
					found = append(found, libraryImpl{pkg: p.ImportPath, typ: p.ImportPath + "." + name, kind: k})
				}
			}
		}
	}
	return found
}
