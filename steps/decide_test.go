package steps

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func ptrInt(i int) *int    { return &i }
func ptrBool(b bool) *bool { return &b }

func threeSteps() []Step {
	return []Step{
		{Interface: "deploy", Name: "erase_devices_metadata", Priority: 99, Abortable: true, RequiresRamdisk: true},
		{Interface: "bios", Name: "factory_reset", Priority: 10},
		{Interface: "deploy", Name: "erase_devices", Priority: 5, Abortable: true, RequiresRamdisk: true},
	}
}

// at returns a progress of kind positioned on step i of threeSteps.
func at(kind Kind, i int) Progress {
	p := Progress{Kind: kind, Steps: threeSteps()}
	if i >= 0 {
		cur := p.Steps[i]
		p.Current, p.Index = &cur, ptrInt(i)
	}
	return p
}

func mustPlanner(t *testing.T, cfg Config) *Planner {
	t.Helper()
	p, err := NewPlanner(cfg)
	if err != nil {
		t.Fatalf("NewPlanner: %v", err)
	}
	return p
}

func TestDecide(t *testing.T) {
	planner := mustPlanner(t, Config{})
	with := func(p Progress, f func(*Progress)) Progress { f(&p); return p }
	tests := []struct {
		name    string
		prog    Progress
		outcome Outcome
		// want describes the expected action; Progress fields checked below.
		wantKind        ActionKind
		wantIndex       int
		wantCurrent     string // key of the current step after the decision, "" for none
		wantSkip        *bool
		wantReboot      bool
		wantMessage     string
		wantMaintenance bool
	}{
		{name: "step done moves to the next step", prog: at(Clean, 0), outcome: Outcome{Kind: StepDone},
			wantKind: RunStep, wantIndex: 1, wantCurrent: "bios.factory_reset"},
		{name: "last step done finishes", prog: at(Clean, 2), outcome: Outcome{Kind: StepDone},
			wantKind: Finish, wantIndex: 3},
		{name: "skip flag false re-runs the current step and is popped", prog: with(at(Deploy, 1), func(p *Progress) { p.SkipCurrentStep = ptrBool(false) }),
			outcome: Outcome{Kind: StepDone}, wantKind: RunStep, wantIndex: 1, wantCurrent: "bios.factory_reset"},
		{name: "skip flag true is popped and moves on", prog: with(at(Deploy, 0), func(p *Progress) { p.SkipCurrentStep = ptrBool(true) }),
			outcome: Outcome{Kind: StepDone}, wantKind: RunStep, wantIndex: 1, wantCurrent: "bios.factory_reset"},
		{name: "step asked to wait", prog: at(Clean, 1), outcome: Outcome{Kind: StepWaiting},
			wantKind: Wait, wantIndex: 1, wantCurrent: "bios.factory_reset"},
		{name: "agent busy retries the same step on the next heartbeat", prog: at(Clean, 0), outcome: Outcome{Kind: AgentBusy},
			wantKind: Wait, wantIndex: 0, wantCurrent: "deploy.erase_devices_metadata", wantSkip: ptrBool(false)},
		{name: "connection lost while reboot pending waits for the agent", prog: with(at(Clean, 0), func(p *Progress) { p.Reboot = true }),
			outcome:  Outcome{Kind: AgentConnectionLost, Err: "connection refused"},
			wantKind: Wait, wantIndex: 0, wantCurrent: "deploy.erase_devices_metadata", wantSkip: ptrBool(false), wantReboot: true},
		{name: "deploy connection lost before the agent recorded its URL waits", prog: at(Deploy, 0),
			outcome:  Outcome{Kind: AgentConnectionLost, AgentURLMissing: true},
			wantKind: Wait, wantIndex: 0, wantCurrent: "deploy.erase_devices_metadata", wantSkip: ptrBool(false)},
		{name: "clean connection lost without reboot fails with maintenance", prog: at(Clean, 0),
			outcome:  Outcome{Kind: AgentConnectionLost, Node: "n1", Err: "connection refused", AgentURLMissing: true},
			wantKind: Fail, wantIndex: 0, wantCurrent: "deploy.erase_devices_metadata", wantMaintenance: true,
			wantMessage: "Node n1 failed step {'interface': 'deploy', 'step': 'erase_devices_metadata', 'priority': 99}: connection refused"},
		{name: "version mismatch restarts automated clean from step 0", prog: with(at(Clean, 2), func(p *Progress) { p.Polling = true }),
			outcome: Outcome{Kind: VersionMismatch}, wantKind: RefreshAndRestart, wantIndex: 0},
		{name: "version mismatch re-runs the current manual clean step", prog: with(at(Clean, 2), func(p *Progress) { p.Manual = true }),
			outcome: Outcome{Kind: VersionMismatch}, wantKind: RefreshAndRerun, wantIndex: 2, wantCurrent: "deploy.erase_devices", wantSkip: ptrBool(false)},
		{name: "version mismatch re-runs the current deploy step", prog: at(Deploy, 1),
			outcome: Outcome{Kind: VersionMismatch}, wantKind: RefreshAndRerun, wantIndex: 1, wantCurrent: "bios.factory_reset", wantSkip: ptrBool(false)},
		{name: "version mismatch re-runs the current service step", prog: at(Service, 1),
			outcome: Outcome{Kind: VersionMismatch}, wantKind: RefreshAndRerun, wantIndex: 1, wantCurrent: "bios.factory_reset", wantSkip: ptrBool(false)},
		{name: "clean step failure", prog: at(Clean, 1), outcome: Outcome{Kind: StepFailed, Node: "n1", Err: "BMC said no"},
			wantKind: Fail, wantIndex: 1, wantCurrent: "bios.factory_reset", wantMaintenance: true,
			wantMessage: "Node n1 failed step {'interface': 'bios', 'step': 'factory_reset', 'priority': 10}: BMC said no"},
		{name: "agent step failure", prog: at(Clean, 0), outcome: Outcome{Kind: StepFailed, Node: "n1", Err: "disk busy", FromAgent: true},
			wantKind: Fail, wantIndex: 0, wantCurrent: "deploy.erase_devices_metadata", wantMaintenance: true,
			wantMessage: "Agent returned error for clean step {'interface': 'deploy', 'step': 'erase_devices_metadata', 'priority': 99} on node n1 : disk busy."},
		{name: "deploy step failure does not set maintenance", prog: at(Deploy, 1), outcome: Outcome{Kind: StepFailed, Node: "n1", Err: "boom"},
			wantKind: Fail, wantIndex: 1, wantCurrent: "bios.factory_reset",
			wantMessage: "Deploy step {'interface': 'bios', 'step': 'factory_reset', 'priority': 10} failed on node n1. boom"},
		{name: "service step failure", prog: at(Service, 1), outcome: Outcome{Kind: StepFailed, Node: "n1", Err: "boom"},
			wantKind: Fail, wantIndex: 1, wantCurrent: "bios.factory_reset",
			wantMessage: "Node n1 failed step {'interface': 'bios', 'step': 'factory_reset', 'priority': 10}: boom"},
		{name: "reboot requested sets the reboot flag", prog: at(Clean, 0), outcome: Outcome{Kind: RebootRequested},
			wantKind: RebootToFinishStep, wantIndex: 0, wantCurrent: "deploy.erase_devices_metadata", wantReboot: true},
		{name: "agent back after reboot clears the flag and continues", prog: with(at(Clean, 0), func(p *Progress) { p.Reboot = true }),
			outcome: Outcome{Kind: AgentRebooted}, wantKind: RunStep, wantIndex: 1, wantCurrent: "bios.factory_reset"},
		{name: "agent back after an out-of-band reboot re-runs the step", prog: with(at(Deploy, 1), func(p *Progress) { p.Reboot = true; p.SkipCurrentStep = ptrBool(false) }),
			outcome: Outcome{Kind: AgentRebooted}, wantKind: RunStep, wantIndex: 1, wantCurrent: "bios.factory_reset"},
		{name: "abort on an abortable step aborts now", prog: at(Clean, 0), outcome: Outcome{Kind: AbortRequested},
			wantKind: Abort, wantIndex: 0, wantCurrent: "deploy.erase_devices_metadata", wantMessage: "clean aborted by request"},
		{name: "abort on a non-abortable step aborts after it", prog: at(Clean, 1), outcome: Outcome{Kind: AbortRequested},
			wantKind: AbortAfterStep, wantIndex: 1, wantCurrent: "bios.factory_reset",
			wantMessage: "clean step factory_reset is not abortable; the clean will be aborted after it completes"},
		{name: "a step marked abort_after aborts when it finishes", prog: with(at(Clean, 1), func(p *Progress) { p.Current.AbortAfter = true }),
			outcome: Outcome{Kind: StepDone}, wantKind: Abort, wantIndex: 1, wantCurrent: "bios.factory_reset",
			wantMessage: "clean step factory_reset was marked to abort after it completed; aborting"},
		{name: "abort_after on the last step just finishes", prog: with(at(Clean, 2), func(p *Progress) { p.Current.AbortAfter = true }),
			outcome: Outcome{Kind: StepDone}, wantKind: Finish, wantIndex: 3},
		{name: "unknown outcome fails", prog: at(Clean, 0), outcome: Outcome{Kind: OutcomeKind(99)},
			wantKind: Fail, wantIndex: 0, wantCurrent: "deploy.erase_devices_metadata", wantMessage: "steps: unknown outcome outcome(99)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.prog.clone()
			a := planner.Decide(tc.prog, tc.outcome)
			if !reflect.DeepEqual(tc.prog, before) {
				t.Fatalf("Decide mutated its input progress")
			}
			if a.Kind != tc.wantKind || a.Index != tc.wantIndex {
				t.Fatalf("action = %v index %d, want %v index %d", a.Kind, a.Index, tc.wantKind, tc.wantIndex)
			}
			cur := ""
			if a.Progress.Current != nil {
				cur = a.Progress.Current.Key()
			}
			if cur != tc.wantCurrent {
				t.Fatalf("current step = %q, want %q", cur, tc.wantCurrent)
			}
			if tc.wantCurrent != "" && (a.Progress.Index == nil || *a.Progress.Index != tc.wantIndex) {
				t.Fatalf("progress index = %v, want %d", a.Progress.Index, tc.wantIndex)
			}
			if tc.wantCurrent != "" && a.Step.Key() != tc.wantCurrent {
				t.Fatalf("action step = %q, want %q", a.Step.Key(), tc.wantCurrent)
			}
			if !reflect.DeepEqual(a.Progress.SkipCurrentStep, tc.wantSkip) {
				t.Fatalf("skip flag = %v, want %v", fmtBoolPtr(a.Progress.SkipCurrentStep), fmtBoolPtr(tc.wantSkip))
			}
			if a.Progress.Reboot != tc.wantReboot {
				t.Fatalf("reboot flag = %v, want %v", a.Progress.Reboot, tc.wantReboot)
			}
			if a.Message != tc.wantMessage {
				t.Fatalf("message = %q, want %q", a.Message, tc.wantMessage)
			}
			if a.Maintenance != tc.wantMaintenance || (a.Maintenance && a.Fault != "clean failure") {
				t.Fatalf("maintenance = %v fault %q, want %v", a.Maintenance, a.Fault, tc.wantMaintenance)
			}
			if a.Kind == RunStep && a.Progress.Polling {
				t.Fatalf("entering a step must clear the polling flag")
			}
		})
	}
}

