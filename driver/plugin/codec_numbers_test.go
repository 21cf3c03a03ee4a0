package plugin

import (
	"encoding/json"
	"testing"

	"github.com/anvilmetal/anvil/driver"
)

// TestChangesKeepExactNumbers checks that the maps a plugin sends back
// (here driver_internal_info holding a stored step list) keep numbers
// float64 would change: before, 9007199254740993 and 1.0 came back as
// 9007199254740992 and 1 and the conductor stored them so.
func TestChangesKeepExactNumbers(t *testing.T) {
	in := driver.Changes{DriverInternalInfo: map[string]any{
		"clean_steps": []any{map[string]any{"args": map[string]any{"count": json.Number("9007199254740993"), "ratio": json.Number("1.0")}}},
		"flag":        float64(2),
	}}
	pbc, err := encodeChanges(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeChanges(pbc)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(out.DriverInternalInfo)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"clean_steps":[{"args":{"count":9007199254740993,"ratio":1.0}}],"flag":2}`; string(raw) != want {
		t.Errorf("driver_internal_info after the plugin boundary = %s, want %s", raw, want)
	}
	if _, ok := out.DriverInternalInfo["flag"].(float64); !ok {
		t.Errorf("flag = %#v, want float64", out.DriverInternalInfo["flag"])
	}
	m, err := unmarshalMap([]byte(`{"n":9007199254740993}`))
	if err != nil || m["n"] != json.Number("9007199254740993") {
		t.Errorf("unmarshalMap = %#v, %v", m, err)
	}
}

// TestTaskCarriesTargetRAIDConfig checks that the node's
// target_raid_config crosses the plugin boundary with the task (a
// plugin's deploy interface reads it as the built-in one does), and
// that a node without one arrives without one.
func TestTaskCarriesTargetRAIDConfig(t *testing.T) {
	target := map[string]any{"logical_disks": []any{map[string]any{"size_gb": "MAX", "raid_level": "1", "controller": "software"}}}
	pt, err := encodeTask(&driver.Task{NodeUUID: "n1", HardwareType: "fake-hardware", TargetRAIDConfig: target})
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeTask(pt)
	if err != nil {
		t.Fatal(err)
	}
	if !driver.IsSoftwareRAID(got.TargetRAIDConfig) {
		t.Fatalf("target_raid_config after the plugin boundary = %v, want %v", got.TargetRAIDConfig, target)
	}
	pt, err = encodeTask(&driver.Task{NodeUUID: "n1", HardwareType: "fake-hardware"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err = decodeTask(pt); err != nil || got.TargetRAIDConfig != nil {
		t.Fatalf("a node without a target: %v, %v", got.TargetRAIDConfig, err)
	}
}
