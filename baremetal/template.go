package baremetal

import (
	"slices"
	"time"

	"github.com/anvilmetal/anvil/internal/jsonmap"
)

// DeployTemplate is a named list of deploy steps (Ironic's deploy
// template, API 1.55). Its Name is a trait (for example CUSTOM_RAID1):
// a deployment whose instance_info.traits holds the name runs the
// template's steps. Names are unique.
type DeployTemplate struct {
	// ID is the store's internal key.
	ID int64
	// UUID is the template's public identity; generated when empty.
	UUID string
	// Name is a valid trait name (upper-case letters, digits and
	// underscores, custom ones starting CUSTOM_), at most 255 characters.
	Name string
	// Steps are the deploy steps, at least one; an interface and step
	// pair appears at most once.
	Steps []DeployTemplateStep
	// Extra is free-form operator data.
	Extra map[string]any
	// CreatedAt and UpdatedAt are stamped by the store.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version is the compare-and-swap counter, as on Node.
	Version int64
}

// DeployTemplateStep is one step of a deploy template.
type DeployTemplateStep struct {
	// Interface is the driver interface ("deploy", "bios", "raid", ...).
	Interface string
	// Step is the step's name on that interface.
	Step string
	// Args are the step's arguments (may hold secrets: masked in logs).
	Args map[string]any
	// Priority orders the step among the deploy steps (0 disables it).
	Priority int
}

// Clone returns a deep copy of t.
func (t *DeployTemplate) Clone() *DeployTemplate {
	if t == nil {
		return nil
	}
	c := *t
	c.Extra = jsonmap.Clone(t.Extra)
	if t.Steps != nil {
		c.Steps = make([]DeployTemplateStep, len(t.Steps))
		for i, s := range t.Steps {
			s.Args = jsonmap.Clone(s.Args)
			c.Steps[i] = s
		}
	}
	return &c
}

// Runbook is a named, ordered list of clean or service steps (Ironic's
// runbook, API 1.92) that an operator runs on a node instead of giving
// the steps by hand. Names are unique. A runbook runs on a node that has
// one of its Traits (Ironic's API 1.112); before 1.112 Ironic's API
// required the name to be one of the node's traits instead.
type Runbook struct {
	// ID is the store's internal key.
	ID int64
	// UUID is the runbook's public identity; generated when empty.
	UUID string
	// Name is a logical name (letters, digits, '-', '.', '_', '~'), at
	// most 255 characters, and not UUID-like. Ironic's API before 1.112
	// takes only trait names.
	Name string
	// Description is free text of at most 255 characters (API 1.112).
	Description string
	// Traits approve the runbook for the nodes that have one of them
	// (API 1.112): valid trait names, each at most once. The store keeps
	// them sorted. A runbook stored before traits existed got its name as
	// its one trait, as Ironic's data migration gives it.
	Traits []string
	// Steps are the steps, at least one, run in Order.
	Steps []RunbookStep
	// DisableRamdisk runs the steps without booting the agent ramdisk.
	DisableRamdisk bool
	// Public runbooks are visible to every project.
	Public bool
	// Owner is the project owning the runbook (empty for none).
	Owner string
	// Extra is free-form operator data.
	Extra map[string]any
	// CreatedAt and UpdatedAt are stamped by the store.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version is the compare-and-swap counter, as on Node.
	Version int64
}

// RunbookStep is one step of a runbook.
type RunbookStep struct {
	// Interface is the driver interface.
	Interface string
	// Step is the step's name on that interface.
	Step string
	// Args are the step's arguments.
	Args map[string]any
	// Order is the step's position: steps run in increasing Order; two
	// steps cannot share one.
	Order int
}

// Clone returns a deep copy of r.
func (r *Runbook) Clone() *Runbook {
	if r == nil {
		return nil
	}
	c := *r
	c.Extra = jsonmap.Clone(r.Extra)
	c.Traits = slices.Clone(r.Traits)
	if r.Steps != nil {
		c.Steps = make([]RunbookStep, len(r.Steps))
		for i, s := range r.Steps {
			s.Args = jsonmap.Clone(s.Args)
			c.Steps[i] = s
		}
	}
	return &c
}

// DeployTemplateFilter selects deploy templates in a listing. It has no
// fields: Ironic filters deploy templates by none. The type keeps the
// listing's signature when one comes.
type DeployTemplateFilter struct{}

// RunbookFilter selects runbooks in a listing.
type RunbookFilter struct {
	// Owner matches the owner when not empty.
	Owner string
	// Public matches the public flag when not nil.
	Public *bool
}
