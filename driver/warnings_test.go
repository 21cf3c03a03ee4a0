package driver_test

import (
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
)

func TestValidationWarningsNameUnknownKeys(t *testing.T) {
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	d, err := reg.Resolve(driver.NodeInterfaces{Node: "n1", HardwareType: builtin.FakeHardware})
	if err != nil {
		t.Fatal(err)
	}
	tk := &driver.Task{NodeUUID: "n1", DriverInfo: map[string]any{
		fake.DelayKey: "1ms", "fake_hardware_frobnicate": true, "deploy_kernel": "http://k", "other": 1,
	}}
	got := d.ValidationWarnings(tk)
	if len(got) != 1 || got[0].Key != "fake_hardware_frobnicate" || got[0].Field != "driver_info" || got[0].Node != "n1" {
		t.Fatalf("warnings %+v, want one for fake_hardware_frobnicate", got)
	}
}
