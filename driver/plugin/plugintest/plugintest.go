// Package plugintest is the test harness for driver plugins: it builds a
// plugin's executable once per test binary, discovers and starts it under
// a real plugin.Host, registers what it serves into a driver.Registry, and
// runs the driver/drivertest conformance suite on every implementation it
// serves through the real process (gRPC, mutual TLS, the proxies the
// conductor uses). A vendor tests its plugin with it exactly as Anvil
// tests its own (plugins/ipmi, plugins/redfish, examples/vendor-plugin).
//
// # Usage
//
// In the plugin's test package:
//
//	var acme = &plugintest.Plugin{Package: "example.com/anvil-driver-acme", Name: "acme"}
//
//	func TestMain(m *testing.M) { plugintest.Main(m, acme) }
//
//	func TestConformanceThroughPlugin(t *testing.T) {
//		host, _ := plugintest.Load(t, acme.Path(t), plugintest.Options{})
//		plugintest.Conformance(t, host, plugintest.Suite{NewTask: newTask})
//	}
//
// Main owns the build directory and removes it when the tests end; the
// first Path builds the executable with the go command (a later test of
// the same binary reuses it). Load hands the host and registry to the
// test and closes the host (stopping the plugin process) when the test
// ends.
package plugintest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/drivertest"
	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/internal/testlog"
)

// execPrefix is how a plugin executable's name starts: Discover only
// starts files named anvil-driver-<name>.
const execPrefix = "anvil-driver-"

// Plugin is a plugin executable built from its main package on first use
// and reused by every later test of the test binary. Declare it as a
// variable of the test package and hand it to Main.
type Plugin struct {
	// Package is the plugin's main package: an import path, or a
	// directory relative to the test's package directory ("." when the
	// tests sit beside the plugin's main).
	Package string
	// Name is the plugin's name; the executable is anvil-driver-<Name>,
	// the name Discover looks for.
	Name string

	// dir is the build directory Main gives the plugin ("" outside Main).
	dir  string
	once sync.Once
	path string
	err  error
}

// Main is a TestMain body: it gives each plugin a build directory, runs
// the tests, removes the directory and exits with the tests' status. The
// plugins are built lazily, by the first Path of a test that needs them.
func Main(m *testing.M, plugins ...*Plugin) {
	os.Exit(run(m, plugins))
}

func run(m *testing.M, plugins []*Plugin) int {
	dir, err := os.MkdirTemp("", "anvil-plugintest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "plugintest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	for i, p := range plugins {
		// One subdirectory each: two plugins may share a Name.
		p.dir = filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(p.dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "plugintest:", err)
			return 1
		}
	}
	return m.Run()
}