func TestVersionMismatchRestartThenContinue(t *testing.T) {
	planner := mustPlanner(t, Config{})
	a := planner.Decide(at(Clean, 2), Outcome{Kind: VersionMismatch})
	if a.Kind != RefreshAndRestart || a.Progress.Current != nil || a.Progress.Index != nil {
		t.Fatalf("automated clean mismatch = %v current %v index %v", a.Kind, a.Progress.Current, a.Progress.Index)
	}
	next := planner.Continue(a.Progress)
	if next.Kind != RunStep || next.Index != 0 {
		t.Fatalf("after restart = %v index %d, want run step 0", next.Kind, next.Index)
	}
	manual := at(Clean, 2)
	manual.Manual = true
	a = planner.Decide(manual, Outcome{Kind: VersionMismatch})
	next = planner.Continue(a.Progress)
	if next.Kind != RunStep || next.Index != 2 || next.Progress.SkipCurrentStep != nil {
		t.Fatalf("manual re-run = %v index %d skip %v, want run step 2 with the flag popped", next.Kind, next.Index, next.Progress.SkipCurrentStep)
	}
}

func TestMarkAbortAfterPersists(t *testing.T) {
	planner := mustPlanner(t, Config{})
	a := planner.Decide(at(Clean, 1), Outcome{Kind: AbortRequested})
	if !a.Progress.Current.AbortAfter || !a.Progress.Steps[1].AbortAfter {
		t.Fatalf("abort_after not recorded on the current step: %+v", a.Progress.Current)
	}
	info := map[string]any{}
	if err := a.Progress.Write(info); err != nil {
		t.Fatal(err)
	}
	back, err := ReadProgress(Clean, info, a.Progress.Current)
	if err != nil {
		t.Fatal(err)
	}
	if got := planner.Decide(back, Outcome{Kind: StepDone}); got.Kind != Abort {
		t.Fatalf("after the step finished = %v, want abort", got.Kind)
	}
}

