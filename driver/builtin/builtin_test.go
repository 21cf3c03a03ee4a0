package builtin_test

import (
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
)

// TestBundleImplementsTheRegistryDefaults checks that the no-op names the
// registry falls back to for a kind a hardware type leaves out
// (driver.HardwareType.SupportedFor) are implemented by the bundle: the names
// live in driver, the implementations in driver/noop, and this test keeps
// them in step.
func TestBundleImplementsTheRegistryDefaults(t *testing.T) {
	b := builtin.Bundle(fake.Config{})
	have := map[driver.Kind]map[string]bool{}
	for _, im := range b.Implementations {
		if have[im.Kind] == nil {
			have[im.Kind] = map[string]bool{}
		}
		if have[im.Kind][im.Name] {
			t.Errorf("%s/%s is in the bundle twice", im.Kind, im.Name)
		}
		have[im.Kind][im.Name] = true
	}
	for _, k := range driver.Kinds() {
		for _, name := range (driver.HardwareType{}).SupportedFor(k) {
			if !have[k][name] {
				t.Errorf("default %s implementation %q is not in builtin.Bundle", k, name)
			}
		}
		if !have[k][fake.Name] {
			t.Errorf("no fake %s implementation in builtin.Bundle", k)
		}
	}
}

// TestBundleRegistersAndChecks enables both built-in hardware types and
// expects the registry to accept them and to give fake-hardware nodes the
// fake implementations and the noop network (manual-management nodes need
// a boot interface from elsewhere, so only its lists are checked).
func TestBundleRegistersAndChecks(t *testing.T) {
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware, builtin.ManualManagement}})
	reg.MustRegister(builtin.Bundle(fake.Config{}))
	if err := reg.Check(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		hw     string
		kind   driver.Kind
		wanted string
	}{
		{builtin.FakeHardware, driver.KindPower, fake.Name},
		{builtin.FakeHardware, driver.KindNetwork, driver.Noop},
		{builtin.FakeHardware, driver.KindBIOS, fake.Name},
		{builtin.FakeHardware, driver.KindDeploy, fake.Name},
	} {
		got, err := reg.FillDefaults(driver.NodeInterfaces{HardwareType: tc.hw})
		if err != nil {
			t.Fatalf("%s: %v", tc.hw, err)
		}
		if got[tc.kind] != tc.wanted {
			t.Errorf("%s default %s = %q, want %q", tc.hw, tc.kind, got[tc.kind], tc.wanted)
		}
	}
	mm := builtin.ManualManagementType()
	if !mm.Supports(driver.KindDeploy, driver.Noop) || !mm.Supports(driver.KindManagement, driver.Noop) || !mm.Supports(driver.KindPower, fake.Name) {
		t.Errorf("manual-management lists = %v, want noop deploy and management and fake power", mm.Supported)
	}
}
