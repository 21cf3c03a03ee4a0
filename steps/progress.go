package steps

import (
	"encoding/json"
	"fmt"

	"github.com/anvilmetal/anvil/internal/jsonexact"
)

// ProgressKeys are the driver_internal_info keys Ironic keeps for one
// kind of step run (§3.5). Empty fields do not exist for the kind.
type ProgressKeys struct {
	Steps           string // the ordered list
	Index           string // index of the current step (null before the first)
	Reboot          string // the node is rebooting for the current step
	SkipCurrentStep string // popped on continuation; false re-runs the step
	Polling         string // a driver polls the step; heartbeats do not advance
	DisableRamdisk  string // the run does not boot the agent
	Declarative     string // automated cleaning from a runbook
	UserSteps       string // the deploy_steps argument, for re-validation
	StepsValidated  string // user/template steps validated after the agent booted
	AgentCache      string // agent-reported steps, interface → list
	AgentRefreshed  string // when AgentCache was refreshed
}

// Keys returns the driver_internal_info keys of the kind, or false for
// verify, which keeps no progress.
func (k Kind) Keys() (ProgressKeys, bool) {
	switch k {
	case Clean:
		return ProgressKeys{
			Steps: "clean_steps", Index: "clean_step_index", Reboot: "cleaning_reboot",
			SkipCurrentStep: "skip_current_clean_step", Polling: "cleaning_polling",
			DisableRamdisk: "cleaning_disable_ramdisk", Declarative: "declarative_cleaning",
			AgentCache: "agent_cached_clean_steps", AgentRefreshed: "agent_cached_clean_steps_refreshed",
		}, true
	case Deploy:
		return ProgressKeys{
			Steps: "deploy_steps", Index: "deploy_step_index", Reboot: "deployment_reboot",
			SkipCurrentStep: "skip_current_deploy_step", Polling: "deployment_polling",
			UserSteps: "user_deploy_steps", StepsValidated: "steps_validated",
			AgentCache: "agent_cached_deploy_steps", AgentRefreshed: "agent_cached_deploy_steps_refreshed",
		}, true
	case Service:
		return ProgressKeys{
			Steps: "service_steps", Index: "service_step_index", Reboot: "servicing_reboot",
			SkipCurrentStep: "skip_current_service_step", Polling: "servicing_polling",
			DisableRamdisk: "service_disable_ramdisk",
			AgentCache:     "agent_cached_service_steps", AgentRefreshed: "agent_cached_service_steps_refreshed",
		}, true
	}
	return ProgressKeys{}, false
}

// HardwareManagerVersionKey is the driver_internal_info key holding the
// agent's hardware manager versions recorded when steps were fetched.
const HardwareManagerVersionKey = "hardware_manager_version"

// Progress is where one node stands in a clean, deploy or service run:
// the stored list, the index and the current step, and the flags of
// Ironic's async_steps. It is stored in driver_internal_info (see
// ReadProgress and Write) plus the node's <kind>_step column (Current), so
// any conductor can resume it.
type Progress struct {
	Kind Kind `json:"kind"`
	// Steps is the ordered plan.
	Steps []Step `json:"steps"`
	// Index is the position of Current in Steps; nil before the first step.
	Index *int `json:"index"`
	// Current is the node's <kind>_step column; nil is Ironic's {}.
	Current *Step `json:"current,omitempty"`
	// Reboot is set while the node reboots for the current step.
	Reboot bool `json:"reboot,omitempty"`
	// SkipCurrentStep is popped by Continue: nil or true moves on to the
	// next step, false re-runs the current one.
	SkipCurrentStep *bool `json:"skip_current_step,omitempty"`
	// Polling is set while a driver polls the current step itself.
	Polling bool `json:"polling,omitempty"`
	// DisableRamdisk is set when the run does not boot the agent (clean
	// and service only).
	DisableRamdisk bool `json:"disable_ramdisk,omitempty"`
	// Declarative marks automated cleaning from a runbook (clean only).
	Declarative bool `json:"declarative,omitempty"`
	// UserSteps are the user's deploy steps (deploy only).
	UserSteps []Step `json:"user_steps,omitempty"`
	// StepsValidated records that user and template deploy steps were
	// validated against the agent's steps (deploy only).
	StepsValidated bool `json:"steps_validated,omitempty"`
	// Manual marks a manual clean. Ironic derives it from the node's
	// target provision state (manageable) rather than storing it, so
	// ReadProgress leaves it false and the conductor sets it.
	Manual bool `json:"-"`
}

