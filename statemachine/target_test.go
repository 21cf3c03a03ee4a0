package statemachine_test

import (
	"errors"
	"testing"

	sm "github.com/anvilmetal/anvil/statemachine"
)

// TestTargetRules walks the target rules of Ironic's process_event (see the
// package documentation) through the provision machine.
func TestTargetRules(t *testing.T) {
	cases := []struct {
		name       string
		move       sm.Move
		wantState  sm.State
		wantTarget sm.State
	}{
		// A state's default target is set on entering it.
		{"deploy sets target active", sm.Move{State: sm.Available, Event: sm.EventDeploy, WorkFollows: true}, sm.Deploying, sm.Active},
		{"manage from enroll aims at manageable", sm.Move{State: sm.Enroll, Event: sm.EventManage, WorkFollows: true}, sm.Verifying, sm.Manageable},
		{"provide aims at available", sm.Move{State: sm.Manageable, Event: sm.EventProvide, WorkFollows: true}, sm.Cleaning, sm.Available},
		{"inspect aims at manageable", sm.Move{State: sm.Manageable, Event: sm.EventInspect, WorkFollows: true}, sm.Inspecting, sm.Manageable},
		{"rescue aims at rescue", sm.Move{State: sm.Active, Event: sm.EventRescue, WorkFollows: true}, sm.Rescuing, sm.Rescue},
		{"tear-down aims at available", sm.Move{State: sm.Active, Event: sm.EventDelete, WorkFollows: true}, sm.Deleting, sm.Available},
		{"service aims at active", sm.Move{State: sm.Active, Event: sm.EventService, WorkFollows: true}, sm.Servicing, sm.Active},
		{"wait keeps deploy target", sm.Move{State: sm.Deploying, Target: sm.Active, Event: sm.EventWait}, sm.DeployWait, sm.Active},
		{"failure keeps a target", sm.Move{State: sm.Deploying, Target: sm.Active, Event: sm.EventFail}, sm.DeployFailed, sm.Active},
		{"tear-down done starts cleaning", sm.Move{State: sm.Deleting, Target: sm.Available, Event: sm.EventClean, WorkFollows: true}, sm.Cleaning, sm.Available},

		// Reaching a stable state without follow-up work clears the target.
		{"deploy done clears target", sm.Move{State: sm.Deploying, Target: sm.Active, Event: sm.EventDone}, sm.Active, sm.NoState},
		{"verify done clears target", sm.Move{State: sm.Verifying, Target: sm.Manageable, Event: sm.EventDone}, sm.Manageable, sm.NoState},
		{"automated clean done clears target", sm.Move{State: sm.Cleaning, Target: sm.Available, Event: sm.EventDone}, sm.Available, sm.NoState},
		{"verify failure back to enroll clears target", sm.Move{State: sm.Verifying, Target: sm.Manageable, Event: sm.EventFail}, sm.Enroll, sm.NoState},
		{"tear-down failure to error clears target", sm.Move{State: sm.Deleting, Target: sm.Available, Event: sm.EventFail}, sm.Error, sm.NoState},
		{"service failed abort to active clears target", sm.Move{State: sm.ServiceFailed, Target: sm.Active, Event: sm.EventAbort}, sm.Active, sm.NoState},

		// With follow-up work a stable state keeps whatever target is left:
		// reaching the target itself clears it, another target survives.
		{"reaching the target clears it even with work", sm.Move{State: sm.Rescuing, Target: sm.Rescue, Event: sm.EventDone, WorkFollows: true}, sm.Rescue, sm.NoState},
		{"a different target survives a stable state with work", sm.Move{State: sm.Deleting, Target: sm.Available, Event: sm.EventFail, WorkFollows: true}, sm.Error, sm.Available},

		// Manual cleaning keeps target manageable.
		{"manual clean starts with explicit manageable", sm.Move{State: sm.Manageable, Event: sm.EventClean, ExplicitTarget: sm.Manageable, WorkFollows: true}, sm.Cleaning, sm.Manageable},
		{"manual clean wait keeps manageable", sm.Move{State: sm.Cleaning, Target: sm.Manageable, Event: sm.EventWait}, sm.CleanWait, sm.Manageable},
		{"manual clean resume keeps manageable", sm.Move{State: sm.CleanWait, Target: sm.Manageable, Event: sm.EventResume, WorkFollows: true}, sm.Cleaning, sm.Manageable},
		{"manual clean hold keeps manageable", sm.Move{State: sm.CleanWait, Target: sm.Manageable, Event: sm.EventHold}, sm.CleanHold, sm.Manageable},
		{"manual clean unhold keeps manageable", sm.Move{State: sm.CleanHold, Target: sm.Manageable, Event: sm.EventUnhold}, sm.CleanWait, sm.Manageable},
		{"manual clean failure keeps manageable", sm.Move{State: sm.Cleaning, Target: sm.Manageable, Event: sm.EventFail}, sm.CleanFailed, sm.Manageable},
		{"manual clean abort keeps manageable", sm.Move{State: sm.CleanWait, Target: sm.Manageable, Event: sm.EventAbort}, sm.CleanFailed, sm.Manageable},
		{"manual clean finishes in manageable", sm.Move{State: sm.Cleaning, Target: sm.Manageable, Event: sm.EventManage}, sm.Manageable, sm.NoState},
		{"clean failed manage clears target", sm.Move{State: sm.CleanFailed, Target: sm.Manageable, Event: sm.EventManage}, sm.Manageable, sm.NoState},
		{"automated clean wait keeps available", sm.Move{State: sm.Cleaning, Target: sm.Available, Event: sm.EventWait}, sm.CleanWait, sm.Available},
		{"automated clean without target takes default", sm.Move{State: sm.Cleaning, Event: sm.EventWait}, sm.CleanWait, sm.Available},
		{"manageable target does not stick outside cleaning", sm.Move{State: sm.Inspecting, Target: sm.Manageable, Event: sm.EventFail}, sm.InspectFailed, sm.Manageable},

		// An explicit target overrides the default.
		{"explicit target overrides default", sm.Move{State: sm.Available, Event: sm.EventDeploy, ExplicitTarget: sm.Manageable, WorkFollows: true}, sm.Deploying, sm.Manageable},
		{"explicit target kept on a stable state with work", sm.Move{State: sm.Cleaning, Event: sm.EventManage, ExplicitTarget: sm.Available, WorkFollows: true}, sm.Manageable, sm.Available},
		{"explicit target cleared on a stable state without work", sm.Move{State: sm.Cleaning, Event: sm.EventManage, ExplicitTarget: sm.Available}, sm.Manageable, sm.NoState},
	}
	m := sm.NewProvisionMachine()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state, target, err := m.Apply(c.move)
			if err != nil {
				t.Fatalf("Apply(%+v): %v", c.move, err)
			}
			if state != c.wantState || target != c.wantTarget {
				t.Errorf("Apply(%+v) = (%q, %q), want (%q, %q)", c.move, state, target, c.wantState, c.wantTarget)
			}
		})
	}
}