func TestStartAndContinueEdges(t *testing.T) {
	planner := mustPlanner(t, Config{})
	if a := planner.Start(Progress{Kind: Clean}); a.Kind != Finish {
		t.Fatalf("empty plan = %v, want finish", a.Kind)
	}
	a := planner.Start(Progress{Kind: Clean, Steps: threeSteps(), Polling: true})
	if a.Kind != RunStep || a.Index != 0 || a.Progress.Polling || a.Progress.Current == nil || *a.Progress.Index != 0 {
		t.Fatalf("start = %+v", a)
	}
	// A current step with a null index means no step is left (Ironic's
	// _get_node_next_steps returns None).
	p := at(Clean, 1)
	p.Index = nil
	if a := planner.Continue(p); a.Kind != Finish {
		t.Fatalf("continue with null index = %v, want finish", a.Kind)
	}
	if a := planner.Enter(at(Clean, -1), 7); a.Kind != Finish || a.Progress.Current != nil || len(a.Progress.Steps) != 0 {
		t.Fatalf("enter past the end = %+v", a)
	}
	fin := planner.Decide(func() Progress { p := at(Clean, 2); p.Manual = true; return p }(), Outcome{Kind: StepDone})
	if fin.Kind != Finish || !fin.Progress.Manual || fin.Progress.Index != nil {
		t.Fatalf("finish keeps Manual and clears the rest: %+v", fin.Progress)
	}
}

