package steps

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// OutcomeKind says what happened to the current step.
type OutcomeKind int

// The outcomes the conductor reports to Decide.
const (
	// StepDone: the step finished (returned nothing, the agent reported
	// SUCCEEDED without a reboot request, or the conductor ran a reserved
	// power or sleep step, or a hold was released).
	StepDone OutcomeKind = iota + 1
	// StepWaiting: the step returned the wait state; it goes on
	// asynchronously.
	StepWaiting
	// AgentBusy: the agent answered 409 (AgentInProgress).
	AgentBusy
	// AgentConnectionLost: the agent could not be reached
	// (AgentConnectionFailed).
	AgentConnectionLost
	// VersionMismatch: the agent reported (CLEAN_)VERSION_MISMATCH.
	VersionMismatch
	// StepFailed: the step raised, returned an invalid value, or the
	// agent reported FAILED.
	StepFailed
	// RebootRequested: the agent finished a step flagged
	// reboot_requested.
	RebootRequested
	// AgentRebooted: after a reboot for a step, the agent heartbeated
	// freshly booted.
	AgentRebooted
	// AbortRequested: the user asked to abort the run.
	AbortRequested
)

var outcomeNames = map[OutcomeKind]string{
	StepDone: "step done", StepWaiting: "step waiting", AgentBusy: "agent busy",
	AgentConnectionLost: "agent connection lost", VersionMismatch: "version mismatch",
	StepFailed: "step failed", RebootRequested: "reboot requested", AgentRebooted: "agent rebooted",
	AbortRequested: "abort requested",
}

