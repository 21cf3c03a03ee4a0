package agenttest

import "github.com/anvilmetal/anvil/steps"

// HardwareManager is one IPA hardware manager as the fake agent presents
// it: the steps it offers per kind and the version Ironic records and sends
// back with each step.
type HardwareManager struct {
	// Name is the manager's class name, the key of get_<kind>_steps
	// results, e.g. "GenericHardwareManager".
	Name string
	// VersionKey is the manager's key in hardware_manager_version, e.g.
	// "generic_hardware_manager".
	VersionKey string
	// Version is the manager's version string.
	Version string

	CleanSteps   []steps.Step
	DeploySteps  []steps.Step
	ServiceSteps []steps.Step
}

// stepsOf returns the manager's steps of one kind.
func (m HardwareManager) stepsOf(kind steps.Kind) []steps.Step {
	switch kind {
	case steps.Clean:
		return m.CleanSteps
	case steps.Deploy:
		return m.DeploySteps
	case steps.Service:
		return m.ServiceSteps
	}
	return nil
}

func agentStep(iface, name string, priority int, reboot bool) steps.Step {
	return steps.Step{Interface: iface, Name: name, Priority: priority, Abortable: true, RebootRequested: reboot}
}

// GenericHardwareManager returns the steps of IPA's generic hardware
// manager with their default priorities: automated cleaning wipes disk
// metadata (99) then erases devices (10); everything else has priority 0
// and runs only when requested.
func GenericHardwareManager() HardwareManager {
	writeImage := agentStep("deploy", "write_image", 0, false)
	writeImage.Abortable = false
	writeImage.ArgsInfo = map[string]steps.ArgInfo{
		"image_info":  {Description: "Image information for the image to write.", Required: true},
		"configdrive": {Description: "A config drive to write after the image."},
	}
	applyRAID := agentStep("raid", "apply_configuration", 0, false)
	applyRAID.ArgsInfo = map[string]steps.ArgInfo{
		"raid_config":     {Description: "The RAID configuration to apply.", Required: true},
		"delete_existing": {Description: "Delete existing RAID volumes first."},
	}
	return HardwareManager{
		Name:       "GenericHardwareManager",
		VersionKey: "generic_hardware_manager",
		Version:    "1.2",
		CleanSteps: []steps.Step{
			agentStep("deploy", "erase_devices_metadata", 99, false),
			agentStep("deploy", "erase_devices", 10, false),
			agentStep("deploy", "erase_devices_express", 0, false),
			agentStep("deploy", "erase_pstore", 0, false),
			agentStep("deploy", "clean_uefi_nvram", 0, false),
			agentStep("raid", "delete_configuration", 0, false),
			agentStep("raid", "create_configuration", 0, false),
			agentStep("deploy", "burnin_cpu", 0, false),
			agentStep("deploy", "burnin_disk", 0, false),
			agentStep("deploy", "burnin_memory", 0, false),
			agentStep("deploy", "burnin_network", 0, false),
		},
		DeploySteps: []steps.Step{
			writeImage,
			agentStep("deploy", "erase_devices_metadata", 0, false),
			applyRAID,
			agentStep("deploy", "clean_uefi_nvram", 0, false),
			agentStep("deploy", "inject_files", 0, false),
		},
		ServiceSteps: []steps.Step{
			applyRAID,
			agentStep("deploy", "inject_files", 0, false),
			agentStep("deploy", "burnin_cpu", 0, false),
		},
	}
}
