package driver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/steps"
)

func newTask() *driver.Task {
	return &driver.Task{NodeUUID: "6f2b1c8e-1d8a-4a51-9c55-0d5d3c9e7a10", HardwareType: builtin.FakeHardware,
		DriverInfo: map[string]any{"ipmi_password": "hunter2", "ipmi_address": "10.0.0.1"}}
}

func TestTaskChangesAndApply(t *testing.T) {
	task := newTask()
	if !task.Changes().Empty() {
		t.Fatal("fresh task has changes")
	}
	task.SetDriverInternalInfo("a", 1.0)
	task.DeleteProperty("absent") // no-op: nothing changed
	c := task.Changes()
	if c.DriverInternalInfo["a"] != 1.0 || c.Properties != nil || c.DriverInfo != nil {
		t.Errorf("changes = %+v", c)
	}
	c.DriverInternalInfo["a"] = 2.0 // the returned maps are copies
	if task.DriverInternalInfo["a"] != 1.0 {
		t.Error("Changes returned the task's own map")
	}
	task.DeleteDriverInternalInfo("a")
	if c := task.Changes(); c.DriverInternalInfo == nil || len(c.DriverInternalInfo) != 0 {
		t.Errorf("emptied field must be an empty non-nil map, got %#v", c.DriverInternalInfo)
	}
	other := newTask()
	other.Apply(driver.Changes{Properties: map[string]any{"cpus": 8.0}, PortsChanged: true})
	if oc := other.Changes(); oc.Properties["cpus"] != 8.0 || !oc.PortsChanged || oc.DriverInternalInfo != nil {
		t.Errorf("applied changes = %+v", oc)
	}
}

func TestSecretsStayOutOfLogs(t *testing.T) {
	task := newTask()
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "task", task)
	out := b.String() + task.String() + fmt.Sprint(driver.Mask(task.DriverInfo))
	if strings.Contains(out, "hunter2") {
		t.Errorf("secret leaked: %s", out)
	}
	if !strings.Contains(out, "ipmi_password") || !strings.Contains(out, "10.0.0.1") {
		t.Errorf("expected keys and non-secret values: %s", out)
	}
}

func TestDriverStepsAndExecute(t *testing.T) {
	reg := newRegistry(t, driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	drv, err := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range drv.Steps(steps.Clean) {
		names = append(names, s.Interface+"."+s.Name)
	}
	want := "bios.apply_configuration bios.factory_reset firmware.update raid.create_configuration raid.delete_configuration"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("clean steps = %s, want %s", got, want)
	}
	task := newTask()
	step := steps.Step{Interface: "bios", Name: "apply_configuration", Args: map[string]any{"settings": []any{map[string]any{"name": "X", "value": "1"}}}}
	if _, err := drv.ExecuteStep(context.Background(), task, steps.Clean, step); err != nil {
		t.Fatal(err)
	}
	settings, err := drv.BIOS().CacheBIOSSettings(context.Background(), task)
	if err != nil || len(settings) != 3 || settings[2].Name != "X" || settings[2].Value != "1" {
		t.Errorf("settings = %+v, %v", settings, err)
	}
	_, err = drv.ExecuteStep(context.Background(), task, steps.Clean, steps.Step{Interface: "power", Name: "explode"})
	if !errors.Is(err, driver.ErrStepNotFound) {
		t.Errorf("unknown step = %v", err)
	}
	if v := drv.Validate(context.Background(), task); v[driver.KindPower] != nil || len(v) != 13 {
		t.Errorf("validate = %v", v)
	}
}

func TestBindDriverSurvivesCloneAndIsNoChange(t *testing.T) {
	d, err := driver.NewDriver(builtin.FakeHardware, nil)
	if err != nil {
		t.Fatal(err)
	}
	task := newTask()
	if task.Driver() != nil {
		t.Fatal("a hand-built Task has a driver bound")
	}
	task.BindDriver(d)
	if task.Driver() != d {
		t.Fatal("Driver() does not return the bound driver")
	}
	if !task.Changes().Empty() {
		t.Fatalf("binding a driver recorded a change: %+v", task.Changes())
	}
	if task.Clone().Driver() != d {
		t.Fatal("Clone dropped the bound driver")
	}
}

// A Task's target_raid_config is a read-only view: Clone copies it
// deeply, and it is never a change.
func TestTaskTargetRAIDConfigIsCopiedNotChanged(t *testing.T) {
	task := newTask()
	task.TargetRAIDConfig = map[string]any{"logical_disks": []any{map[string]any{"size_gb": "MAX", "raid_level": "1", "controller": "software"}}}
	c := task.Clone()
	if !driver.IsSoftwareRAID(c.TargetRAIDConfig) {
		t.Fatalf("Clone's target_raid_config %v", c.TargetRAIDConfig)
	}
	c.TargetRAIDConfig["logical_disks"].([]any)[0].(map[string]any)["controller"] = "hw"
	if !driver.IsSoftwareRAID(task.TargetRAIDConfig) {
		t.Fatal("changing the clone's target_raid_config changed the original's")
	}
	if !task.Changes().Empty() {
		t.Fatalf("target_raid_config recorded as a change: %+v", task.Changes())
	}
}