// ReadProgress reads the progress of a kind from a node's
// driver_internal_info and its <kind>_step column (current; nil or the
// zero step when none). Values may be what encoding/json produced
// (float64 numbers, []any, map[string]any) or Go values of the right
// shape. A key of the wrong type gives a *ProgressError naming it.
func ReadProgress(kind Kind, info map[string]any, current *Step) (Progress, error) {
	keys, ok := kind.Keys()
	if !ok {
		return Progress{}, fmt.Errorf("%w: %s steps keep no progress", ErrUnsupportedKind, kind)
	}
	p := Progress{Kind: kind}
	if current != nil && !current.IsZero() {
		c := current.clone()
		p.Current = &c
	}
	read := func(key string, out any) error {
		v, present := info[key]
		if key == "" || !present || v == nil {
			return nil
		}
		raw, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(raw, out)
		}
		if err != nil {
			return &ProgressError{Kind: kind, Key: key, Err: err}
		}
		return nil
	}
	var skip bool
	var skipPresent bool
	if v, ok := info[keys.SkipCurrentStep]; ok && v != nil {
		skipPresent = true
	}
	for _, f := range []struct {
		key string
		out any
	}{
		{keys.Steps, &p.Steps}, {keys.Index, &p.Index}, {keys.Reboot, &p.Reboot},
		{keys.SkipCurrentStep, &skip}, {keys.Polling, &p.Polling},
		{keys.DisableRamdisk, &p.DisableRamdisk}, {keys.Declarative, &p.Declarative},
		{keys.UserSteps, &p.UserSteps}, {keys.StepsValidated, &p.StepsValidated},
	} {
		if err := read(f.key, f.out); err != nil {
			return Progress{}, err
		}
	}
	if skipPresent {
		p.SkipCurrentStep = &skip
	}
	if p.Index != nil && (*p.Index < 0 || *p.Index >= len(p.Steps)) {
		return Progress{}, &ProgressError{Kind: kind, Key: keys.Index,
			Err: fmt.Errorf("index %d is outside the %d stored steps", *p.Index, len(p.Steps))}
	}
	return p, nil
}

// Write stores the progress into driver_internal_info the way Ironic
// does: the list and the index are always present (null when unset),
// flags are set when true and removed when false, and the skip flag is
// removed when nil. The node's <kind>_step column is p.Current, which the
// caller stores itself. Values written are plain JSON values ([]any,
// map[string]any, float64 numbers, json.Number for numbers float64 would
// change), so info marshals and compares like a map decoded from the
// database.
func (p Progress) Write(info map[string]any) error {
	keys, ok := p.Kind.Keys()
	if !ok {
		return fmt.Errorf("%w: %s steps keep no progress", ErrUnsupportedKind, p.Kind)
	}
	stepsValue, err := toJSONValue(nonNil(p.Steps))
	if err != nil {
		return &ProgressError{Kind: p.Kind, Key: keys.Steps, Err: err}
	}
	var userValue any
	if keys.UserSteps != "" && p.UserSteps != nil {
		if userValue, err = toJSONValue(p.UserSteps); err != nil {
			return &ProgressError{Kind: p.Kind, Key: keys.UserSteps, Err: err}
		}
	}
	info[keys.Steps] = stepsValue
	if p.Index != nil {
		info[keys.Index] = float64(*p.Index)
	} else {
		info[keys.Index] = nil
	}
	setFlag := func(key string, v bool) {
		if key == "" {
			return
		}
		if v {
			info[key] = true
		} else {
			delete(info, key)
		}
	}
	setFlag(keys.Reboot, p.Reboot)
	setFlag(keys.Polling, p.Polling)
	setFlag(keys.DisableRamdisk, p.DisableRamdisk)
	setFlag(keys.Declarative, p.Declarative)
	setFlag(keys.StepsValidated, p.StepsValidated)
	if p.SkipCurrentStep != nil {
		info[keys.SkipCurrentStep] = *p.SkipCurrentStep
	} else {
		delete(info, keys.SkipCurrentStep)
	}
	if keys.UserSteps != "" {
		if userValue != nil {
			info[keys.UserSteps] = userValue
		} else {
			delete(info, keys.UserSteps)
		}
	}
	return nil
}

