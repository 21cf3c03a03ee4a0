package steps_test

import (
	"errors"
	"fmt"

	"github.com/anvilmetal/anvil/steps"
)

// ExampleDeclare declares the steps of a RAID interface that offers the
// same method as a clean and a deploy step.
func ExampleDeclare() {
	raidConfig := map[string]steps.ArgInfo{
		"raid_config": {Description: "The RAID configuration to apply.", Required: true},
	}
	clean := steps.MustDeclare(steps.Clean, "raid", "apply_configuration", 0, steps.WithArgsInfo(raidConfig))
	deploy := steps.MustDeclare(steps.Deploy, "raid", "apply_configuration", 0, steps.WithArgsInfo(raidConfig))
	fmt.Println(clean.Key(), "abortable:", clean.Abortable, "requires ramdisk:", clean.RequiresRamdisk)
	fmt.Println(deploy.Key(), "abortable:", deploy.Abortable)

	_, err := steps.Declare(steps.Deploy, "deploy", "deploy", -1)
	var bad *steps.MetadataError
	fmt.Println(errors.As(err, &bad), bad.Field)
	// Output:
	// raid.apply_configuration abortable: false requires ramdisk: true
	// raid.apply_configuration abortable: true
	// true priority
}

// ExamplePlanner_AutomatedClean plans automated cleaning from the agent's
// in-band steps with an operator override.
func ExamplePlanner_AutomatedClean() {
	planner, err := steps.NewPlanner(steps.Config{
		CleanPriorityOverrides: map[string]int{"deploy.erase_devices_metadata": 123},
	})
	if err != nil {
		panic(err)
	}
	agent := steps.AgentSteps(steps.Clean, map[string][]steps.Step{
		"GenericHardwareManager": {
			{Interface: "deploy", Name: "erase_devices", Priority: 10, Abortable: true},
			{Interface: "deploy", Name: "erase_devices_metadata", Priority: 99, Abortable: true},
			{Interface: "deploy", Name: "erase_pstore", Priority: 0, Abortable: true},
		},
	})
	plan, err := planner.AutomatedClean(steps.AutomatedCleanRequest{Source: steps.Source{Agent: agent, InBand: []string{"deploy"}}})
	if err != nil {
		panic(err)
	}
	for _, s := range plan.Steps {
		fmt.Println(s.Key(), s.Priority)
	}
	// Output:
	// deploy.erase_devices_metadata 123
	// deploy.erase_devices 10
}

// ExamplePlanner_ManualClean validates a manual clean request; every
// problem is reported in one error.
func ExamplePlanner_ManualClean() {
	planner, _ := steps.NewPlanner(steps.Config{})
	src := steps.Source{Driver: map[string][]steps.Step{
		"bios": {steps.MustDeclare(steps.Clean, "bios", "apply_configuration", 0,
			steps.WithRequiresRamdisk(false),
			steps.WithArgsInfo(map[string]steps.ArgInfo{"settings": {Description: "BIOS settings", Required: true}}))},
	}}
	user, err := steps.ParseUserSteps(steps.Clean, []byte(`[
		{"interface": "bios", "step": "apply_configuration", "args": {"setting": []}},
		{"interface": "bios", "step": "factory_reset"}]`))
	if err != nil {
		panic(err)
	}
	_, err = planner.ManualClean(steps.ManualRequest{Source: src, Steps: user})
	var invalid *steps.ValidationError
	if errors.As(err, &invalid) {
		for _, p := range invalid.Problems {
			fmt.Println(p.Code, p.Names)
		}
	}
	// Output:
	// unexpected_args [setting]
	// missing_args [settings]
	// unknown_step []
}

