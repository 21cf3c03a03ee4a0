package conductor_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// softwareRAID is a software RAID target as Ironic's documentation shows
// it: a RAID-1 root volume and a RAID-0 data volume, both on md.
const softwareRAID = `{"logical_disks": [
	{"size_gb": 100, "raid_level": "1", "controller": "software", "is_root_volume": true, "volume_name": "root"},
	{"size_gb": "MAX", "raid_level": "0", "controller": "software", "volume_name": "data"}]}`

func jsonObject(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAgentRAIDManualClean: a manual clean of raid.delete_configuration
// and raid.create_configuration through the agent RAID interface and the
// fake IPA (as strict as IPA 2023.1's software RAID): the agent gets the
// node's target_raid_config filtered by create_nonroot_volumes (which
// stays with the conductor), and the node records the agent's result as
// Ironic's update_raid_info does.
func TestAgentRAIDManualClean(t *testing.T) {
	t.Parallel()
	h, agents := newRAIDHarness(t)
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName("raid"), Driver: "fake-hardware",
		PowerInterface: simfleet.PowerName, DeployInterface: agentdeploy.Name, RAIDInterface: agentdeploy.RAIDName,
		Properties: map[string]any{"capabilities": "boot_mode:uefi"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.Manage(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)

	// Ironic's schema and IPA's software RAID rules at set time.
	for _, bad := range []string{
		`{"logical_disks": [{"size_gb": 0, "raid_level": "1"}]}`,
		`{"logical_disks": [{"size_gb": "MAX", "raid_level": "7"}]}`,
		`{"logical_disks": [{"size_gb": 10, "raid_level": "1", "is_root_volume": true}, {"size_gb": 10, "raid_level": "1", "is_root_volume": true}]}`,
		`{"logical_disks": [{"size_gb": 10, "raid_level": "0", "controller": "software"}]}`,
		`{"logical_disks": [{"size_gb": 10, "raid_level": "1", "controller": "software", "physical_disks": [{"name": "/dev/sda"}]}]}`,
	} {
		err := h.c.SetTargetRAIDConfig(h.ctx, n.UUID, jsonObject(t, bad))
		if !errors.Is(err, driver.ErrInvalidParameter) {
			t.Errorf("target %s: %v, want an invalid parameter", bad, err)
		}
	}
	if err := h.c.SetTargetRAIDConfig(h.ctx, n.UUID, jsonObject(t, softwareRAID)); err != nil {
		t.Fatal(err)
	}
	user, err := steps.ParseUserSteps(steps.Clean, []byte(`[{"interface": "raid", "step": "delete_configuration"},
		{"interface": "raid", "step": "create_configuration", "args": {"create_nonroot_volumes": false}}]`))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.Clean(h.ctx, n.UUID, user, conductor.CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	got := h.waitFor(n.UUID, statemachine.Manageable)
	if got.LastError != "" {
		t.Fatalf("clean: %s", got.LastError)
	}
	lds, _ := got.RAIDConfig["logical_disks"].([]any)
	if len(lds) != 1 || got.RAIDConfig["last_updated"] == nil {
		t.Fatalf("raid_config %v, want the root volume alone and last_updated", got.RAIDConfig)
	}
	if ld, _ := lds[0].(map[string]any); ld["volume_name"] != "root" || ld["controller"] != "software" {
		t.Fatalf("raid_config logical disk %v", ld)
	}
	if got.Properties["local_gb"] != float64(100) || got.Properties["capabilities"] != "boot_mode:uefi,raid_level:1" {
		t.Fatalf("properties %v, want local_gb 100 and raid_level:1 added", got.Properties)
	}
	var sent *agenttest.Execution
	for _, a := range *agents {
		for _, e := range a.Executed() {
			if e.Step != nil && e.Step.Name == "create_configuration" {
				sent = &e
			}
		}
		if md := a.SoftwareRAID(); md != nil {
			if l, _ := md["logical_disks"].([]any); len(l) != 1 {
				t.Fatalf("the agent built %v", md)
			}
		}
	}
	if sent == nil {
		t.Fatal("the agent never ran raid.create_configuration")
	}
	if len(sent.Step.Args) != 0 {
		t.Errorf("create_configuration reached the agent with args %v (IPA takes none)", sent.Step.Args)
	}
	node, _ := sent.Params["node"].(map[string]any)
	target, _ := node["target_raid_config"].(map[string]any)
	if tl, _ := target["logical_disks"].([]any); len(tl) != 1 {
		t.Errorf("the agent got target_raid_config %v, want the root volume alone", target)
	}

	// delete_configuration empties raid_config.
	del, _ := steps.ParseUserSteps(steps.Clean, []byte(`[{"interface": "raid", "step": "delete_configuration"}]`))
	if err := h.c.Clean(h.ctx, n.UUID, del, conductor.CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	got = h.waitFor(n.UUID, statemachine.Manageable)
	if got.LastError != "" || len(got.RAIDConfig) != 0 {
		t.Fatalf("after delete_configuration: raid_config %v, last_error %q", got.RAIDConfig, got.LastError)
	}

	// A hardware RAID target: the generic agent builds nothing and
	// returns an empty result, which fails the step as in Ironic.
	if err := h.c.SetTargetRAIDConfig(h.ctx, n.UUID, jsonObject(t, `{"logical_disks": [{"size_gb": "MAX", "raid_level": "5"}]}`)); err != nil {
		t.Fatal(err)
	}
	create, _ := steps.ParseUserSteps(steps.Clean, []byte(`[{"interface": "raid", "step": "create_configuration"}]`))
	if err := h.c.Clean(h.ctx, n.UUID, create, conductor.CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	got = h.waitFor(n.UUID, statemachine.CleanFailed)
	if !strings.Contains(got.LastError, "Agent ramdisk didn't return a proper command result while cleaning") {
		t.Fatalf("last_error %q", got.LastError)
	}
}

// TestAgentRAIDNeedsTarget: create_configuration with no target fails the
// step before anything reaches the agent (Ironic's
// filter_target_raid_config).
func TestAgentRAIDNeedsTarget(t *testing.T) {
	t.Parallel()
	h, agents := newRAIDHarness(t)
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName("raid-none"), Driver: "fake-hardware",
		PowerInterface: simfleet.PowerName, DeployInterface: agentdeploy.Name, RAIDInterface: agentdeploy.RAIDName})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.Manage(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	create, _ := steps.ParseUserSteps(steps.Clean, []byte(`[{"interface": "raid", "step": "create_configuration"}]`))
	if err := h.c.Clean(h.ctx, n.UUID, create, conductor.CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	got := h.waitFor(n.UUID, statemachine.CleanFailed)
	if !strings.Contains(got.LastError, "target_raid_config") {
		t.Fatalf("last_error %q", got.LastError)
	}
	for _, a := range *agents {
		for _, e := range a.Executed() {
			if e.Step != nil && e.Step.Name == "create_configuration" {
				t.Fatal("create_configuration reached the agent without a target")
			}
		}
	}
}

// TestAgentRAIDDeployInstallsBootloaderOnHolders: a node whose
// target_raid_config is software RAID gets image.install_bootloader after
// a whole-disk deploy in BIOS mode (the harness's machines boot BIOS),
// which a plain disk does not: the conductor hands the deploy interface
// the node's target (Ironic's configure_local_boot reads
// node.target_raid_config), and the root UUID sent is the disk
// identifier the agent recorded, as Ironic without Glance sends it.
func TestAgentRAIDDeployInstallsBootloaderOnHolders(t *testing.T) {
	t.Parallel()
	h, agents := newRAIDHarness(t)
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName("raid-deploy"), Driver: "fake-hardware",
		PowerInterface: simfleet.PowerName, DeployInterface: agentdeploy.Name, RAIDInterface: agentdeploy.RAIDName,
		InstanceInfo: map[string]any{"image_source": "http://images.example/disk.raw", "image_checksum": "0123456789abcdef0123456789abcdef"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.Manage(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Manageable)
	if err := h.c.SetTargetRAIDConfig(h.ctx, n.UUID, jsonObject(t, `{"logical_disks": [{"size_gb": "MAX", "raid_level": "1", "controller": "software"}]}`)); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Provide(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	h.waitFor(n.UUID, statemachine.Available)
	if err := h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}); err != nil {
		t.Fatal(err)
	}
	got := h.waitFor(n.UUID, statemachine.Active)
	var params map[string]any
	for _, a := range *agents {
		for _, e := range a.Executed() {
			if e.Command == agentclient.CmdInstallBootloader {
				params = e.Params
			}
		}
	}
	if params == nil {
		t.Fatal("no install_bootloader after the deploy onto a software RAID")
	}
	root, _ := params["root_uuid"].(string)
	if params["target_boot_mode"] != "bios" || !strings.HasPrefix(root, "0x") || params["efi_system_part_uuid"] != nil {
		t.Fatalf("install_bootloader %v, want BIOS with the agent's disk identifier as root_uuid", params)
	}
	if got.DriverInternalInfo["root_uuid_or_disk_id"] != root {
		t.Fatalf("driver_internal_info root_uuid_or_disk_id %v, want %s", got.DriverInternalInfo["root_uuid_or_disk_id"], root)
	}
}

// newRAIDHarness is an agent harness whose fake agents, one per boot, are
// kept in the returned slice, so a test can read what each was asked.
func newRAIDHarness(t *testing.T) (*agentHarness, *[]*agenttest.Agent) {
	var agents []*agenttest.Agent
	h := newAgentHarness(t, conductor.Options{}, func(string) *agenttest.Agent {
		a := agenttest.NewAgent(agenttest.AgentConfig{})
		agents = append(agents, a)
		return a
	})
	return h, &agents
}
