// Package steps is the pure logic of Ironic's step machinery: which clean,
// deploy, service and verify steps a node runs, in which order, with which
// arguments, and what the conductor does after each step. It does no I/O
// and keeps no state: a conductor persists what it decides (the Progress
// record, stored under Ironic's own driver_internal_info keys) and executes
// the actions it returns, so a run survives a restart and can be resumed
// by another conductor.
//
// # Declaring steps
//
// An interface implementation describes each step it offers with Declare,
// which applies the defaults of Ironic's decorators per kind (clean and
// service steps are not abortable and require the ramdisk; deploy steps are
// abortable and need a priority of at least 0) and refuses invalid
// metadata with a *MetadataError. Check validates metadata received from
// elsewhere, ParseArgsInfo converts argsinfo decoded from JSON, and
// AgentSteps turns an agent's get_<kind>_steps answer into the
// per-interface cache Ironic keeps.
//
// # Planning
//
// Gather collects a node's steps of one kind from its driver's interfaces
// and the agent (a Source), taking from each interface what the decision
// table Contributes gives it (an agent-based interface contributes the
// agent's steps only, except the deploy steps of the deploy interface:
// its declared steps, then the agent's it does not shadow; agent RAID
// steps are read only with an agent-based RAID interface), applies priority overrides keyed
// "interface.step" (an override of 0 disables the step, as in Ironic),
// drops disabled (priority 0) steps for automated runs
// and sorts them by priority and then by the interface tie-break of the
// kind (cleaning and deploying: vendor > power > management > firmware >
// deploy > bios > raid; verifying has its own table). A Planner, built from
// the operator Config, turns that into plans:
//
//   - AutomatedClean: every enabled step in order, or a runbook's list, or
//     a skip when automated cleaning is off for the node or globally;
//   - ManualClean and Service: exactly the user's steps in the user's order
//     after validation;
//   - Deploy: user steps, then steps of deploy templates matched by the
//     instance traits, then the driver's enabled steps that neither
//     overrides; priority 0 disables a driver step;
//   - Verify: enabled verify steps in order.
//
// User steps come from ParseUserSteps, which checks the API's request
// schema. Step arguments keep their numbers exactly, as Ironic and IPA
// (Python) do: decoding keeps a number as float64 only when float64
// writes back the same text, and as json.Number otherwise, so
// 9007199254740993 and 1.0 reach the agent as the user wrote them. Validation (ValidateUserSteps, used by the planners) reports every
// problem of a request, worded as Ironic words it, in one *ValidationError:
// unknown step, unexpected or missing arguments, ramdisk required while
// disabled, the core deploy.deploy step overridden, duplicated deploy steps,
// disallowed steps. Reserved step names (power_on, power_off, reboot, hold,
// wait) are the conductor's own and pass through.
//
// # Running
//
// Plan.Progress gives the initial Progress; Planner.Start enters the first
// step. After each step the conductor reports an Outcome to Planner.Decide
// and receives an Action (run step i, power action, hold, sleep, wait for
// the agent, reboot then wait, refresh the agent's steps and restart or
// re-run, finish, fail, abort now or after the step) together with the
// Progress to persist. Planner.Continue is the continuation Ironic runs on
// heartbeats and continue calls: it pops the skip-current-step flag and
// honours abort-after. On an agent heartbeat, AgentOutcome turns the
// agent's command list into the Outcome (or nothing to do yet), ignoring
// late results of earlier steps.
//
// Progress.Write and ReadProgress store and load a run under Ironic's own
// driver_internal_info keys (clean_steps, clean_step_index,
// cleaning_reboot, skip_current_clean_step, cleaning_polling, ... and the
// deploy and service equivalents); CurrentColumn and StepFromColumn
// convert the node's <kind>_step column; Wipe clears a finished run.
//
// # Differences from Ironic
//
// The planner follows Ironic's ironic/conductor/steps.py on master, and
// differs from it on purpose in these points:
//
//   - Ironic master, not a release: the firmware interface has its place
//     in the tie-break tables and vendor and firmware steps are accepted
//     in user steps; the reserved step names power_on, power_off, reboot,
//     hold and wait are run by the conductor. Ironic 21.4 (the Debian
//     package the planner was compared with) rejects those firmware and
//     vendor steps and reports the reserved names as unknown steps.
//   - When both the user's deploy steps and the steps of matching deploy
//     templates are invalid, Ironic reports the user's problems only (it
//     stops there); ValidationError reports both groups, each with
//     Ironic's prefix, joined by "; ", so one request shows every
//     problem.
//   - Missing required arguments are listed in declaration order, as in
//     Ironic (Step.ArgsOrder, filled from the argsinfo object's key order
//     when a step is decoded from JSON, or by WithArg). Once a step list
//     has been stored in driver_internal_info and read back through Go
//     maps, that order is lost and the names come sorted. Unexpected
//     arguments are sorted (Ironic's order there is a set's, arbitrary),
//     and the Python repr of a step's args in messages lists the keys
//     sorted.
//   - Service steps follow the same table as clean steps. Ironic's agent
//     deploy interface returns the agent's service steps of every
//     interface, and its agent RAID interface its own declared service
//     step; Anvil reads the agent's RAID service steps through an
//     agent-based RAID interface, as for clean and deploy steps.
//   - A priority override key that no step can have (boot.x, or a key
//     without an interface) is dropped and reported by Planner.Ignored
//     so the conductor can warn about it; Ironic keeps it silently. The
//     other keys apply in both.
//
// # Usage
//
//	planner, err := steps.NewPlanner(steps.Config{
//		CleanPriorityOverrides: map[string]int{"deploy.erase_devices": 0},
//	})
//	if err != nil {
//		return err
//	}
//	plan, err := planner.AutomatedClean(steps.AutomatedCleanRequest{
//		Source: steps.Source{Driver: driverSteps, Agent: agentSteps, InBand: []string{"deploy"}},
//	})
//	if err != nil {
//		return err
//	}
//	if plan.Skip {
//		return fireDone()
//	}
//	prog := plan.Progress()
//	for action := planner.Start(prog); ; {
//		if err := action.Progress.Write(node.DriverInternalInfo); err != nil {
//			return err
//		}
//		node.CleanStep = action.Progress.Current
//		switch action.Kind {
//		case steps.RunStep:
//			outcome := execute(action.Step)
//			action = planner.Decide(action.Progress, outcome)
//		case steps.Finish:
//			return fireDone()
//		default:
//			return handle(action) // wait, reboot, fail, abort...
//		}
//	}
//
// See the Example functions for runnable versions.
package steps
