package agentdeploy

import (
	"context"
	"fmt"
	"strings"

	"github.com/anvilmetal/anvil/driver"
)

// RAIDName is the agent RAID interface's name, as Ironic names it.
const RAIDName = "agent"

// RAID is the "agent" raid interface: in-band RAID through the ramdisk
// agent's raid clean steps (create_configuration, delete_configuration)
// and deploy step (apply_configuration). With IPA's generic hardware
// manager that is Linux software RAID (md): every logical disk names
// controller "software". The steps are the agent's (the conductor reads
// them from the agent as for every agent-based interface); the conductor
// sends create_configuration the node's target_raid_config filtered by
// the step's create_root_volume and create_nonroot_volumes arguments, and
// records the agent's result as the node's raid_config (Ironic's
// update_raid_info: local_gb, root_device and the raid_level capability
// from the root volume). delete_configuration empties raid_config.
//
// ValidateRAIDConfig applies Ironic's RAID schema (driver.
// ValidateRAIDSchema) and, for a software RAID configuration, IPA's own
// rules, which IPA would otherwise apply only when the step runs: one or
// two logical disks, every one with controller "software", distinct
// volume names, physical_disks at least two root device hints, RAID-1
// first, at most one of size MAX, the second of level 0, 1, 1+0, 5 or 6.
// A configuration for a hardware controller passes the schema alone, as
// in Ironic (the generic agent then returns no result and the step fails,
// as Ironic's does).
type RAID struct{}

// NewRAID returns the agent raid interface.
func NewRAID() *RAID { return &RAID{} }

// AgentBased reports that this interface's steps run in-band.
func (*RAID) AgentBased() bool { return true }

// Properties returns none: the interface needs no driver_info.
func (*RAID) Properties() []driver.Property { return []driver.Property{} }

// Validate has nothing to check before the agent runs.
func (*RAID) Validate(context.Context, *driver.Task) error { return nil }

// softwareRAIDLevels are the levels IPA accepts for a second software
// RAID device.
var softwareRAIDLevels = []string{"0", "1", "1+0", "5", "6"}

// ValidateRAIDConfig checks a target_raid_config (see RAID).
func (*RAID) ValidateRAIDConfig(_ context.Context, t *driver.Task, cfg map[string]any) error {
	if err := driver.ValidateRAIDSchema(t.NodeUUID, cfg); err != nil {
		return err
	}
	lds, _ := cfg["logical_disks"].([]any)
	software := false
	for _, e := range lds {
		if ld, _ := e.(map[string]any); ld["controller"] == "software" {
			software = true
		}
	}
	if !software {
		return nil
	}
	var problems []string
	if len(lds) > 2 {
		problems = append(problems, "Software RAID configuration requires one or two logical disks")
	}
	names := map[string]bool{}
	for _, e := range lds {
		ld, _ := e.(map[string]any)
		if ld["controller"] != "software" {
			problems = append(problems, "Software RAID configuration requires all logical disks to have 'controller'='software'")
		}
		if n, ok := ld["volume_name"].(string); ok {
			if names[n] {
				problems = append(problems, fmt.Sprintf("Duplicate software RAID device name %s detected", n))
			}
			names[n] = true
		}
		if pds, ok := ld["physical_disks"].([]any); ok {
			if len(pds) < 2 {
				problems = append(problems, "The physical_disks parameter for software RAID must be a list with at least 2 items, each specifying a disk in the device hints format")
			}
			for _, pd := range pds {
				if _, ok := pd.(map[string]any); !ok {
					problems = append(problems, "The physical_disks parameter for software RAID must be a list of device hints (dictionaries)")
					break
				}
			}
		}
	}
	first, _ := lds[0].(map[string]any)
	if first["raid_level"] != "1" {
		problems = append(problems, "Software RAID Configuration requires RAID-1 for the first logical disk")
	}
	if len(lds) == 2 {
		second, _ := lds[1].(map[string]any)
		if first["size_gb"] == "MAX" && second["size_gb"] == "MAX" {
			problems = append(problems, "Software RAID can have only one RAID device with size 'MAX'")
		}
		level, _ := second["raid_level"].(string)
		ok := false
		for _, l := range softwareRAIDLevels {
			ok = ok || l == level
		}
		if !ok {
			problems = append(problems, "Software RAID configuration does not support RAID level "+level)
		}
	}
	if len(problems) > 0 {
		return &driver.RAIDError{Node: t.NodeUUID, Path: "logical_disks",
			Expected: "a software RAID configuration the agent can build (" + strings.Join(dedupe(problems), "; ") + ")"}
	}
	return nil
}

func dedupe(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

var (
	_ driver.RAIDInterface = (*RAID)(nil)
)