func (o OutcomeKind) String() string {
	if n, ok := outcomeNames[o]; ok {
		return n
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Outcome is what the conductor observed after running, or waiting on,
// the current step.
type Outcome struct {
	Kind OutcomeKind
	// Node identifies the node in failure messages.
	Node string
	// Err is the failure text for StepFailed and AgentConnectionLost.
	// It must not hold secrets.
	Err string
	// FromAgent marks a StepFailed reported by the agent (FAILED
	// command status), which Ironic words differently.
	FromAgent bool
	// AgentStatus is set on a StepFailed for a command status the agent
	// should not report; the message names it.
	AgentStatus string
	// AgentURLMissing marks an AgentConnectionLost during a deploy
	// before the agent recorded its URL: the agent is still booting.
	AgentURLMissing bool
}

// ActionKind says what the conductor does next.
type ActionKind int

// The actions Decide, Continue and Enter return.
const (
	// RunStep: execute Action.Step (index Action.Index) through its
	// interface, then report the outcome.
	RunStep ActionKind = iota + 1
	// PowerOn, PowerOff and PowerReboot: the reserved step of that name;
	// the conductor runs the power action itself and reports StepDone.
	PowerOn
	PowerOff
	PowerReboot
	// Hold: fire "hold"; the node waits in <kind> hold until unhold, after
	// which the conductor calls Continue.
	Hold
	// Sleep: the reserved wait step with seconds: fire "wait", sleep
	// Action.Seconds, fire "resume", then report StepDone.
	Sleep
	// Wait: fire "wait" (keeping the target) and do nothing until a
	// heartbeat or a continue call.
	Wait
	// RebootToFinishStep: re-prepare the ramdisk boot, reboot the node and
	// wait; the Reboot flag is set in Action.Progress.
	RebootToFinishStep
	// RefreshAndRestart: refresh the agent's steps, plan the run again
	// and start it from the first step (automated clean after a version
	// mismatch).
	RefreshAndRestart
	// RefreshAndRerun: refresh the agent's steps and call Continue, which
	// re-runs the current step (manual clean, deploy, service after a
	// version mismatch).
	RefreshAndRerun
	// Finish: no step is left; clear the current step, wipe the progress
	// (Wipe), tear down the ramdisk and fire "done" (manual clean:
	// "manage").
	Finish
	// Fail: run the error handler with Action.Message; for clean,
	// Action.Maintenance and Action.Fault say to set maintenance.
	Fail
	// Abort: abort the run now.
	Abort
	// AbortAfterStep: persist Action.Progress (its current step now carries
	// AbortAfter); the step keeps running and the run is aborted when it
	// finishes.
	AbortAfterStep
)

var actionNames = map[ActionKind]string{
	RunStep: "run step", PowerOn: "power on", PowerOff: "power off", PowerReboot: "reboot",
	Hold: "hold", Sleep: "sleep", Wait: "wait", RebootToFinishStep: "reboot to finish step",
	RefreshAndRestart: "refresh steps and restart", RefreshAndRerun: "refresh steps and re-run",
	Finish: "finish", Fail: "fail", Abort: "abort", AbortAfterStep: "abort after step",
}

func (a ActionKind) String() string {
	if n, ok := actionNames[a]; ok {
		return n
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Action is the decision: what to do, and the progress to persist before
// doing it.
type Action struct {
	Kind ActionKind
	// Index and Step are the step concerned (for RunStep, the power
	// actions, Hold, Sleep and Wait entered on a reserved step).
	Index int
	Step  Step
	// Seconds is how long a Sleep lasts, already capped.
	Seconds int
	// Warning is set when a wait step asked for more than the maximum;
	// Ironic records it in the node history.
	Warning string
	// Message explains Fail and Abort.
	Message string
	// Maintenance and Fault are set on a failed clean step: the node goes
	// to maintenance with fault "clean failure".
	Maintenance bool
	Fault       string
	// Progress is the progress to store.
	Progress Progress
}

// Start returns the first action of a run planned with p's Plan: the
// first step, or Finish for an empty plan.
func (p *Planner) Start(prog Progress) Action {
	prog = prog.clone()
	prog.Current = nil
	prog.Index = nil
	prog.SkipCurrentStep = nil
	return p.enter(prog, 0)
}

// Continue is Ironic's continue_node_<kind>: it pops the skip flag and
// enters the next step — index 0 when no step ran yet, the current index
// again when the flag was false, the following one otherwise. When the
// current step carries AbortAfter and steps remain, it aborts instead.
func (p *Planner) Continue(prog Progress) Action {
	return p.cont(prog.clone())
}

// cont is Continue on a progress the caller owns.
func (p *Planner) cont(prog Progress) Action {
	skip := true
	if prog.SkipCurrentStep != nil {
		skip = *prog.SkipCurrentStep
		prog.SkipCurrentStep = nil
	}
	if prog.Current == nil || prog.Current.IsZero() {
		return p.enter(prog, 0)
	}
	next := -1
	if prog.Index != nil {
		next = *prog.Index
		if skip {
			next++
		}
		if next >= len(prog.Steps) {
			next = -1
		}
	}
	if prog.Current.AbortAfter && next >= 0 {
		return Action{Kind: Abort, Index: *prog.Index, Step: prog.Current.clone(), Progress: prog,
			Message: fmt.Sprintf("%s step %s was marked to abort after it completed; aborting", prog.Kind, prog.Current.Name)}
	}
	if next < 0 {
		return finish(prog)
	}
	return p.enter(prog, next)
}

// Enter makes step i current (clearing a stale polling flag) and returns
// how to run it: RunStep for a driver step, the matching action for a
// reserved step, Finish when i is past the end.
func (p *Planner) Enter(prog Progress, i int) Action {
	return p.enter(prog.clone(), i)
}

// enter is Enter on a progress the caller owns.
func (p *Planner) enter(prog Progress, i int) Action {
	if i < 0 || i >= len(prog.Steps) {
		return finish(prog)
	}
	s := prog.Steps[i].clone()
	cur := s.clone()
	idx := i
	prog.Current, prog.Index, prog.Polling = &cur, &idx, false
	a := Action{Index: i, Step: s, Progress: prog}
	switch s.Name {
	case StepPowerOn:
		a.Kind = PowerOn
	case StepPowerOff:
		a.Kind = PowerOff
	case StepReboot:
		a.Kind = PowerReboot
	case StepHold:
		a.Kind = Hold
	case StepWait:
		raw, has := s.Args["seconds"]
		if !has {
			a.Kind = Wait
			return a
		}
		secs, ok := waitSeconds(raw)
		if !ok {
			a.Kind = Fail
			a.Message = fmt.Sprintf("%s step wait: argument seconds must be a non-negative integer, got %s", prog.Kind, reprValue(raw))
			a.Maintenance, a.Fault = failMaintenance(prog)
			return a
		}
		a.Kind, a.Seconds = Sleep, secs
		if maxWait := p.cfg.maxWait(); secs > maxWait {
			a.Seconds = maxWait
			a.Warning = fmt.Sprintf("A wait time exceeding the configured maximum has been requested: %d seconds requested, holding for %d.", secs, maxWait)
		}
	default:
		a.Kind = RunStep
	}
	return a
}

// Decide returns what to do after outcome o of the current step. It does
// not modify prog; the returned progress may share argument maps with it.
func (p *Planner) Decide(prog Progress, o Outcome) Action {
	prog = prog.clone()
	here := func(kind ActionKind) Action {
		a := Action{Kind: kind, Progress: prog}
		if prog.Index != nil {
			a.Index = *prog.Index
		}
		if prog.Current != nil {
			a.Step = prog.Current.clone()
		}
		return a
	}
	retrySame := func() Action {
		f := false
		prog.SkipCurrentStep = &f
		return here(Wait)
	}
	switch o.Kind {
	case StepDone:
		return p.cont(prog)
	case StepWaiting:
		return here(Wait)
	case AgentBusy:
		return retrySame()
	case AgentConnectionLost:
		if prog.Reboot || (prog.Kind == Deploy && o.AgentURLMissing) {
			return retrySame()
		}
		return p.fail(prog, here, o)
	case VersionMismatch:
		if prog.Kind == Clean && !prog.Manual {
			prog.Current, prog.Index, prog.SkipCurrentStep = nil, nil, nil
			prog.Reboot, prog.Polling = false, false
			return here(RefreshAndRestart)
		}
		f := false
		prog.SkipCurrentStep = &f
		return here(RefreshAndRerun)
	case StepFailed:
		return p.fail(prog, here, o)
	case RebootRequested:
		prog.Reboot = true
		return here(RebootToFinishStep)
	case AgentRebooted:
		prog.Reboot = false
		return p.cont(prog)
	case AbortRequested:
		if prog.Current == nil || prog.Current.Abortable {
			a := here(Abort)
			a.Message = fmt.Sprintf("%s aborted by request", prog.Kind)
			return a
		}
		prog.Current.AbortAfter = true
		if prog.Index != nil && *prog.Index < len(prog.Steps) {
			prog.Steps[*prog.Index].AbortAfter = true
		}
		a := here(AbortAfterStep)
		a.Message = fmt.Sprintf("%s step %s is not abortable; the %s will be aborted after it completes", prog.Kind, prog.Current.Name, prog.Kind)
		return a
	}
	a := here(Fail)
	a.Message = fmt.Sprintf("steps: unknown outcome %v", o.Kind)
	return a
}

func (p *Planner) fail(prog Progress, here func(ActionKind) Action, o Outcome) Action {
	a := here(Fail)
	step := "{}"
	if prog.Current != nil {
		step = stepRepr(*prog.Current)
	}
	switch {
	case o.FromAgent && o.AgentStatus != "":
		a.Message = fmt.Sprintf("Agent returned unknown status for %s step %s on node %s : %s.", prog.Kind, step, o.Node, o.AgentStatus)
	case o.FromAgent:
		a.Message = fmt.Sprintf("Agent returned error for %s step %s on node %s : %s.", prog.Kind, step, o.Node, o.Err)
	case prog.Kind == Deploy:
		a.Message = fmt.Sprintf("Deploy step %s failed on node %s. %s", step, o.Node, o.Err)
	default:
		a.Message = fmt.Sprintf("Node %s failed step %s: %s", o.Node, step, o.Err)
	}
	a.Maintenance, a.Fault = failMaintenance(prog)
	return a
}

// failMaintenance says whether a failure puts the node in maintenance:
// Ironic does so, with fault "clean failure", when a clean step ran.
func failMaintenance(prog Progress) (bool, string) {
	if prog.Kind == Clean && prog.Current != nil && !prog.Current.IsZero() {
		return true, "clean failure"
	}
	return false, ""
}

func finish(prog Progress) Action {
	done := Progress{Kind: prog.Kind, Manual: prog.Manual, Steps: []Step{}}
	return Action{Kind: Finish, Index: len(prog.Steps), Progress: done}
}

// waitSeconds reads the seconds argument of a wait step: a non-negative
// integer, or a string holding one (Ironic applies int()).
func waitSeconds(v any) (int, bool) {
	if n, ok := v.(json.Number); ok {
		// A number float64 would change (10.0, 1e1): Ironic's int() of
		// the float Python read.
		f, err := n.Float64()
		if err != nil {
			return 0, false
		}
		v = f
	}
	switch t := v.(type) {
	case float64:
		if t < 0 || t != math.Trunc(t) || t > math.MaxInt32 {
			return 0, false
		}
		return int(t), true
	case int:
		return t, t >= 0
	case int64:
		return int(t), t >= 0 && t <= math.MaxInt32
	case string:
		n, err := strconv.Atoi(t)
		return n, err == nil && n >= 0
	}
	return 0, false
}

func reprValue(v any) string {
	var b strings.Builder
	writePyRepr(&b, v)
	return b.String()
}

// stepRepr renders a stored step as Ironic's messages show the step
// dictionary.
func stepRepr(s Step) string {
	var b strings.Builder
	b.WriteString("{'interface': ")
	writePyRepr(&b, s.Interface)
	b.WriteString(", 'step': ")
	writePyRepr(&b, s.Name)
	if s.Args != nil {
		b.WriteString(", 'args': ")
		writePyRepr(&b, s.Args)
	}
	b.WriteString(", 'priority': ")
	b.WriteString(strconv.Itoa(s.Priority))
	b.WriteString("}")
	return b.String()
}

// clone copies p so that the decision functions can change it without
// touching their input. Step lists are copied shallowly: argument maps are
// never modified here, so the copy may share them with p.
func (p Progress) clone() Progress {
	c := p
	if p.Steps != nil {
		c.Steps = append([]Step(nil), p.Steps...)
	}
	if p.UserSteps != nil {
		c.UserSteps = append([]Step(nil), p.UserSteps...)
	}
	if p.Index != nil {
		i := *p.Index
		c.Index = &i
	}
	if p.Current != nil {
		s := p.Current.clone()
		c.Current = &s
	}
	if p.SkipCurrentStep != nil {
		b := *p.SkipCurrentStep
		c.SkipCurrentStep = &b
	}
	return c
}
