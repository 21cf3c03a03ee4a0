package sqlstore

import (
	"context"
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

// CreateDeployTemplate implements baremetal.DeployTemplateStore.
func (s *Store) CreateDeployTemplate(ctx context.Context, t *baremetal.DeployTemplate) error {
	return deployTemplates.create(ctx, s, t)
}

// GetDeployTemplate implements baremetal.DeployTemplateStore.
func (s *Store) GetDeployTemplate(ctx context.Context, ident string) (*baremetal.DeployTemplate, error) {
	return deployTemplates.get(ctx, s, ident)
}

// ListDeployTemplates implements baremetal.DeployTemplateStore.
func (s *Store) ListDeployTemplates(ctx context.Context, page baremetal.Page) ([]*baremetal.DeployTemplate, error) {
	return deployTemplates.list(ctx, s, filters{}, page)
}

// UpdateDeployTemplate implements baremetal.DeployTemplateStore.
func (s *Store) UpdateDeployTemplate(ctx context.Context, t *baremetal.DeployTemplate) error {
	return deployTemplates.update(ctx, s, t)
}

// DeleteDeployTemplate implements baremetal.DeployTemplateStore.
func (s *Store) DeleteDeployTemplate(ctx context.Context, id string) error {
	return deployTemplates.remove(ctx, s, id)
}

// CreateRunbook implements baremetal.RunbookStore.
func (s *Store) CreateRunbook(ctx context.Context, r *baremetal.Runbook) error {
	return runbooks.create(ctx, s, r)
}

// GetRunbook implements baremetal.RunbookStore.
func (s *Store) GetRunbook(ctx context.Context, ident string) (*baremetal.Runbook, error) {
	return runbooks.get(ctx, s, ident)
}

// ListRunbooks implements baremetal.RunbookStore.
func (s *Store) ListRunbooks(ctx context.Context, f baremetal.RunbookFilter, page baremetal.Page) ([]*baremetal.Runbook, error) {
	var w filters
	if f.Owner != "" {
		w.add("owner = ?", f.Owner)
	}
	if f.Public != nil {
		w.add("public = ?", *f.Public)
	}
	return runbooks.list(ctx, s, w, page)
}

// UpdateRunbook implements baremetal.RunbookStore.
func (s *Store) UpdateRunbook(ctx context.Context, r *baremetal.Runbook) error {
	return runbooks.update(ctx, s, r)
}

// DeleteRunbook implements baremetal.RunbookStore.
func (s *Store) DeleteRunbook(ctx context.Context, id string) error {
	return runbooks.remove(ctx, s, id)
}
