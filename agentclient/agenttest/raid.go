package agenttest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/steps"
)

// The raid steps of IPA 2023.1's GenericHardwareManager: Linux software
// RAID (md) built from the node's target_raid_config. The fake keeps the
// md configuration it built (SoftwareRAID) instead of disks.

// stepError is the error IPA's step extensions raise for an unexpected
// exception in a step (a TypeError from the step's keyword arguments).
func stepError(kind steps.Kind, name, msg string) *agentclient.AgentError {
	typ, message := "CleaningError", "Clean step failed"
	switch kind {
	case steps.Deploy:
		typ, message = "DeploymentError", "Deploy step failed"
	case steps.Service:
		typ, message = "ServicingError", "Service step failed"
	}
	return &agentclient.AgentError{Type: typ, Code: 500, Message: message,
		Details: fmt.Sprintf("Unexpected exception performing %s step %s. %s", kind, name, msg)}
}

func softwareRAIDError(details string) *agentclient.AgentError {
	return &agentclient.AgentError{Type: "SoftwareRAIDError", Code: 500, Message: "Software RAID caused unknown error", Details: details}
}

// SoftwareRAID returns the software RAID configuration the raid steps
// built (the target_raid_config create_configuration was given), or nil
// when there is none.
func (a *Agent) SoftwareRAID() map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.mdRAID)
}

// raidStep runs raid.create_configuration, raid.delete_configuration or
// raid.apply_configuration as IPA does: the step's args are Python
// keyword arguments (create_configuration(node, ports) and
// delete_configuration(node, ports) take none; apply_configuration(node,
// ports, raid_config, delete_existing=True)), then the configuration is
// validated by IPA's software RAID rules.
func (a *Agent) raidStep(kind steps.Kind, nodeParam any, step steps.Step) (any, *agentclient.AgentError) {
	allowed := map[string][]string{"apply_configuration": {"raid_config", "delete_existing"}}[step.Name]
	for _, k := range slices.Sorted(maps.Keys(step.Args)) {
		if !slices.Contains(allowed, k) {
			return nil, stepError(kind, step.Name, fmt.Sprintf("TypeError: %s() got an unexpected keyword argument '%s'", step.Name, k))
		}
	}
	node, _ := nodeParam.(map[string]any)
	switch step.Name {
	case "delete_configuration":
		a.mu.Lock()
		a.mdRAID = nil
		a.mu.Unlock()
		return nil, nil
	case "create_configuration":
		cfg, _ := node["target_raid_config"].(map[string]any)
		if len(cfg) == 0 {
			return map[string]any{}, nil
		}
		return a.createRAID(kind, step.Name, node, cfg)
	case "apply_configuration":
		raw, ok := step.Args["raid_config"]
		if !ok {
			return nil, stepError(kind, step.Name, "TypeError: apply_configuration() missing 1 required positional argument: 'raid_config'")
		}
		cfg, _ := raw.(map[string]any)
		if err := a.validateRAID(cfg, node); err != nil {
			return nil, err
		}
		if del, ok := step.Args["delete_existing"].(bool); !ok || del {
			a.mu.Lock()
			a.mdRAID = nil
			a.mu.Unlock()
		}
		return a.createRAID(kind, step.Name, node, cfg)
	}
	return nil, &agentclient.AgentError{Type: "HardwareManagerMethodNotFound", Code: 500,
		Message: "No HardwareManager found to handle method", Details: "Could not find method: " + step.Name}
}

// createRAID is IPA's _do_create_configuration: nothing to do (an empty
// result) unless a logical disk names controller "software"; then the
// configuration is validated and refused while the disks still hold the
// partitions of an earlier software RAID.
func (a *Agent) createRAID(kind steps.Kind, name string, node, cfg map[string]any) (any, *agentclient.AgentError) {
	raw, ok := cfg["logical_disks"]
	lds, isList := raw.([]any)
	if !ok || raw == nil || !isList {
		return nil, stepError(kind, name, fmt.Sprintf("TypeError: '%s' object is not iterable", pythonType(raw)))
	}
	software := false
	for _, e := range lds {
		if ld, _ := e.(map[string]any); ld["controller"] == "software" {
			software = true
		}
	}
	if !software {
		return map[string]any{}, nil
	}
	if err := a.validateRAID(cfg, node); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mdRAID != nil {
		devs := make([]string, a.disks)
		for i := range devs {
			devs[i] = "/dev/sd" + string(rune('a'+i))
		}
		return nil, softwareRAIDError("Partitions detected on devices " + strings.Join(devs, ", ") + " during RAID config")
	}
	a.mdRAID = maps.Clone(cfg)
	return cfg, nil
}

// validateRAID is IPA's validate_configuration, with its messages.
func (a *Agent) validateRAID(cfg map[string]any, node map[string]any) *agentclient.AgentError {
	if len(cfg) == 0 {
		return nil
	}
	lds, _ := cfg["logical_disks"].([]any)
	if len(lds) == 0 {
		return softwareRAIDError("RAID config contains no logical disks")
	}
	var errs []string
	if len(lds) != 1 && len(lds) != 2 {
		errs = append(errs, "Software RAID configuration requires one or two logical disks")
	}
	var names []string
	for _, e := range lds {
		ld, _ := e.(map[string]any)
		if ld["controller"] != "software" {
			errs = append(errs, "Software RAID configuration requires all logical disks to have 'controller'='software'")
		}
		if v, ok := ld["volume_name"]; ok && v != nil {
			n := fmt.Sprint(v)
			if slices.Contains(names, n) {
				errs = append(errs, fmt.Sprintf("Duplicate software RAID device name %s detected", n))
			} else {
				names = append(names, n)
			}
		}
		if v, ok := ld["physical_disks"]; ok && v != nil {
			pds, isList := v.([]any)
			if !isList || len(pds) < 2 {
				errs = append(errs, "The physical_disks parameter for software RAID must be a list with at least 2 items, each specifying a disk in the device hints format")
			}
			for _, pd := range pds {
				if _, ok := pd.(map[string]any); !ok {
					errs = append(errs, "The physical_disks parameter for software RAID must be a list of device hints (dictionaries)")
					break
				}
			}
		}
	}
	first, _ := lds[0].(map[string]any)
	if first["raid_level"] != "1" {
		errs = append(errs, "Software RAID Configuration requires RAID-1 for the first logical disk")
	}
	if len(lds) == 2 {
		second, _ := lds[1].(map[string]any)
		if first["size_gb"] == "MAX" && second["size_gb"] == "MAX" {
			errs = append(errs, "Software RAID can have only one RAID device with size 'MAX'")
		}
		level := fmt.Sprint(second["raid_level"])
		if !slices.Contains([]string{"0", "1", "1+0", "5", "6"}, level) {
			errs = append(errs, "Software RAID configuration does not support RAID level "+level)
		}
		a.mu.Lock()
		disks := a.disks
		a.mu.Unlock()
		if level == "5" && disks < 3 {
			errs = append(errs, fmt.Sprintf("Software RAID configuration is not possible for RAID level 5 with only %d block devices found.", disks))
		}
		if level == "6" && disks < 4 {
			errs = append(errs, fmt.Sprintf("Software RAID configuration is not possible for RAID level 6 with only %d block devices found.", disks))
		}
	}
	if len(errs) > 0 {
		return softwareRAIDError(fmt.Sprintf("Could not validate Software RAID config for %v: %s", node["uuid"], strings.Join(errs, "; ")))
	}
	return nil
}
