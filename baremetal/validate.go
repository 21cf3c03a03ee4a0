package baremetal

import (
	"fmt"
	"slices"
	"strings"

	"github.com/anvilmetal/anvil/steps"
)

// Bounds of the resources' fields: the widths of Ironic's columns.
const (
	// MaxAllocationTraits is the most traits an allocation may ask for,
	// placement's limit that Ironic applies to nodes too.
	MaxAllocationTraits = 50
	// MaxCandidateNodes bounds an allocation's candidate list.
	MaxCandidateNodes = 1000
	// MaxSteps bounds the steps of a deploy template or runbook.
	MaxSteps = 100
)

// checkName applies the node-name rules to another resource's name.
func checkName(kind, ident, name string) error {
	if name == "" {
		return nil
	}
	if p := nodeNameProblem(name); p != "" {
		return &InvalidFieldError{Kind: kind, Ident: ident, Field: "name", Expected: p}
	}
	return nil
}

// checkLen bounds a text field in characters (bytes for ASCII fields).
func checkLen(kind, ident, field, s string, max int) error {
	if len([]rune(s)) > max || strings.IndexByte(s, 0) >= 0 {
		return &InvalidFieldError{Kind: kind, Ident: ident, Field: field, Expected: fmt.Sprintf("at most %d characters without NUL bytes", max)}
	}
	return nil
}

func ident(uuid, name string) string {
	if uuid != "" {
		return uuid
	}
	return name
}

// Validate checks the fields of g that do not need the store: the name,
// the MAC address (when set) and the lengths of mode and
// physical_network. It does not check NodeUUID, which the store
// resolves.
func (g *Portgroup) Validate() error {
	id := ident(g.UUID, g.Name)
	if err := checkName("portgroup", id, g.Name); err != nil {
		return err
	}
	if g.Address != "" {
		if _, err := NormalizeMAC("address", g.Address); err != nil {
			return &InvalidFieldError{Kind: "portgroup", Ident: id, Field: "address", Expected: "a 48-bit MAC address such as 52:54:00:12:34:56"}
		}
	}
	if err := checkLen("portgroup", id, "mode", g.Mode, 255); err != nil {
		return err
	}
	return checkLen("portgroup", id, "physical_network", g.PhysicalNetwork, 64)
}

// Validate checks a's fields as Ironic's allocation API does: a valid
// name, a known state, a resource class of at most 80 characters
// (required unless NodeUUID is set, a backfill), at most
// MaxAllocationTraits valid trait names without repeats, and at most
// MaxCandidateNodes candidates.
func (a *Allocation) Validate() error {
	id := ident(a.UUID, a.Name)
	bad := func(field, expected string) error {
		return &InvalidFieldError{Kind: "allocation", Ident: id, Field: field, Expected: expected}
	}
	if err := checkName("allocation", id, a.Name); err != nil {
		return err
	}
	switch a.State {
	case "", AllocationAllocating, AllocationActive, AllocationError:
	default:
		return bad("state", "one of allocating, active, error")
	}
	if a.ResourceClass == "" && a.NodeUUID == "" {
		return bad("resource_class", "a resource class (required unless a node is given)")
	}
	if err := checkLen("allocation", id, "resource_class", a.ResourceClass, 80); err != nil {
		return err
	}
	if len(a.Traits) > MaxAllocationTraits {
		return bad("traits", fmt.Sprintf("at most %d traits", MaxAllocationTraits))
	}
	for i, t := range a.Traits {
		if !steps.ValidTraitName(t) {
			return bad("traits", fmt.Sprintf("valid trait names (upper-case letters, digits, underscores); item %d is not", i))
		}
		if slices.Index(a.Traits, t) != i {
			return bad("traits", "traits without repeats")
		}
	}
	if len(a.CandidateNodes) > MaxCandidateNodes {
		return bad("candidate_nodes", fmt.Sprintf("at most %d candidate nodes", MaxCandidateNodes))
	}
	for _, c := range a.CandidateNodes {
		if c == "" {
			return bad("candidate_nodes", "non-empty node identifiers")
		}
	}
	if err := checkLen("allocation", id, "owner", a.Owner, 255); err != nil {
		return err
	}
	return nil
}

