package statemachine_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/anvilmetal/anvil/statemachine"
)

func ExampleNewProvisionMachine() {
	m := statemachine.NewProvisionMachine()
	fmt.Println(m.Initial(), len(m.States()), len(m.Events()), len(m.Transitions()))
	// Output: enroll 30 18 93
}

func ExampleMachine_Process() {
	m := statemachine.NewProvisionMachine()
	state, target, err := m.Process(statemachine.Manageable, statemachine.EventProvide)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s, aiming at %s\n", state, target)
	// Output: cleaning, aiming at available
}

func ExampleMachine_Process_refused() {
	m := statemachine.NewProvisionMachine()
	_, _, err := m.Process(statemachine.DeployFailed, statemachine.EventManage)
	var refused *statemachine.TransitionError
	if errors.As(err, &refused) {
		fmt.Println("state:", refused.State)
		fmt.Println("event:", refused.Event)
		fmt.Println("allowed:", refused.Allowed)
	}
	fmt.Println(errors.Is(err, statemachine.ErrInvalidTransition))
	fmt.Println(err)
	// Output:
	// state: deploy failed
	// event: manage
	// allowed: [delete deploy rebuild]
	// true
	// statemachine: ironic-provision: event "manage" is not allowed in state "deploy failed" (allowed: delete, deploy, rebuild)
}

// A manual clean: the conductor starts it with the verb's explicit target,
// and the target stays manageable through the wait until the clean ends.
func ExampleMachine_Apply() {
	m := statemachine.NewProvisionMachine()
	spec, _ := statemachine.VerbClean.Spec()
	state, target, _ := m.Apply(statemachine.Move{
		State:          statemachine.Manageable,
		Event:          spec.Event,
		ExplicitTarget: spec.ExplicitTarget,
		WorkFollows:    true,
	})
	fmt.Println(state, "->", target)
	state, target, _ = m.Apply(statemachine.Move{State: state, Target: target, Event: statemachine.EventWait})
	fmt.Println(state, "->", target)
	state, target, _ = m.Apply(statemachine.Move{State: state, Target: target, Event: statemachine.EventResume, WorkFollows: true})
	fmt.Println(state, "->", target)
	state, target, _ = m.Apply(statemachine.Move{State: state, Target: target, Event: statemachine.EventManage})
	fmt.Printf("%s -> %q\n", state, target)
	// Output:
	// cleaning -> manageable
	// clean wait -> manageable
	// cleaning -> manageable
	// manageable -> ""
}

func ExampleMachine_Allowed() {
	m := statemachine.NewProvisionMachine()
	fmt.Println(m.Allowed(statemachine.ServiceFailed))
	fmt.Println(m.Allows(statemachine.CleanFailed, statemachine.EventProvide))
	// Output:
	// [abort delete hold rescue service wait]
	// false
}

func ExampleParseVerb() {
	for _, in := range []string{"undeploy", "active", "hold"} {
		v, err := statemachine.ParseVerb(in)
		if err != nil {
			fmt.Println(errors.Is(err, statemachine.ErrUnknownVerb), err)
			continue
		}
		fmt.Printf("%s: event %s, canonical %s\n", v, v.Event(), v.Canonical())
	}
	// Output:
	// undeploy: event delete, canonical deleted
	// active: event deploy, canonical active
	// true statemachine: unknown provision verb "hold" (accepted: active, deploy, rebuild, deleted, undeploy, manage, provide, inspect, clean, service, abort, adopt, rescue, unrescue, unhold)
}

func ExampleVerb_Validate() {
	err := statemachine.VerbRescue.Validate(statemachine.VerbInput{})
	var missing *statemachine.InputError
	if errors.As(err, &missing) {
		fmt.Println(missing.Field)
	}
	fmt.Println(statemachine.VerbClean.Validate(statemachine.VerbInput{Steps: 1}))
	// Output:
	// rescue_password
	// <nil>
}

func ExampleNew() {
	m, err := statemachine.New(statemachine.Definition{
		Name:    "job",
		Initial: "idle",
		States: []statemachine.StateSpec{
			{Name: "idle", Stable: true},
			{Name: "finished", Stable: true},
			{Name: "running", Target: "finished"},
		},
		Events: []statemachine.Event{"start", "done"},
		Transitions: []statemachine.Transition{
			{From: "idle", Event: "start", To: "running"},
			{From: "running", Event: "done", To: "finished"},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Process("idle", "start"))
	// Output: running finished <nil>
}

func ExampleMachine_WriteDOT() {
	m, _ := statemachine.New(statemachine.Definition{
		Name:        "switch",
		Initial:     "off",
		States:      []statemachine.StateSpec{{Name: "off", Stable: true}, {Name: "on", Stable: true}},
		Events:      []statemachine.Event{"toggle"},
		Transitions: []statemachine.Transition{{From: "off", Event: "toggle", To: "on"}, {From: "on", Event: "toggle", To: "off"}},
	})
	_ = m.WriteDOT(os.Stdout)
	// Output:
	// digraph "switch" {
	//   rankdir=LR;
	//   node [shape=box, style=rounded, fontname="Helvetica"];
	//   edge [fontname="Helvetica", fontsize=10];
	//   "__initial" [shape=point, label=""];
	//   "__initial" -> "off";
	//   "off" [peripheries=2, style="rounded,bold"];
	//   "on" [peripheries=2, style="rounded,bold"];
	//   "off" -> "on" [label="toggle"];
	//   "on" -> "off" [label="toggle"];
	// }
}

func ExampleMachine_WriteMermaid() {
	m, _ := statemachine.New(statemachine.Definition{
		Name:        "switch",
		Initial:     "off",
		States:      []statemachine.StateSpec{{Name: "off", Stable: true}, {Name: "half on"}},
		Events:      []statemachine.Event{"toggle"},
		Transitions: []statemachine.Transition{{From: "off", Event: "toggle", To: "half on"}},
	})
	_ = m.WriteMermaid(os.Stdout)
	// Output:
	// stateDiagram-v2
	//     classDef stable font-weight:bold,stroke-width:3px
	//     state "off" as s_off
	//     state "half on" as s_half_on
	//     [*] --> s_off
	//     s_off --> s_half_on: toggle
	//     class s_off stable
}

func ExampleIsStable() {
	for _, s := range []statemachine.State{statemachine.Active, statemachine.DeployWait, statemachine.CleanFailed} {
		fmt.Printf("%q stable=%v failure=%v lookup=%v\n", s, statemachine.IsStable(s), statemachine.IsFailure(s), statemachine.LookupAllowed(s))
	}
	// Output:
	// "active" stable=true failure=false lookup=false
	// "wait call-back" stable=false failure=false lookup=true
	// "clean failed" stable=false failure=true lookup=false
}