func TestProcessUsesDefaults(t *testing.T) {
	m := sm.NewProvisionMachine()
	for _, tr := range m.Transitions() {
		state, target, err := m.Process(tr.From, tr.Event)
		if err != nil {
			t.Fatalf("Process(%q, %q): %v", tr.From, tr.Event, err)
		}
		if state != tr.To {
			t.Errorf("Process(%q, %q) state = %q, want %q", tr.From, tr.Event, state, tr.To)
		}
		if want := m.DefaultTarget(tr.To); target != want {
			t.Errorf("Process(%q, %q) target = %q, want %q", tr.From, tr.Event, target, want)
		}
		if sm.IsStable(state) && target != sm.NoState {
			t.Errorf("Process(%q, %q) left target %q on stable state %q", tr.From, tr.Event, target, state)
		}
	}
}

func TestTargetMustBeStable(t *testing.T) {
	m := sm.NewProvisionMachine()
	cases := []struct {
		name  string
		move  sm.Move
		field string
	}{
		{"explicit non-stable", sm.Move{State: sm.Available, Event: sm.EventDeploy, ExplicitTarget: sm.Deploying}, "explicit target"},
		{"explicit unregistered", sm.Move{State: sm.Available, Event: sm.EventDeploy, ExplicitTarget: "deploy complete"}, "explicit target"},
		{"current non-stable", sm.Move{State: sm.Deploying, Target: sm.DeployWait, Event: sm.EventWait}, "target"},
		{"current unregistered", sm.Move{State: sm.Deploying, Target: "deleted", Event: sm.EventWait}, "target"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := m.Apply(c.move)
			var te *sm.TargetError
			if !errors.As(err, &te) || !errors.Is(err, sm.ErrInvalidTarget) {
				t.Fatalf("Apply error = %v, want *TargetError", err)
			}
			if te.Field != c.field {
				t.Errorf("field = %q, want %q", te.Field, c.field)
			}
			if errors.Is(err, sm.ErrInvalidTransition) {
				t.Error("a target error must not match ErrInvalidTransition")
			}
		})
	}
}
