package conductor

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/jsonmap"
	"github.com/anvilmetal/anvil/steps"
)

// In-band RAID (an agent-based raid interface, Ironic's AgentRAID): what
// the conductor adds around the agent's raid steps.

// raidConductorArgs are create_configuration's arguments that the
// conductor applies (Ironic's filter_target_raid_config) and never sends:
// IPA's create_configuration(node, ports) takes no keyword argument.
var raidConductorArgs = []string{"create_root_volume", "create_nonroot_volumes"}

// raidCreateArgs are the arguments Ironic's AgentRAID gives the agent's
// create_configuration clean step (the agent reports it without any).
var raidCreateArgs = map[string]steps.ArgInfo{
	"create_root_volume":     {Description: "This specifies whether to create the root volume. Defaults to `True`."},
	"create_nonroot_volumes": {Description: "This specifies whether to create the non-root volumes. Defaults to `True`."},
}

// withRAIDCreateArgs returns the agent's steps with raidCreateArgs on
// raid.create_configuration when the raid interface is in-band.
func withRAIDCreateArgs(agent map[string][]steps.Step, inBand []string) map[string][]steps.Step {
	if !slices.Contains(inBand, string(driver.KindRAID)) || len(agent[string(driver.KindRAID)]) == 0 {
		return agent
	}
	out := maps.Clone(agent)
	raid := slices.Clone(agent[string(driver.KindRAID)])
	for i := range raid {
		if raid[i].Name == "create_configuration" && len(raid[i].ArgsInfo) == 0 {
			raid[i].ArgsInfo = raidCreateArgs
		}
	}
	out[string(driver.KindRAID)] = raid
	return out
}

// prepareAgentRAIDStep shapes in-band step s and the node the agent gets:
// for raid.create_configuration, the node's target_raid_config filtered
// by the step's arguments replaces the node's in node, and the arguments
// are dropped from the step. A node with no target (or nothing left after
// the filtering) fails the step before anything is sent.
func prepareAgentRAIDStep(n *baremetal.Node, kind steps.Kind, s steps.Step, node map[string]any) (steps.Step, error) {
	if s.Interface != string(driver.KindRAID) || s.Name != "create_configuration" || kind == steps.Deploy {
		return s, nil
	}
	createRoot, createNonRoot := true, true
	if v, ok := s.Args["create_root_volume"].(bool); ok {
		createRoot = v
	}
	if v, ok := s.Args["create_nonroot_volumes"].(bool); ok {
		createNonRoot = v
	}
	target, err := driver.FilterTargetRAIDConfig(n.UUID, driver.KindRAID, n.RAIDInterface, n.TargetRAIDConfig, createRoot, createNonRoot)
	if err != nil {
		return s, err
	}
	node["target_raid_config"] = target
	if len(s.Args) > 0 {
		args := jsonmap.Clone(s.Args)
		for _, k := range raidConductorArgs {
			delete(args, k)
		}
		if len(args) == 0 {
			args = nil
		}
		s.Args = args
	}
	return s, nil
}

// finishAgentRAIDStep records what a finished in-band raid step did, as
// Ironic's AgentRAID post-step hooks: create_configuration (clean) and
// apply_configuration (deploy, service) store the agent's result as the
// node's raid_config and update its properties (driver.RAIDInfo); an
// empty result fails the step ("Agent ramdisk didn't return a proper
// command result"). delete_configuration empties raid_config.
func (c *Conductor) finishAgentRAIDStep(n *baremetal.Node, kind steps.Kind, s steps.Step, cmd *agentclient.CommandResult) error {
	if s.Interface != string(driver.KindRAID) {
		return nil
	}
	switch {
	case s.Name == "delete_configuration":
		n.RAIDConfig = map[string]any{}
		return nil
	case s.Name == "create_configuration" && kind != steps.Deploy, s.Name == "apply_configuration" && kind != steps.Clean:
	default:
		return nil
	}
	sr, err := agentclient.DecodeStepResult(kind, cmd)
	if err != nil {
		return err
	}
	var result map[string]any
	if len(sr.Result) > 0 {
		_ = json.Unmarshal(sr.Result, &result)
	}
	if len(result) == 0 {
		verb := map[steps.Kind]string{steps.Clean: "cleaning", steps.Deploy: "deploying", steps.Service: "servicing"}[kind]
		//lint:ignore ST1005 Ironic's message, capitalised as Ironic writes it.
		return fmt.Errorf("Agent ramdisk didn't return a proper command result while %s %s. It returned '%s' after command execution",
			verb, n.UUID, string(cmd.Result))
	}
	cfg, props, err := driver.RAIDInfo(n.UUID, result, n.Properties, c.clock.Now())
	if err != nil {
		return err
	}
	n.RAIDConfig, n.Properties = cfg, props
	return nil
}
