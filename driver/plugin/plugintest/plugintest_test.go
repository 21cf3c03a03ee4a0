package plugintest_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin/plugintest"
)

// fakePlugin is Anvil's fake-hardware plugin (plugins/fake), built once
// for this test binary.
var fakePlugin = &plugintest.Plugin{Package: "github.com/anvilmetal/anvil/plugins/fake", Name: "fake"}

func TestMain(m *testing.M) { plugintest.Main(m, fakePlugin, acmePlugin) }

// TestPathBuildsOnce checks that every test of the binary gets the same
// executable, built once, named as Discover requires.
func TestPathBuildsOnce(t *testing.T) {
	first := fakePlugin.Path(t)
	fi, err := os.Stat(first)
	if err != nil || !strings.HasSuffix(first, "/anvil-driver-fake") {
		t.Fatalf("Path = %q, %v", first, err)
	}
	var again string
	t.Run("later test", func(t *testing.T) { again = fakePlugin.Path(t) })
	fi2, err := os.Stat(again)
	if err != nil || again != first || !os.SameFile(fi, fi2) || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("second Path = %q (%v), rebuilt or moved from %q", again, err, first)
	}
}

// TestLoadRegistersNextToBuiltins loads the plugin into a registry that
// already holds a stand-in, and checks the plugin's implementations are
// registered with the plugin as their source while the stand-in stays.
func TestLoadRegistersNextToBuiltins(t *testing.T) {
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.RegisterInterface(driver.KindBoot, "pxe", fake.NewBoot(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	host, got := plugintest.Load(t, fakePlugin.Path(t), plugintest.Options{Registry: reg})
	if got != reg || len(host.Plugins()) != 1 || host.Plugins()[0].Name() != "fake" {
		t.Fatalf("Load returned registry %p (want %p) and plugins %v", got, reg, host.Plugins())
	}
	if src, _ := reg.Source(driver.KindPower, fake.Name); !strings.HasPrefix(src, "plugin fake ") {
		t.Errorf("fake power comes from %q, want the plugin", src)
	}
	if src, _ := reg.Source(driver.KindBoot, "pxe"); strings.HasPrefix(src, "plugin") {
		t.Errorf("the stand-in pxe boot comes from %q", src)
	}
	if st := host.Plugins()[0].Status(); st.PID == 0 {
		t.Errorf("no plugin process: %+v", st)
	}
}

// TestLoadWithoutRegistry enables the plugin's own hardware types.
func TestLoadWithoutRegistry(t *testing.T) {
	_, reg := plugintest.Load(t, fakePlugin.Path(t), plugintest.Options{})
	if got := strings.Join(reg.HardwareTypes(), ","); !strings.Contains(got, builtin.FakeHardware) {
		t.Fatalf("hardware types %q", got)
	}
	if _, err := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware}); err != nil {
		t.Fatal(err)
	}
}

// TestConformanceCoversEveryImplementation runs the suite through the
// fake plugin's process and checks it ran one subtest per implementation
// the plugin serves, the slow check included where the test asked for it.
func TestConformanceCoversEveryImplementation(t *testing.T) {
	logs := &plugintest.LogBuffer{}
	host, _ := plugintest.Load(t, fakePlugin.Path(t), plugintest.Options{Logs: logs})
	want := 0
	for _, byName := range plugintest.Implementations(t, host) {
		want += len(byName)
	}
	ran, slowAsked := 0, 0
	t.Run("suite", func(t *testing.T) {
		plugintest.Conformance(t, host, plugintest.Suite{
			NewTask: func() *driver.Task {
				ran++
				return &driver.Task{NodeUUID: "n1", HardwareType: builtin.FakeHardware, DriverInfo: map[string]any{}}
			},
			Slow: func(k driver.Kind, name string) func(*driver.Task) {
				if name != fake.Name {
					return nil // the no-op implementations never wait
				}
				slowAsked++
				return func(tk *driver.Task) { tk.DriverInfo[fake.DelayKey] = (5 * time.Second).String() }
			},
		})
	})
	if want < 20 || ran < want || slowAsked == 0 {
		t.Fatalf("%d implementations, %d tasks built, %d slow checks", want, ran, slowAsked)
	}
	if !strings.Contains(logs.String(), "fake") {
		t.Errorf("no host log line reached Options.Logs:\n%s", logs.String())
	}
}

// TestExample runs the vendor test the package example shows.
func TestExample(t *testing.T) { testAcmePlugin(t) }
