package statemachine

import "slices"

// Verb is a provision verb: the "target" of Ironic's
// PUT /v1/nodes/{node}/states/provision request.
type Verb string

// The provision verbs of Ironic's API. VerbDeploy is an alias of VerbActive
// and VerbUndeploy an alias of VerbDeleted; there is no hold verb (holding
// only happens through a step named hold).
const (
	VerbActive   Verb = "active"
	VerbDeploy   Verb = "deploy"
	VerbRebuild  Verb = "rebuild"
	VerbDeleted  Verb = "deleted"
	VerbUndeploy Verb = "undeploy"
	VerbManage   Verb = "manage"
	VerbProvide  Verb = "provide"
	VerbInspect  Verb = "inspect"
	VerbClean    Verb = "clean"
	VerbService  Verb = "service"
	VerbAbort    Verb = "abort"
	VerbAdopt    Verb = "adopt"
	VerbRescue   Verb = "rescue"
	VerbUnrescue Verb = "unrescue"
	VerbUnhold   Verb = "unhold"
)

// VerbSpec describes one provision verb.
type VerbSpec struct {
	// Verb is the verb's exact string.
	Verb Verb `json:"verb"`
	// Event is the machine event the verb raises.
	Event Event `json:"event"`
	// AliasOf names the verb this one is an alias of, if any.
	AliasOf Verb `json:"alias_of,omitempty"`
	// MinMicroversion is the minor part of the first API microversion
	// (1.x) that accepts the verb; 0 means every version.
	MinMicroversion int `json:"min_microversion"`
	// StepsField names the request field holding the steps the verb
	// requires ("clean_steps", "service_steps"); a runbook may stand in
	// for them. Empty when the verb needs no steps.
	StepsField string `json:"steps_field,omitempty"`
	// NeedsRescuePassword is true when the verb requires a non-empty
	// rescue_password.
	NeedsRescuePassword bool `json:"needs_rescue_password,omitempty"`
	// ExplicitTarget is the target the conductor passes when it processes
	// the verb's event (Move.ExplicitTarget): manual clean aims at
	// manageable rather than cleaning's default, available.
	ExplicitTarget State `json:"explicit_target,omitempty"`
}

// verbTable returns the verb table in the order of Ironic's API reference,
// as a fresh array value so that no caller can change it.
func verbTable() [15]VerbSpec {
	return [...]VerbSpec{
		{Verb: VerbActive, Event: EventDeploy},
		{Verb: VerbDeploy, Event: EventDeploy, AliasOf: VerbActive, MinMicroversion: 73},
		{Verb: VerbRebuild, Event: EventRebuild},
		{Verb: VerbDeleted, Event: EventDelete},
		{Verb: VerbUndeploy, Event: EventDelete, AliasOf: VerbDeleted, MinMicroversion: 73},
		{Verb: VerbManage, Event: EventManage, MinMicroversion: 4},
		{Verb: VerbProvide, Event: EventProvide, MinMicroversion: 4},
		{Verb: VerbInspect, Event: EventInspect, MinMicroversion: 6},
		{Verb: VerbClean, Event: EventClean, MinMicroversion: 15, StepsField: "clean_steps", ExplicitTarget: Manageable},
		{Verb: VerbService, Event: EventService, MinMicroversion: 87, StepsField: "service_steps"},
		{Verb: VerbAbort, Event: EventAbort, MinMicroversion: 13},
		{Verb: VerbAdopt, Event: EventAdopt, MinMicroversion: 17},
		{Verb: VerbRescue, Event: EventRescue, MinMicroversion: 38, NeedsRescuePassword: true},
		{Verb: VerbUnrescue, Event: EventUnrescue, MinMicroversion: 38},
		{Verb: VerbUnhold, Event: EventUnhold, MinMicroversion: 85},
	}
}

// Verbs returns the specification of every provision verb, aliases
// included, in the order of Ironic's API reference. The caller owns the
// slice.
func Verbs() []VerbSpec {
	t := verbTable()
	return slices.Clone(t[:])
}

// ParseVerb returns the verb named s. Aliases are accepted and kept as
// given (ParseVerb("undeploy") is VerbUndeploy); Canonical and Event map
// them. An unknown string is a *VerbError (errors.Is ErrUnknownVerb)
// listing the accepted verbs.
func ParseVerb(s string) (Verb, error) {
	v := Verb(s)
	if _, ok := v.Spec(); !ok {
		return "", &VerbError{Verb: s}
	}
	return v, nil
}

// Spec returns the verb's specification and whether the verb is known.
func (v Verb) Spec() (VerbSpec, bool) {
	for _, spec := range verbTable() {
		if spec.Verb == v {
			return spec, true
		}
	}
	return VerbSpec{}, false
}

// Event returns the machine event the verb raises, or "" for an unknown
// verb.
func (v Verb) Event() Event {
	spec, _ := v.Spec()
	return spec.Event
}

// Canonical returns the verb an alias stands for (deploy gives active,
// undeploy gives deleted) and any other verb unchanged.
func (v Verb) Canonical() Verb {
	if spec, ok := v.Spec(); ok && spec.AliasOf != "" {
		return spec.AliasOf
	}
	return v
}

// VerbInput is the part of a provision request a verb may require.
type VerbInput struct {
	// Steps is the number of steps in the request's clean_steps or
	// service_steps.
	Steps int
	// Runbook names a runbook given instead of steps.
	Runbook string
	// RescuePassword is the request's rescue_password. It is a secret:
	// Validate never puts it in an error.
	RescuePassword string
}

// Validate checks that in holds what the verb requires: clean and service
// need steps or a runbook, rescue needs a non-empty password. A missing
// input is an *InputError (errors.Is ErrMissingInput) naming the field; an
// unknown verb is a *VerbError.
func (v Verb) Validate(in VerbInput) error {
	spec, ok := v.Spec()
	if !ok {
		return &VerbError{Verb: string(v)}
	}
	if spec.StepsField != "" && in.Steps == 0 && in.Runbook == "" {
		return &InputError{Verb: v, Field: spec.StepsField, Expected: "a non-empty list of steps, or a runbook"}
	}
	if spec.NeedsRescuePassword && in.RescuePassword == "" {
		return &InputError{Verb: v, Field: "rescue_password", Expected: "a non-empty password"}
	}
	return nil
}
