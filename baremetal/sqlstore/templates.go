package sqlstore

import (
	"database/sql"
	"slices"

	"github.com/anvilmetal/anvil/baremetal"
)

// stepJSON is a deploy template or runbook step as the steps column
// keeps it: Ironic's field names, priority for templates, order for
// runbooks.
type stepJSON struct {
	Interface string         `json:"interface"`
	Step      string         `json:"step"`
	Args      map[string]any `json:"args"`
	Priority  *int           `json:"priority,omitempty"`
	Order     *int           `json:"order,omitempty"`
}

type templateRow struct {
	rowBase
	Name  string         `db:"name"`
	Steps sql.NullString `db:"steps"`
	Extra sql.NullString `db:"extra"`
	// Runbooks only.
	DisableRamdisk bool           `db:"disable_ramdisk"`
	Public         bool           `db:"public"`
	Owner          sql.NullString `db:"owner"`
	Description    sql.NullString `db:"description"`
	Traits         sql.NullString `db:"traits"`
}

const (
	templateSelect = "SELECT id, uuid, name, steps, extra, created_at, updated_at, version FROM deploy_templates"
	runbookSelect  = "SELECT id, uuid, name, steps, extra, created_at, updated_at, version, disable_ramdisk, public, owner, description, traits FROM runbooks"
)

// decodeSteps decodes the steps (each converted with step) and the
// extra column of a template or runbook row of kind.
func decodeSteps[S any](r *templateRow, kind string, steps *[]S, extra *map[string]any, step func(stepJSON) S) error {
	var list []stepJSON
	if err := decodeColumns(kind, r.UUID, jsonColumn{"steps", r.Steps, &list}, jsonColumn{"extra", r.Extra, extra}); err != nil {
		return err
	}
	for _, s := range list {
		*steps = append(*steps, step(s))
	}
	return nil
}

// templateStep and runbookStep are a stored step as the models keep it.
func (s stepJSON) templateStep() baremetal.DeployTemplateStep {
	return baremetal.DeployTemplateStep{Interface: s.Interface, Step: s.Step, Args: s.Args, Priority: intOf(s.Priority)}
}

func (s stepJSON) runbookStep() baremetal.RunbookStep {
	return baremetal.RunbookStep{Interface: s.Interface, Step: s.Step, Args: s.Args, Order: intOf(s.Order)}
}

// intOf is *p, or 0 for nil.
func intOf(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// encodeSteps encodes the steps (each converted with step) and the extra
// map of a template or runbook of kind.
func encodeSteps[S any](kind, uuid string, steps []S, step func(S) stepJSON, extra map[string]any) (any, any, error) {
	list := make([]stepJSON, len(steps))
	for i, s := range steps {
		list[i] = step(s)
	}
	js, err := encodeColumns(kind, uuid, jsonValue{"steps", list}, jsonValue{"extra", extra})
	if err != nil {
		return nil, nil, err
	}
	return js[0], js[1], nil
}

func (r *templateRow) template() (*baremetal.DeployTemplate, error) {
	t := &baremetal.DeployTemplate{Name: r.Name}
	return t, decodeSteps(r, "deploy_template", &t.Steps, &t.Extra, stepJSON.templateStep)
}

func (r *templateRow) runbook() (*baremetal.Runbook, error) {
	rb := &baremetal.Runbook{Name: r.Name, DisableRamdisk: r.DisableRamdisk, Public: r.Public, Owner: r.Owner.String, Description: r.Description.String}
	if err := decodeColumns("runbook", r.UUID, jsonColumn{"traits", r.Traits, &rb.Traits}); err != nil {
		return nil, err
	}
	return rb, decodeSteps(r, "runbook", &rb.Steps, &rb.Extra, stepJSON.runbookStep)
}

// templateArgs validates t and returns the values of name, steps, extra.
func templateArgs(t *baremetal.DeployTemplate) ([]any, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	steps, extra, err := encodeSteps("deploy_template", t.UUID, t.Steps, func(s baremetal.DeployTemplateStep) stepJSON {
		return stepJSON{Interface: s.Interface, Step: s.Step, Args: s.Args, Priority: &s.Priority}
	}, t.Extra)
	if err != nil {
		return nil, err
	}
	return []any{t.Name, steps, extra}, nil
}

// runbookArgs validates r and returns the values of name, steps, extra,
// disable_ramdisk, public, owner, description and traits. Steps are
// stored in run order, traits sorted.
func runbookArgs(r *baremetal.Runbook) ([]any, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	r.Steps = r.SortedSteps()
	if r.Traits == nil {
		r.Traits = []string{}
	}
	slices.Sort(r.Traits)
	traits, err := encodeColumns("runbook", r.UUID, jsonValue{"traits", r.Traits})
	if err != nil {
		return nil, err
	}
	steps, extra, err := encodeSteps("runbook", r.UUID, r.Steps, func(s baremetal.RunbookStep) stepJSON {
		return stepJSON{Interface: s.Interface, Step: s.Step, Args: s.Args, Order: &s.Order}
	}, r.Extra)
	if err != nil {
		return nil, err
	}
	return []any{r.Name, steps, extra, r.DisableRamdisk, r.Public, nullIfEmpty(r.Owner), nullIfEmpty(r.Description), traits[0]}, nil
}

// uniqueName is the unique constraint of a template's or runbook's name.
func uniqueName(name string) []uniqueField { return []uniqueField{uniqueColumn("name", "name", name)} }

// deployTemplates is the deploy template table.
var deployTemplates = newCrud(crud[baremetal.DeployTemplate, templateRow]{
	kind: "deploy_template", noun: "deploy template", plural: "deploy templates",
	table: "deploy_templates", selectSQL: templateSelect, byName: true,
	cols:   []string{"name", "steps", "extra"},
	clone:  (*baremetal.DeployTemplate).Clone,
	args:   templateArgs,
	decode: (*templateRow).template,
	unique: func(t *baremetal.DeployTemplate) []uniqueField { return uniqueName(t.Name) },
})

// runbooks is the runbook table.
var runbooks = newCrud(crud[baremetal.Runbook, templateRow]{
	kind: "runbook", noun: "runbook", plural: "runbooks",
	table: "runbooks", selectSQL: runbookSelect, byName: true,
	cols:   []string{"name", "steps", "extra", "disable_ramdisk", "public", "owner", "description", "traits"},
	clone:  (*baremetal.Runbook).Clone,
	args:   runbookArgs,
	decode: (*templateRow).runbook,
	unique: func(r *baremetal.Runbook) []uniqueField { return uniqueName(r.Name) },
})

// DeployTemplates implements baremetal.ResourceStore.
func (s *Store) DeployTemplates() baremetal.Collection[baremetal.DeployTemplate, baremetal.DeployTemplateFilter] {
	return bind(s, deployTemplates, noFilter[baremetal.DeployTemplateFilter])
}

// Runbooks implements baremetal.ResourceStore.
func (s *Store) Runbooks() baremetal.Collection[baremetal.Runbook, baremetal.RunbookFilter] {
	return bind(s, runbooks, runbookWhere)
}

// runbookWhere is the conditions of a runbook listing.
func runbookWhere(f baremetal.RunbookFilter) (filters, error) {
	var w filters
	if f.Owner != "" {
		w.add("owner = ?", f.Owner)
	}
	if f.Public != nil {
		w.add("public = ?", *f.Public)
	}
	return w, nil
}