// ExamplePlanner_Deploy composes a deploy plan with a deploy template
// matched by the instance's traits.
func ExamplePlanner_Deploy() {
	planner, _ := steps.NewPlanner(steps.Config{})
	src := steps.Source{Driver: map[string][]steps.Step{
		"deploy": {
			steps.MustDeclare(steps.Deploy, "deploy", "deploy", 100),
			steps.MustDeclare(steps.Deploy, "deploy", "boot_instance", 20),
		},
		"bios": {steps.MustDeclare(steps.Deploy, "bios", "apply_configuration", 0,
			steps.WithArgsInfo(map[string]steps.ArgInfo{"settings": {Description: "BIOS settings", Required: true}}))},
	}}
	plan, err := planner.Deploy(steps.DeployRequest{
		Source:         src,
		InstanceTraits: []string{"CUSTOM_VMX"},
		Templates: []steps.Template{{Name: "CUSTOM_VMX", Steps: []steps.Step{{
			Interface: "bios", Name: "apply_configuration", Priority: 150,
			Args: map[string]any{"settings": []any{map[string]any{"name": "ProcVirtualization", "value": "Enabled"}}},
		}}}},
	})
	if err != nil {
		panic(err)
	}
	for _, s := range plan.Steps {
		fmt.Println(s.Key(), s.Priority)
	}
	// Output:
	// bios.apply_configuration 150
	// deploy.deploy 100
	// deploy.boot_instance 20
}

// ExamplePlanner_Decide walks a two-step clean through the decision
// function: the first step waits on the agent, the agent is busy once,
// then the step finishes and the run moves on and ends.
func ExamplePlanner_Decide() {
	planner, _ := steps.NewPlanner(steps.Config{})
	plan := steps.Plan{Kind: steps.Clean, Steps: []steps.Step{
		{Interface: "deploy", Name: "erase_devices_metadata", Priority: 99, Abortable: true},
		{Interface: "power", Name: "reboot"},
	}}
	a := planner.Start(plan.Progress())
	fmt.Println(a.Kind, a.Index)
	a = planner.Decide(a.Progress, steps.Outcome{Kind: steps.StepWaiting})
	fmt.Println(a.Kind)
	a = planner.Decide(a.Progress, steps.Outcome{Kind: steps.AgentBusy})
	fmt.Println(a.Kind, *a.Progress.SkipCurrentStep)
	a = planner.Continue(a.Progress) // next heartbeat: the same step again
	fmt.Println(a.Kind, a.Index)
	a = planner.Decide(a.Progress, steps.Outcome{Kind: steps.StepDone})
	fmt.Println(a.Kind, a.Index)
	a = planner.Decide(a.Progress, steps.Outcome{Kind: steps.StepDone})
	fmt.Println(a.Kind)

	info := map[string]any{}
	_ = a.Progress.Write(info)
	fmt.Println(info["clean_steps"], info["clean_step_index"])
	// Output:
	// run step 0
	// wait
	// wait false
	// run step 0
	// reboot 1
	// finish
	// [] <nil>
}

// ExampleReadProgress resumes a run from a node's driver_internal_info,
// as a conductor taking the node over would.
func ExampleReadProgress() {
	info := map[string]any{
		"deploy_steps": []any{
			map[string]any{"interface": "deploy", "step": "deploy", "priority": 100.0, "abortable": true},
			map[string]any{"interface": "deploy", "step": "boot_instance", "priority": 20.0, "abortable": true},
		},
		"deploy_step_index":  0.0,
		"deployment_reboot":  true,
		"deployment_polling": true,
	}
	current := &steps.Step{Interface: "deploy", Name: "deploy", Priority: 100, Abortable: true}
	prog, err := steps.ReadProgress(steps.Deploy, info, current)
	if err != nil {
		panic(err)
	}
	planner, _ := steps.NewPlanner(steps.Config{})
	a := planner.Decide(prog, steps.Outcome{Kind: steps.AgentRebooted})
	fmt.Println(a.Kind, a.Step.Key(), a.Progress.Reboot, a.Progress.Polling)
	// Output:
	// run step deploy.boot_instance false false
}
