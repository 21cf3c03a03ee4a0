package agenttest_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/steps"
)

// TestSoftwareRAIDSteps: the raid steps as IPA 2023.1's generic hardware
// manager runs them: keyword arguments checked, IPA's software RAID rules
// with its messages, an empty result for a hardware RAID target, the
// configuration as the result, and a second create refused until
// delete_configuration removed the md devices.
func TestSoftwareRAIDSteps(t *testing.T) {
	a := agenttest.NewAgent(agenttest.AgentConfig{})
	defer a.Close()
	srv := httptest.NewServer(a)
	defer srv.Close()
	c, err := agentclient.NewClient(agentclient.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	ag := agentclient.Agent{NodeUUID: "n1", URL: srv.URL}
	ver := map[string]string{"generic_hardware_manager": "1.2"}
	run := func(kind steps.Kind, step steps.Step, target string) agentclient.CommandResult {
		t.Helper()
		node := map[string]any{"uuid": "n1"}
		if target != "" {
			var m map[string]any
			if err := json.Unmarshal([]byte(target), &m); err != nil {
				t.Fatal(err)
			}
			node["target_raid_config"] = m
		}
		var res *agentclient.CommandResult
		if kind == steps.Clean {
			res, err = c.ExecuteCleanStep(ctx, ag, step, node, nil, ver)
		} else {
			res, err = c.ExecuteDeployStep(ctx, ag, step, node, nil, ver)
		}
		if err != nil {
			t.Fatal(err)
		}
		for {
			cmds, err := c.ListCommands(ctx, ag)
			if err != nil {
				t.Fatal(err)
			}
			last := cmds[len(cmds)-1]
			if last.ID == res.ID && last.Status != agentclient.StatusRunning {
				return last
			}
		}
	}
	create := steps.Step{Interface: "raid", Name: "create_configuration"}
	const good = `{"logical_disks": [{"size_gb": 10, "raid_level": "1", "controller": "software"}, {"size_gb": "MAX", "raid_level": "0", "controller": "software"}]}`
	for _, tc := range []struct {
		name   string
		kind   steps.Kind
		step   steps.Step
		target string
		errTyp string
		detail string
		result string
	}{
		{name: "args are keyword arguments", kind: steps.Clean, step: steps.Step{Interface: "raid", Name: "create_configuration", Args: map[string]any{"create_root_volume": true}},
			errTyp: "CleaningError", detail: "Unexpected exception performing clean step create_configuration. TypeError: create_configuration() got an unexpected keyword argument 'create_root_volume'"},
		{name: "no target", kind: steps.Clean, step: create, result: `{}`},
		{name: "hardware RAID", kind: steps.Clean, step: create, target: `{"logical_disks": [{"size_gb": 10, "raid_level": "5"}]}`, result: `{}`},
		{name: "first not RAID-1", kind: steps.Clean, step: create, target: `{"logical_disks": [{"size_gb": 10, "raid_level": "0", "controller": "software"}]}`,
			errTyp: "SoftwareRAIDError", detail: "Could not validate Software RAID config for n1: Software RAID Configuration requires RAID-1 for the first logical disk"},
		{name: "RAID 5 on two disks, mixed controllers", kind: steps.Clean, step: create,
			target: `{"logical_disks": [{"size_gb": 10, "raid_level": "1", "controller": "software"}, {"size_gb": "MAX", "raid_level": "5"}]}`,
			errTyp: "SoftwareRAIDError", detail: "requires all logical disks to have 'controller'='software'; Software RAID configuration is not possible for RAID level 5 with only 2 block devices found."},
		{name: "built", kind: steps.Clean, step: create, target: good, result: good},
		{name: "partitions left", kind: steps.Clean, step: create, target: good, errTyp: "SoftwareRAIDError", detail: "Partitions detected on devices /dev/sda, /dev/sdb during RAID config"},
		{name: "delete", kind: steps.Clean, step: steps.Step{Interface: "raid", Name: "delete_configuration"}, result: `null`},
		{name: "apply needs raid_config", kind: steps.Deploy, step: steps.Step{Interface: "raid", Name: "apply_configuration"},
			errTyp: "DeploymentError", detail: "apply_configuration() missing 1 required positional argument: 'raid_config'"},
		{name: "apply validates first", kind: steps.Deploy, step: steps.Step{Interface: "raid", Name: "apply_configuration", Args: map[string]any{"raid_config": map[string]any{"logical_disks": []any{map[string]any{"size_gb": 1, "raid_level": "1"}}}}},
			errTyp: "SoftwareRAIDError", detail: "requires all logical disks to have 'controller'='software'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := run(tc.kind, tc.step, tc.target)
			if tc.errTyp != "" {
				if got.Status != agentclient.StatusFailed || got.Error == nil || got.Error.Type != tc.errTyp || !strings.Contains(got.Error.Details, tc.detail) {
					t.Fatalf("%s %+v, want %s %q", got.Status, got.Error, tc.errTyp, tc.detail)
				}
				return
			}
			sr, err := agentclient.DecodeStepResult(tc.kind, &got)
			if err != nil || got.Status != agentclient.StatusSucceeded {
				t.Fatalf("%s %+v %v", got.Status, got.Error, err)
			}
			var want, have any
			_ = json.Unmarshal([]byte(tc.result), &want)
			_ = json.Unmarshal(sr.Result, &have)
			wj, _ := json.Marshal(want)
			hj, _ := json.Marshal(have)
			if string(wj) != string(hj) {
				t.Fatalf("result %s, want %s", hj, wj)
			}
		})
	}
	if a.SoftwareRAID() != nil {
		t.Fatal("md devices left after delete_configuration")
	}
}