// Path returns the plugin's executable, building it on the first call. A
// build failure fails t (and every later caller) with the go command's
// output. Outside Main it builds into t's temporary directory on every
// call.
func (p *Plugin) Path(t testing.TB) string {
	t.Helper()
	if p.dir == "" {
		path, err := build(p, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
	p.once.Do(func() { p.path, p.err = build(p, p.dir) })
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.path
}

func build(p *Plugin, dir string) (string, error) {
	if p.Package == "" || p.Name == "" || strings.ContainsAny(p.Name, `/\`) {
		return "", fmt.Errorf("plugintest: plugin %q of package %q: want a main package and a name without a path separator", p.Name, p.Package)
	}
	out := filepath.Join(dir, execPrefix+p.Name)
	cmd := exec.Command("go", "build", "-o", out, p.Package)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("plugintest: building plugin %s from %s: %w\n%s", p.Name, p.Package, err, stderr.String())
	}
	return out, nil
}

// Options configures Load.
type Options struct {
	// Registry receives the plugin's hardware types and implementations
	// next to what the caller registered into it first (built-ins,
	// stand-ins for interfaces the test does not exercise); Load then
	// checks it with Registry.Check. Nil is a fresh registry enabling
	// every hardware type the plugin serves.
	Registry *driver.Registry
	// Logs receives the host's and the plugins' log lines at trace level
	// (a *LogBuffer reads them back, to check that no secret is logged).
	// Nil discards them.
	Logs io.Writer
	// TracerProvider and PluginEnv are the host's (plugin.HostConfig):
	// a trace test records the host's spans and points the plugin's
	// exporter at its collector.
	TracerProvider trace.TracerProvider
	PluginEnv      []string
}

// Load discovers binary (an anvil-driver-<name> executable) under a fresh
// plugin.Host, as an embedder's host finds it in its plugin directory,
// registers what it serves into the registry of opts and checks it. The
// host, and with it the plugin process, is closed when the test ends. A
// plugin that is skipped or fails to describe itself fails t with the
// host's reason.
func Load(t testing.TB, binary string, opts Options) (*plugin.Host, *driver.Registry) {
	t.Helper()
	base := filepath.Base(binary)
	if !strings.HasPrefix(base, execPrefix) {
		t.Fatalf("plugintest: %s: a plugin executable is named %s<name>", binary, execPrefix)
	}
	abs, err := filepath.Abs(binary)
	if err != nil {
		t.Fatal(err)
	}
	// A directory holding only this plugin: Discover starts what it finds.
	dir := t.TempDir()
	if err := os.Symlink(abs, filepath.Join(dir, base)); err != nil {
		t.Fatal(err)
	}
	// Without Logs the host and plugin logs are dropped; a nil logger
	// would mean slog.Default and fill the test output.
	logger := slog.New(slog.DiscardHandler)
	if opts.Logs != nil {
		logger = slog.New(slog.NewTextHandler(opts.Logs, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
	}
	host := plugin.NewHost(plugin.HostConfig{Dirs: []string{dir}, Logger: logger, TracerProvider: opts.TracerProvider, PluginEnv: opts.PluginEnv})
	t.Cleanup(func() { host.Close() })
	rep, err := host.Discover(context.Background())
	if err != nil {
		t.Fatalf("plugintest: discovering %s: %v", binary, err)
	}
	if err := rep.Err(); err != nil || len(rep.Plugins) != 1 {
		t.Fatalf("plugintest: discovering %s: %d plugins, skipped: %v", binary, len(rep.Plugins), err)
	}
	reg := opts.Registry
	if reg == nil {
		b, err := rep.Plugins[0].Bundle()
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, h := range b.HardwareTypes {
			types = append(types, h.Name)
		}
		reg = driver.NewRegistry(driver.Config{EnabledHardwareTypes: types})
	}
	if err := host.Register(reg); err != nil {
		t.Fatalf("plugintest: registering %s: %v", binary, err)
	}
	if err := reg.Check(); err != nil {
		t.Fatalf("plugintest: registry with %s: %v", binary, err)
	}
	return host, reg
}

// Implementations returns the implementations every plugin of host
// serves, as proxies to the plugin processes, keyed by kind and name.
func Implementations(t testing.TB, host *plugin.Host) map[driver.Kind]map[string]driver.Interface {
	t.Helper()
	out := map[driver.Kind]map[string]driver.Interface{}
	for _, p := range host.Plugins() {
		b, err := p.Bundle()
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range b.Implementations {
			if out[i.Kind] == nil {
				out[i.Kind] = map[string]driver.Interface{}
			}
			out[i.Kind][i.Name] = i.Impl
		}
	}
	return out
}

// Suite configures Conformance.
type Suite struct {
	// NewTask returns a task valid for every implementation under test
	// (all their required driver_info present). It is called once per
	// check.
	NewTask func() *driver.Task
	// Slow, when set, returns for the implementation of kind called name
	// a function that makes every later operation on a task slow (a BMC
	// address that answers late, for example), so that the suite checks
	// that a deadline interrupts a call in flight; nil skips that check.
	Slow func(kind driver.Kind, name string) func(*driver.Task)
}

// Conformance runs the driver/drivertest suite on every implementation
// the plugins of host serve, through the plugin processes, one subtest
// per implementation named <kind>/<name>. A host serving no
// implementation fails t.
func Conformance(t *testing.T, host *plugin.Host, s Suite) {
	t.Helper()
	impls := Implementations(t, host)
	if len(impls) == 0 {
		t.Fatal("plugintest: the host's plugins serve no implementation")
	}
	for _, k := range driver.Kinds() {
		for _, name := range slices.Sorted(maps.Keys(impls[k])) {
			c := drivertest.Config{Kind: k, Name: name, Impl: impls[k][name], NewTask: s.NewTask}
			if s.Slow != nil {
				c.Slow = s.Slow(k, name)
			}
			t.Run(string(k)+"/"+name, func(t *testing.T) { drivertest.Run(t, c) })
		}
	}
}

// LogBuffer is a log sink safe for the host's concurrent writers, for
// Options.Logs: Write appends, String returns everything written so far.
type LogBuffer = testlog.Buffer
