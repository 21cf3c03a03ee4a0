package steps

import (
	"fmt"
	"sort"
)

// Default and hard maximum of [conductor]max_conductor_wait_step_seconds.
const (
	DefaultMaxWaitStepSeconds = 30
	HardMaxWaitStepSeconds    = 1800
)

// Config is the operator configuration the planner and the decision
// function follow. The zero value is Ironic's defaults.
type Config struct {
	// CleanPriorityOverrides is [conductor]clean_step_priority_override:
	// "interface.step" → priority. The value replaces the declared
	// priority of driver and agent steps; 0 disables the step for
	// automated cleaning, and a manual clean copies the overridden
	// priority, 0 included.
	CleanPriorityOverrides map[string]int `json:"clean_priority_overrides,omitempty"`
	// VerifyPriorityOverrides is [conductor]verify_step_priority_override.
	VerifyPriorityOverrides map[string]int `json:"verify_priority_overrides,omitempty"`
	// DisallowCleanSteps, DisallowDeploySteps and DisallowServiceSteps are
	// [api]disallow_<kind>_steps: "interface.step" keys users may not
	// request; automated, runbook and template steps on them are dropped.
	DisallowCleanSteps   []string `json:"disallow_clean_steps,omitempty"`
	DisallowDeploySteps  []string `json:"disallow_deploy_steps,omitempty"`
	DisallowServiceSteps []string `json:"disallow_service_steps,omitempty"`
	// DisableAutomatedClean is the negation of [conductor]automated_clean
	// (default true): nodes whose own automated_clean is unset skip
	// automated cleaning when it is set.
	DisableAutomatedClean bool `json:"disable_automated_clean,omitempty"`
	// MaxWaitStepSeconds is [conductor]max_conductor_wait_step_seconds;
	// 0 means the default, 30. At most 1800.
	MaxWaitStepSeconds int `json:"max_wait_step_seconds,omitempty"`
}

func (c Config) disallowed(kind Kind) []string {
	switch kind {
	case Clean:
		return c.DisallowCleanSteps
	case Deploy:
		return c.DisallowDeploySteps
	case Service:
		return c.DisallowServiceSteps
	}
	return nil
}

func (c Config) maxWait() int {
	if c.MaxWaitStepSeconds == 0 {
		return DefaultMaxWaitStepSeconds
	}
	return c.MaxWaitStepSeconds
}

// Planner computes step plans and decides what a conductor does next. It
// is an immutable value, safe for concurrent use.
type Planner struct {
	cfg     Config
	ignored []IgnoredKey
}

// IgnoredKey is a priority override entry the planner ignores because no
// step can ever have its key: the key is not "interface.step", or its
// interface contributes no steps of the option's kind (boot.x for
// clean_step_priority_override). Ironic keeps such entries in its option
// and they simply never match; the planner drops them and reports them so
// the conductor can warn about a misspelt key instead of losing the rest.
type IgnoredKey struct {
	// Option is the option the key came from,
	// "clean_step_priority_override" or "verify_step_priority_override".
	Option string `json:"option"`
	// Key is the key as configured.
	Key string `json:"key"`
	// Reason says why no step matches it.
	Reason string `json:"reason"`
}