func TestReservedSteps(t *testing.T) {
	tests := []struct {
		name        string
		cfg         Config
		step        Step
		wantKind    ActionKind
		wantSeconds int
		wantWarning bool
		wantMessage string
	}{
		{name: "power on", step: Step{Interface: "power", Name: "power_on"}, wantKind: PowerOn},
		{name: "power off", step: Step{Interface: "power", Name: "power_off"}, wantKind: PowerOff},
		{name: "reboot", step: Step{Interface: "power", Name: "reboot"}, wantKind: PowerReboot},
		{name: "hold", step: Step{Interface: "deploy", Name: "hold"}, wantKind: Hold},
		{name: "wait without seconds waits for a heartbeat", step: Step{Interface: "deploy", Name: "wait"}, wantKind: Wait},
		{name: "wait with seconds sleeps", step: Step{Interface: "deploy", Name: "wait", Args: map[string]any{"seconds": 10.0}}, wantKind: Sleep, wantSeconds: 10},
		{name: "wait seconds as a string", step: Step{Interface: "deploy", Name: "wait", Args: map[string]any{"seconds": "20"}}, wantKind: Sleep, wantSeconds: 20},
		{name: "wait capped at the default 30", step: Step{Interface: "deploy", Name: "wait", Args: map[string]any{"seconds": 100.0}}, wantKind: Sleep, wantSeconds: 30, wantWarning: true},
		{name: "wait capped at the configured maximum", cfg: Config{MaxWaitStepSeconds: 1800}, step: Step{Interface: "deploy", Name: "wait", Args: map[string]any{"seconds": 5000}}, wantKind: Sleep, wantSeconds: 1800, wantWarning: true},
		{name: "wait with a negative number fails", step: Step{Interface: "deploy", Name: "wait", Args: map[string]any{"seconds": -1.0}}, wantKind: Fail,
			wantMessage: "clean step wait: argument seconds must be a non-negative integer, got -1"},
		{name: "wait with garbage fails", step: Step{Interface: "deploy", Name: "wait", Args: map[string]any{"seconds": "soon"}}, wantKind: Fail,
			wantMessage: "clean step wait: argument seconds must be a non-negative integer, got 'soon'"},
		{name: "driver step", step: Step{Interface: "deploy", Name: "erase_devices"}, wantKind: RunStep},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			planner := mustPlanner(t, tc.cfg)
			prog := Progress{Kind: Clean, Steps: []Step{{Interface: "deploy", Name: "erase_devices_metadata"}, tc.step}}
			a := planner.Decide(func() Progress { p := prog; c := p.Steps[0]; p.Current, p.Index = &c, ptrInt(0); return p }(), Outcome{Kind: StepDone})
			if a.Kind != tc.wantKind || a.Index != 1 || a.Step.Name != tc.step.Name {
				t.Fatalf("action = %v index %d step %s, want %v index 1", a.Kind, a.Index, a.Step.Name, tc.wantKind)
			}
			if a.Seconds != tc.wantSeconds {
				t.Fatalf("seconds = %d, want %d", a.Seconds, tc.wantSeconds)
			}
			if (a.Warning != "") != tc.wantWarning {
				t.Fatalf("warning = %q, want one: %v", a.Warning, tc.wantWarning)
			}
			if a.Message != tc.wantMessage {
				t.Fatalf("message = %q, want %q", a.Message, tc.wantMessage)
			}
			if tc.wantKind == Fail && !a.Maintenance {
				t.Fatalf("a failed clean step sets maintenance")
			}
			if a.Progress.Current == nil || a.Progress.Current.Name != tc.step.Name || *a.Progress.Index != 1 {
				t.Fatalf("the reserved step must become current: %+v", a.Progress.Current)
			}
			// After a power action or a sleep the conductor reports StepDone.
			if after := planner.Decide(a.Progress, Outcome{Kind: StepDone}); after.Kind != Finish {
				t.Fatalf("after the last step = %v, want finish", after.Kind)
			}
		})
	}
}

