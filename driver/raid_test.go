package driver_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
)

func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber() // as the API decodes bodies
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestValidateRAIDSchema follows Ironic's raid_config_schema.json and its
// one-root-volume rule.
func TestValidateRAIDSchema(t *testing.T) {
	for _, tc := range []struct {
		cfg, path string // path "" means valid
	}{
		{`{"logical_disks": [{"size_gb": 100, "raid_level": "1"}]}`, ""},
		{`{"logical_disks": [{"size_gb": "MAX", "raid_level": "JBOD", "is_root_volume": true, "volume_name": "r", "controller": "software",
			"physical_disks": ["0:1:0", {"name": "/dev/sdb"}], "disk_type": "ssd", "interface_type": "sas", "number_of_physical_disks": 2, "share_physical_disks": false}]}`, ""},
		{`{"logical_disks": [{"size_gb": 8.0, "raid_level": "1+0"}]}`, ""},
		{`{}`, "logical_disks"},
		{`{"logical_disks": []}`, "logical_disks"},
		{`{"logical_disks": [{"size_gb": 1, "raid_level": "1"}], "extra": 1}`, "extra"},
		{`{"logical_disks": [{"raid_level": "1"}]}`, "logical_disks[0].size_gb"},
		{`{"logical_disks": [{"size_gb": 1}]}`, "logical_disks[0].raid_level"},
		{`{"logical_disks": [{"size_gb": 0, "raid_level": "1"}]}`, "logical_disks[0].size_gb"},
		{`{"logical_disks": [{"size_gb": 1.5, "raid_level": "1"}]}`, "logical_disks[0].size_gb"},
		{`{"logical_disks": [{"size_gb": "max", "raid_level": "1"}]}`, "logical_disks[0].size_gb"},
		{`{"logical_disks": [{"size_gb": 1, "raid_level": 1}]}`, "logical_disks[0].raid_level"},
		{`{"logical_disks": [{"size_gb": 1, "raid_level": "10"}]}`, "logical_disks[0].raid_level"},
		{`{"logical_disks": [{"size_gb": 1, "raid_level": "1", "is_root_volume": "yes"}]}`, "logical_disks[0].is_root_volume"},
		{`{"logical_disks": [{"size_gb": 1, "raid_level": "1", "disk_type": "nvme"}]}`, "logical_disks[0].disk_type"},
		{`{"logical_disks": [{"size_gb": 1, "raid_level": "1", "interface_type": "pcie"}]}`, "logical_disks[0].interface_type"},
		{`{"logical_disks": [{"size_gb": 1, "raid_level": "1", "number_of_physical_disks": 0}]}`, "logical_disks[0].number_of_physical_disks"},
		{`{"logical_disks": [{"size_gb": 1, "raid_level": "1", "physical_disks": ["a"]}]}`, "logical_disks[0].controller"},
		{`{"logical_disks": [{"size_gb": 1, "raid_level": "1", "controller": "c", "physical_disks": [1]}]}`, "logical_disks[0].physical_disks[0]"},
		{`{"logical_disks": [{"size_gb": 1, "raid_level": "1", "colour": "red"}]}`, "logical_disks[0].colour"},
		{`{"logical_disks": [{"size_gb": 1, "raid_level": "1", "is_root_volume": true}, {"size_gb": 1, "raid_level": "1", "is_root_volume": true}]}`, "root"},
	} {
		err := driver.ValidateRAIDSchema("n1", obj(t, tc.cfg))
		if tc.path == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.cfg, err)
			}
			continue
		}
		var re *driver.RAIDError
		if !errors.As(err, &re) || !errors.Is(err, driver.ErrInvalidParameter) {
			t.Errorf("%s: %v, want a *RAIDError", tc.cfg, err)
			continue
		}
		if tc.path == "root" {
			if !strings.Contains(re.Expected, "more than one root volume. 2 root volumes") {
				t.Errorf("%s: %v", tc.cfg, err)
			}
		} else if re.Path != tc.path || re.Node != "n1" {
			t.Errorf("%s: path %q, want %q (%v)", tc.cfg, re.Path, tc.path, err)
		}
	}
}