// Wipe removes a finished or abandoned run from driver_internal_info, as
// Ironic's wipe_<kind>_internal_info does: the list becomes null and the
// index, flags, user steps and agent step cache are removed.
func Wipe(kind Kind, info map[string]any) error {
	keys, ok := kind.Keys()
	if !ok {
		return fmt.Errorf("%w: %s steps keep no progress", ErrUnsupportedKind, kind)
	}
	info[keys.Steps] = nil
	for _, k := range []string{keys.Index, keys.Reboot, keys.SkipCurrentStep, keys.Polling,
		keys.DisableRamdisk, keys.Declarative, keys.UserSteps, keys.StepsValidated,
		keys.AgentCache, keys.AgentRefreshed} {
		if k != "" {
			delete(info, k)
		}
	}
	return nil
}

// ReadAgentCache reads the agent-reported steps of a kind
// (agent_cached_<kind>_steps) from driver_internal_info; nil when absent.
func ReadAgentCache(kind Kind, info map[string]any) (map[string][]Step, error) {
	keys, ok := kind.Keys()
	if !ok {
		return nil, fmt.Errorf("%w: %s steps have no agent cache", ErrUnsupportedKind, kind)
	}
	v, present := info[keys.AgentCache]
	if !present || v == nil {
		return nil, nil
	}
	var out map[string][]Step
	raw, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(raw, &out)
	}
	if err != nil {
		return nil, &ProgressError{Kind: kind, Key: keys.AgentCache, Err: err}
	}
	return out, nil
}

// WriteAgentCache stores agent-reported steps (interface → list) as
// agent_cached_<kind>_steps, with refreshedAt (the caller's clock, UTC
// ISO 8601) as agent_cached_<kind>_steps_refreshed.
func WriteAgentCache(kind Kind, info map[string]any, steps map[string][]Step, refreshedAt string) error {
	keys, ok := kind.Keys()
	if !ok {
		return fmt.Errorf("%w: %s steps have no agent cache", ErrUnsupportedKind, kind)
	}
	v, err := toJSONValue(steps)
	if err != nil {
		return &ProgressError{Kind: kind, Key: keys.AgentCache, Err: err}
	}
	info[keys.AgentCache] = v
	info[keys.AgentRefreshed] = refreshedAt
	return nil
}

// toJSONValue converts a Go value to its generic JSON form, the form a
// map decoded from the database has: numbers float64 holds exactly are
// float64, the others json.Number, so step arguments are stored exactly
// (see internal/jsonexact).
func toJSONValue(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := jsonexact.Decode(raw, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// StepFromColumn decodes a node's <kind>_step column (Ironic stores {}
// when no step runs, which gives nil) for ReadProgress.
func StepFromColumn(kind Kind, col map[string]any) (*Step, error) {
	if len(col) == 0 {
		return nil, nil
	}
	var s Step
	raw, err := json.Marshal(col)
	if err == nil {
		err = json.Unmarshal(raw, &s)
	}
	if err != nil {
		return nil, &ProgressError{Kind: kind, Key: string(kind) + "_step", Err: err}
	}
	if s.IsZero() {
		return nil, nil
	}
	return &s, nil
}

// CurrentColumn returns the value to store in the node's <kind>_step
// column: the current step as a JSON object, or {} when none runs.
func (p Progress) CurrentColumn() (map[string]any, error) {
	if p.Current == nil || p.Current.IsZero() {
		return map[string]any{}, nil
	}
	v, err := toJSONValue(p.Current)
	if err != nil {
		return nil, &ProgressError{Kind: p.Kind, Key: string(p.Kind) + "_step", Err: err}
	}
	return v.(map[string]any), nil
}