func checkStep(kind, id string, i int, iface, step string, args map[string]any) error {
	// The interfaces a template or runbook step may name.
	stepInterfaces := steps.Clean.Interfaces()
	bad := func(expected string) error {
		return &InvalidFieldError{Kind: kind, Ident: id, Field: "steps", Expected: fmt.Sprintf("step %d: %s", i, expected)}
	}
	if !slices.Contains(stepInterfaces, iface) {
		return bad("an interface among " + strings.Join(stepInterfaces, ", "))
	}
	if step == "" || len(step) > 255 {
		return bad("a step name of 1 to 255 characters")
	}
	if args == nil {
		return bad("args, an object (may be empty)")
	}
	return nil
}

// Validate checks t as Ironic's deploy template API does: the name is a
// valid trait of at most 255 characters; there are 1 to MaxSteps steps,
// each with a known interface, a step name, args (an object) and a
// priority of 0 or more, no interface and step pair twice.
func (t *DeployTemplate) Validate() error {
	id := ident(t.UUID, t.Name)
	if !steps.ValidTraitName(t.Name) {
		return &InvalidFieldError{Kind: "deploy_template", Ident: id, Field: "name", Expected: "a valid trait name (upper-case letters, digits and underscores, e.g. CUSTOM_RAID1), at most 255 characters"}
	}
	if len(t.Steps) == 0 || len(t.Steps) > MaxSteps {
		return &InvalidFieldError{Kind: "deploy_template", Ident: id, Field: "steps", Expected: fmt.Sprintf("1 to %d deploy steps", MaxSteps)}
	}
	seen := map[string]bool{}
	for i, s := range t.Steps {
		if err := checkStep("deploy_template", id, i, s.Interface, s.Step, s.Args); err != nil {
			return err
		}
		if s.Priority < 0 {
			return &InvalidFieldError{Kind: "deploy_template", Ident: id, Field: "steps", Expected: fmt.Sprintf("step %d: a priority of 0 or more", i)}
		}
		key := s.Interface + "." + s.Step
		if seen[key] {
			return &InvalidFieldError{Kind: "deploy_template", Ident: id, Field: "steps", Expected: "each interface and step at most once (" + key + " repeats)"}
		}
		seen[key] = true
	}
	return nil
}

// Validate checks r as Ironic's runbook API does (1.112): the name is a
// logical name of at most 255 characters; the description has at most
// 255; every trait is a valid trait name, none twice; there are 1 to
// MaxSteps steps, each with a known interface, a step name, args and an
// order of 0 or more that no other step has; the owner has at most 255
// characters.
func (r *Runbook) Validate() error {
	id := ident(r.UUID, r.Name)
	if p := nodeNameProblem(r.Name); p != "" {
		return &InvalidFieldError{Kind: "runbook", Ident: id, Field: "name", Expected: p}
	}
	if err := checkLen("runbook", id, "description", r.Description, 255); err != nil {
		return err
	}
	seenTrait := map[string]bool{}
	for _, t := range r.Traits {
		if !steps.ValidTraitName(t) {
			return &InvalidFieldError{Kind: "runbook", Ident: id, Field: "traits", Expected: fmt.Sprintf("valid trait names (upper-case letters, digits and underscores, e.g. CUSTOM_FIRMWARE), at most 255 characters; %q is not", t)}
		}
		if seenTrait[t] {
			return &InvalidFieldError{Kind: "runbook", Ident: id, Field: "traits", Expected: fmt.Sprintf("each trait at most once (%s repeats)", t)}
		}
		seenTrait[t] = true
	}
	if len(r.Steps) == 0 || len(r.Steps) > MaxSteps {
		return &InvalidFieldError{Kind: "runbook", Ident: id, Field: "steps", Expected: fmt.Sprintf("1 to %d steps", MaxSteps)}
	}
	orders := map[int]bool{}
	for i, s := range r.Steps {
		if err := checkStep("runbook", id, i, s.Interface, s.Step, s.Args); err != nil {
			return err
		}
		if s.Order < 0 || orders[s.Order] {
			return &InvalidFieldError{Kind: "runbook", Ident: id, Field: "steps", Expected: fmt.Sprintf("step %d: an order of 0 or more that no other step has", i)}
		}
		orders[s.Order] = true
	}
	return checkLen("runbook", id, "owner", r.Owner, 255)
}

// SortedSteps returns r's steps in the order they run (by Order).
func (r *Runbook) SortedSteps() []RunbookStep {
	out := slices.Clone(r.Steps)
	slices.SortStableFunc(out, func(a, b RunbookStep) int { return a.Order - b.Order })
	return out
}