// NewPlanner checks cfg and returns a planner following it. Priority
// override keys that no step can match (see IgnoredKey) are dropped and
// listed by Planner.Ignored; they do not make cfg invalid. Disallow keys
// must be "interface.step" with an interface of the right kind, and
// MaxWaitStepSeconds must lie in [0, 1800]; otherwise NewPlanner fails
// with ErrInvalidConfig.
func NewPlanner(cfg Config) (*Planner, error) {
	bad := func(format string, a ...any) (*Planner, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	keyProblem := func(kind Kind, k string) string {
		iface, _, ok := splitKey(k)
		if !ok {
			return `want "interface.step"`
		}
		if _, ok := kind.InterfacePriority(iface); !ok {
			return fmt.Sprintf("interface %q has no %s steps", iface, kind)
		}
		return ""
	}
	for kind, list := range map[Kind][]string{Clean: cfg.DisallowCleanSteps, Deploy: cfg.DisallowDeploySteps, Service: cfg.DisallowServiceSteps} {
		for _, k := range list {
			if problem := keyProblem(kind, k); problem != "" {
				return bad("disallow_%s_steps: key %q: %s", kind, k, problem)
			}
		}
	}
	if cfg.MaxWaitStepSeconds < 0 || cfg.MaxWaitStepSeconds > HardMaxWaitStepSeconds {
		return bad("max_conductor_wait_step_seconds: %d is outside [0, %d]", cfg.MaxWaitStepSeconds, HardMaxWaitStepSeconds)
	}
	p := &Planner{}
	usable := func(option string, kind Kind, m map[string]int) map[string]int {
		if m == nil {
			return nil
		}
		out := make(map[string]int, len(m))
		for _, k := range mapKeys(m) {
			if problem := keyProblem(kind, k); problem != "" {
				p.ignored = append(p.ignored, IgnoredKey{Option: option, Key: k, Reason: problem})
				continue
			}
			out[k] = m[k]
		}
		return out
	}
	c := cfg
	c.CleanPriorityOverrides = usable("clean_step_priority_override", Clean, cfg.CleanPriorityOverrides)
	c.VerifyPriorityOverrides = usable("verify_step_priority_override", Verify, cfg.VerifyPriorityOverrides)
	c.DisallowCleanSteps = append([]string(nil), cfg.DisallowCleanSteps...)
	c.DisallowDeploySteps = append([]string(nil), cfg.DisallowDeploySteps...)
	c.DisallowServiceSteps = append([]string(nil), cfg.DisallowServiceSteps...)
	p.cfg = c
	return p, nil
}

// Ignored returns the priority override keys NewPlanner dropped, ordered
// by option and key; nil when every key is usable.
func (p *Planner) Ignored() []IgnoredKey {
	return append([]IgnoredKey(nil), p.ignored...)
}

// Config returns a copy of the planner's configuration, without the
// ignored override keys.
func (p *Planner) Config() Config {
	c := p.cfg
	c.CleanPriorityOverrides = copyIntMap(p.cfg.CleanPriorityOverrides)
	c.VerifyPriorityOverrides = copyIntMap(p.cfg.VerifyPriorityOverrides)
	return c
}

func mapKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func copyIntMap(m map[string]int) map[string]int {
	if m == nil {
		return nil
	}
	c := make(map[string]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Plan is the outcome of planning: the ordered steps to run and the flags
// the conductor stores with them.
type Plan struct {
	Kind Kind `json:"kind"`
	// Skip is set when automated cleaning is disabled for the node: the
	// conductor fires "done" at once.
	Skip bool `json:"skip,omitempty"`
	// Steps is the list to store in driver_internal_info.<kind>_steps.
	Steps []Step `json:"steps"`
	// Manual marks a manual clean (target manageable).
	Manual bool `json:"manual,omitempty"`
	// DisableRamdisk is the <kind>_disable_ramdisk flag.
	DisableRamdisk bool `json:"disable_ramdisk,omitempty"`
	// Declarative marks automated cleaning from a runbook
	// (declarative_cleaning).
	Declarative bool `json:"declarative,omitempty"`
	// NeedsRamdisk reports whether any step needs the agent; a manual
	// clean or service with no such step can skip booting it.
	NeedsRamdisk bool `json:"needs_ramdisk,omitempty"`
	// UserSteps are the deploy steps the user passed, kept as
	// user_deploy_steps for re-validation.
	UserSteps []Step `json:"user_steps,omitempty"`
	// StepsValidated is false when unknown steps were skipped (SkipMissing)
	// and must be validated again once the agent reported its steps.
	StepsValidated bool `json:"steps_validated,omitempty"`
	// Skipped lists user or template steps not known yet (SkipMissing).
	Skipped []Step `json:"skipped,omitempty"`
}

// Progress returns the initial progress for the plan: the steps stored,
// no current step and a null index.
func (pl Plan) Progress() Progress {
	return Progress{
		Kind:           pl.Kind,
		Steps:          cloneSteps(pl.Steps),
		Manual:         pl.Manual,
		DisableRamdisk: pl.DisableRamdisk,
		Declarative:    pl.Declarative,
		UserSteps:      cloneSteps(pl.UserSteps),
		StepsValidated: pl.StepsValidated,
	}
}

// Runbook is a named, ordered list of clean steps used for automated
// cleaning instead of the driver's priorities.
type Runbook struct {
	Name           string `json:"name"`
	Steps          []Step `json:"steps"`
	DisableRamdisk bool   `json:"disable_ramdisk,omitempty"`
}

// AutomatedCleanRequest describes one node's automated cleaning.
type AutomatedCleanRequest struct {
	Source Source `json:"source"`
	// NodeAutomatedClean is the node's automated_clean field: true runs,
	// false skips, nil follows the configuration.
	NodeAutomatedClean *bool `json:"node_automated_clean,omitempty"`
	// Runbook, when set, replaces the driver's enabled steps (the
	// conductor resolved [conductor]automated_cleaning_step_source).
	Runbook *Runbook `json:"runbook,omitempty"`
}

// AutomatedClean plans automated cleaning: every step of every interface
// and the agent with a priority other than 0 after overrides, sorted, with
// disallowed steps dropped; or the runbook's steps in its order,
// validated like user steps; or a skip when automated cleaning is off for
// the node.
func (p *Planner) AutomatedClean(req AutomatedCleanRequest) (Plan, error) {
	enabled := !p.cfg.DisableAutomatedClean
	if req.NodeAutomatedClean != nil {
		enabled = *req.NodeAutomatedClean
	}
	if !enabled {
		return Plan{Kind: Clean, Skip: true, Steps: []Step{}}, nil
	}
	if req.Runbook != nil {
		all := Gather(Clean, req.Source, GatherOptions{Overrides: p.cfg.CleanPriorityOverrides})
		res, problems := validateUserSteps(Clean, req.Runbook.Steps, all, ValidateOptions{
			Origin: OriginRunbook, DisableRamdisk: req.Runbook.DisableRamdisk})
		if len(problems) > 0 {
			return Plan{}, &ValidationError{Kind: Clean, Problems: problems}
		}
		steps := filterDisallowed(res.Steps, p.cfg.DisallowCleanSteps)
		return Plan{Kind: Clean, Steps: steps, Declarative: true, DisableRamdisk: req.Runbook.DisableRamdisk,
			NeedsRamdisk: res.NeedsRamdisk}, nil
	}
	steps := Gather(Clean, req.Source, GatherOptions{EnabledOnly: true, Sorted: true, Overrides: p.cfg.CleanPriorityOverrides})
	steps = filterDisallowed(steps, p.cfg.DisallowCleanSteps)
	needs := false
	for _, s := range steps {
		needs = needs || s.RequiresRamdisk
	}
	return Plan{Kind: Clean, Steps: nonNil(steps), NeedsRamdisk: needs}, nil
}

// ManualRequest describes a manual clean or a service request.
type ManualRequest struct {
	Source Source `json:"source"`
	// Steps are the user's steps, typically from ParseUserSteps.
	Steps []Step `json:"steps"`
	// DisableRamdisk asks to run without booting the agent.
	DisableRamdisk bool `json:"disable_ramdisk,omitempty"`
	// SkipMissing drops steps not known yet instead of refusing them, for
	// early validation before the agent reported its in-band steps.
	SkipMissing bool `json:"skip_missing,omitempty"`
}

// ManualClean validates a manual clean request: exactly the user's steps
// in the user's order, each of which must exist among all the node's
// clean steps (priority 0 included), with the driver's priority and
// abortable flag copied in.
func (p *Planner) ManualClean(req ManualRequest) (Plan, error) {
	pl, err := p.userPlan(Clean, req)
	pl.Manual = true
	return pl, err
}

// Service validates a service request, like ManualClean for service steps.
func (p *Planner) Service(req ManualRequest) (Plan, error) {
	return p.userPlan(Service, req)
}

func (p *Planner) userPlan(kind Kind, req ManualRequest) (Plan, error) {
	opts := GatherOptions{}
	if kind == Clean {
		opts.Overrides = p.cfg.CleanPriorityOverrides
	}
	all := Gather(kind, req.Source, opts)
	res, problems := validateUserSteps(kind, req.Steps, all, ValidateOptions{
		DisableRamdisk: req.DisableRamdisk, SkipMissing: req.SkipMissing, Disallowed: p.cfg.disallowed(kind)})
	if len(problems) > 0 {
		return Plan{Kind: kind}, &ValidationError{Kind: kind, Problems: problems}
	}
	return Plan{Kind: kind, Steps: nonNil(res.Steps), DisableRamdisk: req.DisableRamdisk,
		NeedsRamdisk: res.NeedsRamdisk, Skipped: res.Skipped}, nil
}

// Template is a deploy template: a trait name and the deploy steps it
// adds when a node is deployed with that trait.
type Template struct {
	Name  string `json:"name"`
	Steps []Step `json:"steps"`
}

// DeployRequest describes a deployment.
type DeployRequest struct {
	Source Source `json:"source"`
	// UserSteps are the deploy_steps passed to the deploy verb.
	UserSteps []Step `json:"user_steps,omitempty"`
	// Templates are the deploy templates known; those whose name is one
	// of InstanceTraits apply, in this order.
	Templates []Template `json:"templates,omitempty"`
	// InstanceTraits is instance_info.traits.
	InstanceTraits []string `json:"instance_traits,omitempty"`
	// SkipMissing drops user and template steps not known yet (in-band
	// steps before the agent booted); Plan.StepsValidated is then false.
	SkipMissing bool `json:"skip_missing,omitempty"`
}

// MatchTemplates returns the templates whose name is one of traits, in
// the order of templates.
func MatchTemplates(templates []Template, traits []string) []Template {
	var out []Template
	for _, t := range templates {
		if containsString(traits, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// Deploy composes the deploy step list: the user's steps, then the steps
// of matching templates not already given by the user, then the driver's
// enabled steps not overridden by either; user and template steps with
// priority 0 disable the driver step and are dropped; the result is
// sorted and disallowed steps filtered out. User steps on the disallow
// list are refused. Validation problems of user and template steps come
// back together in one *ValidationError; an empty result is a
// *NoDeployStepsError.
func (p *Planner) Deploy(req DeployRequest) (Plan, error) {
	all := Gather(Deploy, req.Source, GatherOptions{})
	userRes, problems := validateUserSteps(Deploy, req.UserSteps, all, ValidateOptions{
		Origin: OriginUser, SkipMissing: req.SkipMissing, Disallowed: p.cfg.DisallowDeploySteps})
	matched := MatchTemplates(req.Templates, req.InstanceTraits)
	var tmplSteps []Step
	names := make([]string, len(matched))
	for i, t := range matched {
		names[i] = t.Name
		for _, s := range t.Steps {
			tmplSteps = append(tmplSteps, Step{Interface: s.Interface, Name: s.Name, Args: s.Args, Priority: s.Priority})
		}
	}
	tmplRes, tmplProblems := validateUserSteps(Deploy, tmplSteps, all, ValidateOptions{
		Origin: OriginTemplate, SkipMissing: req.SkipMissing})
	problems = append(problems, tmplProblems...)
	if len(problems) > 0 {
		return Plan{Kind: Deploy}, &ValidationError{Kind: Deploy, Problems: problems, Templates: names}
	}
	requested := append([]Step(nil), userRes.Steps...)
	for _, s := range tmplRes.Steps {
		if findStep(requested, s.Interface, s.Name) < 0 {
			requested = append(requested, s)
		}
	}
	driver := Gather(Deploy, req.Source, GatherOptions{EnabledOnly: true})
	var steps, disabled []Step
	for _, s := range driver {
		if i := findStep(requested, s.Interface, s.Name); i >= 0 {
			if requested[i].Priority <= 0 {
				disabled = append(disabled, s)
			}
			continue
		}
		steps = append(steps, s)
	}
	for _, s := range requested {
		if s.Priority > 0 {
			steps = append(steps, s)
		}
	}
	sortSteps(Deploy, steps)
	steps = filterDisallowed(steps, p.cfg.DisallowDeploySteps)
	if len(steps) == 0 {
		keys := make([]string, len(disabled))
		for i, s := range disabled {
			keys[i] = s.Key()
		}
		return Plan{Kind: Deploy}, &NoDeployStepsError{Disabled: keys}
	}
	return Plan{
		Kind:           Deploy,
		Steps:          steps,
		UserSteps:      cloneSteps(req.UserSteps),
		StepsValidated: len(userRes.Skipped) == 0 && len(tmplRes.Skipped) == 0,
		Skipped:        append(userRes.Skipped, tmplRes.Skipped...),
	}, nil
}

// Verify returns the verify steps to run: every enabled verify step after
// [conductor]verify_step_priority_override, sorted with the verify
// tie-break table.
func (p *Planner) Verify(src Source) Plan {
	steps := Gather(Verify, src, GatherOptions{EnabledOnly: true, Sorted: true, Overrides: p.cfg.VerifyPriorityOverrides})
	return Plan{Kind: Verify, Steps: nonNil(steps)}
}

func filterDisallowed(list []Step, disallowed []string) []Step {
	if len(disallowed) == 0 {
		return list
	}
	out := list[:0:0]
	for _, s := range list {
		if !containsString(disallowed, s.Key()) {
			out = append(out, s)
		}
	}
	return out
}

func nonNil(list []Step) []Step {
	if list == nil {
		return []Step{}
	}
	return list
}