func TestNewPlannerRejects(t *testing.T) {
	for _, cfg := range []Config{
		{MaxWaitStepSeconds: 1801},
		{MaxWaitStepSeconds: -1},
		{DisallowCleanSteps: []string{"boot.x"}},
		{DisallowDeploySteps: []string{"network.x"}},
		{DisallowServiceSteps: []string{".x"}},
	} {
		if _, err := NewPlanner(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewPlanner(%+v) error = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// TestNewPlannerIgnoresBadOverrideKeys checks that an override key no step
// can match is dropped and reported while the other keys are kept, as
// Ironic keeps applying the rest of the option.
func TestNewPlannerIgnoresBadOverrideKeys(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cfg         Config
		clean       map[string]int
		verify      map[string]int
		wantIgnored []IgnoredKey
	}{
		{
			name:  "interface outside the table",
			cfg:   Config{CleanPriorityOverrides: map[string]int{"boot.x": 5, "deploy.erase_devices": 0}},
			clean: map[string]int{"deploy.erase_devices": 0},
			wantIgnored: []IgnoredKey{{Option: "clean_step_priority_override", Key: "boot.x",
				Reason: `interface "boot" has no clean steps`}},
		},
		{
			name:  "no interface",
			cfg:   Config{CleanPriorityOverrides: map[string]int{"erase_devices": 1, "raid.x": 2}},
			clean: map[string]int{"raid.x": 2},
			wantIgnored: []IgnoredKey{{Option: "clean_step_priority_override", Key: "erase_devices",
				Reason: `want "interface.step"`}},
		},
		{
			name:   "verify table",
			cfg:    Config{VerifyPriorityOverrides: map[string]int{"bogus.x": 1, "boot.y": 3}},
			verify: map[string]int{"boot.y": 3},
			wantIgnored: []IgnoredKey{{Option: "verify_step_priority_override", Key: "bogus.x",
				Reason: `interface "bogus" has no verify steps`}},
		},
		{
			name:  "all usable",
			cfg:   Config{CleanPriorityOverrides: map[string]int{"bios.factory_reset": 9}},
			clean: map[string]int{"bios.factory_reset": 9},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlanner(tc.cfg)
			if err != nil {
				t.Fatalf("NewPlanner: %v", err)
			}
			got := p.Config()
			if !reflect.DeepEqual(got.CleanPriorityOverrides, tc.clean) || !reflect.DeepEqual(got.VerifyPriorityOverrides, tc.verify) {
				t.Errorf("kept clean %v verify %v, want %v and %v", got.CleanPriorityOverrides, got.VerifyPriorityOverrides, tc.clean, tc.verify)
			}
			if ig := p.Ignored(); !reflect.DeepEqual(ig, tc.wantIgnored) {
				t.Errorf("Ignored() = %+v, want %+v", ig, tc.wantIgnored)
			}
		})
	}
}

func TestKindStrings(t *testing.T) {
	for k := RunStep; k <= AbortAfterStep; k++ {
		if strings.HasPrefix(k.String(), "action(") {
			t.Errorf("action %d has no name", k)
		}
	}
	for o := StepDone; o <= AbortRequested; o++ {
		if strings.HasPrefix(o.String(), "outcome(") {
			t.Errorf("outcome %d has no name", o)
		}
	}
}

func fmtBoolPtr(b *bool) string {
	if b == nil {
		return "nil"
	}
	if *b {
		return "true"
	}
	return "false"
}

// TestWaitSecondsExactNumbers checks the seconds of a wait step kept as
// json.Number (written 10.0): Ironic applies int() to the float Python
// read, so 10.0 waits 10 seconds; 2.5 is refused, as the planner refuses
// a fractional float64.
func TestWaitSecondsExactNumbers(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want int
		ok   bool
	}{
		{json.Number("10.0"), 10, true},
		{json.Number("1e1"), 10, true},
		{json.Number("2.5"), 0, false},
		{json.Number("-1.0"), 0, false},
		{float64(7), 7, true},
	} {
		if got, ok := waitSeconds(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("waitSeconds(%#v) = %d, %v, want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