func TestFilterTargetRAIDConfig(t *testing.T) {
	target := obj(t, `{"logical_disks": [{"size_gb": 10, "raid_level": "1", "is_root_volume": true}, {"size_gb": "MAX", "raid_level": "0"}]}`)
	count := func(m map[string]any) int { l, _ := m["logical_disks"].([]any); return len(l) }
	for _, tc := range []struct {
		root, nonroot bool
		want          int
		hint          string
	}{
		{true, true, 2, ""}, {false, true, 1, ""}, {true, false, 1, ""},
		{false, false, 0, "empty target RAID configuration after skipping root volume and skipping non-root volumes"},
	} {
		got, err := driver.FilterTargetRAIDConfig("n1", driver.KindRAID, "agent", target, tc.root, tc.nonroot)
		if tc.hint != "" {
			var me *driver.MissingParameterError
			if !errors.As(err, &me) || me.Hints["target_raid_config"] != tc.hint {
				t.Errorf("%v %v: %v", tc.root, tc.nonroot, err)
			}
			continue
		}
		if err != nil || count(got) != tc.want {
			t.Errorf("%v %v: %v %v", tc.root, tc.nonroot, got, err)
		}
	}
	if count(target) != 2 {
		t.Fatal("the filter changed the node's target")
	}
	if _, err := driver.FilterTargetRAIDConfig("n1", driver.KindRAID, "agent", nil, true, true); !errors.Is(err, driver.ErrMissingParameter) {
		t.Fatalf("no target: %v", err)
	}
}

// TestRAIDInfo is Ironic's update_raid_info.
func TestRAIDInfo(t *testing.T) {
	now := time.Date(2026, 12, 7, 3, 4, 5, 600000000, time.UTC)
	cur := obj(t, `{"logical_disks": [{"size_gb": 100, "raid_level": "1", "is_root_volume": true, "root_device_hint": {"name": "/dev/md0"}},
		{"size_gb": "MAX", "raid_level": "0"}]}`)
	cfg, props, err := driver.RAIDInfo("n1", cur, map[string]any{"cpus": 2, "capabilities": "boot_mode:uefi,raid_level:5"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if cfg["last_updated"] != "2026-12-07 03:04:05.600000" {
		t.Errorf("last_updated %v", cfg["last_updated"])
	}
	want := map[string]any{"cpus": 2, "capabilities": "boot_mode:uefi,raid_level:1", "local_gb": json.Number("100"),
		"root_device": map[string]any{"name": "/dev/md0"}}
	if !reflect.DeepEqual(props, want) {
		t.Errorf("properties %v, want %v", props, want)
	}
	// A MAX root volume leaves local_gb; no root volume changes nothing.
	_, props, _ = driver.RAIDInfo("n1", obj(t, `{"logical_disks": [{"size_gb": "MAX", "raid_level": "1", "is_root_volume": true}]}`), map[string]any{"local_gb": 5}, now)
	if props["local_gb"] != 5 || props["capabilities"] != "raid_level:1" {
		t.Errorf("MAX root: %v", props)
	}
	_, props, _ = driver.RAIDInfo("n1", obj(t, `{"logical_disks": [{"size_gb": 3, "raid_level": "1"}]}`), map[string]any{"local_gb": 5}, now)
	if !reflect.DeepEqual(props, map[string]any{"local_gb": 5}) {
		t.Errorf("no root: %v", props)
	}
}

func TestUpdateCapabilities(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "raid_level:1"},
		{"boot_mode:uefi", "boot_mode:uefi,raid_level:1"},
		{"raid_level:5,boot_mode:bios", "raid_level:1,boot_mode:bios"},
	} {
		if got := driver.UpdateCapabilities(tc.in, map[string]string{"raid_level": "1"}); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}

// IsSoftwareRAID is true when any logical disk names controller
// "software", as Ironic's is_software_raid.
func TestIsSoftwareRAID(t *testing.T) {
	for _, tc := range []struct {
		cfg  string
		want bool
	}{
		{`{}`, false},
		{`{"logical_disks": []}`, false},
		{`{"logical_disks": [{"size_gb": "MAX", "raid_level": "1"}]}`, false},
		{`{"logical_disks": [{"size_gb": "MAX", "raid_level": "1", "controller": "RAID.Integrated.1-1"}]}`, false},
		{`{"logical_disks": [{"size_gb": "MAX", "raid_level": "1", "controller": "software"}]}`, true},
		{`{"logical_disks": [{"size_gb": 10, "raid_level": "1", "controller": "c0"}, {"size_gb": "MAX", "raid_level": "0", "controller": "software"}]}`, true},
		{`{"logical_disks": "software"}`, false},
	} {
		if got := driver.IsSoftwareRAID(obj(t, tc.cfg)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.cfg, got, tc.want)
		}
	}
	if driver.IsSoftwareRAID(nil) {
		t.Error("a nil target is software RAID")
	}
}
