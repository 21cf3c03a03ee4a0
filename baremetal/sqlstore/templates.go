package sqlstore

import (
	"context"
	"database/sql"

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
	ID        int64          `db:"id"`
	UUID      string         `db:"uuid"`
	Name      string         `db:"name"`
	Steps     sql.NullString `db:"steps"`
	Extra     sql.NullString `db:"extra"`
	CreatedAt int64          `db:"created_at"`
	UpdatedAt int64          `db:"updated_at"`
	Version   int64          `db:"version"`
	// Runbooks only.
	DisableRamdisk bool           `db:"disable_ramdisk"`
	Public         bool           `db:"public"`
	Owner          sql.NullString `db:"owner"`
}

const (
	templateSelect = "SELECT id, uuid, name, steps, extra, created_at, updated_at, version FROM deploy_templates"
	runbookSelect  = "SELECT id, uuid, name, steps, extra, created_at, updated_at, version, disable_ramdisk, public, owner FROM runbooks"
)

// decodeSteps decodes the steps and the extra column of a template or
// runbook row of kind, converting each step with step.
func decodeSteps[S any](r *templateRow, kind string, extra *map[string]any, step func(stepJSON) S) ([]S, error) {
	var list []stepJSON
	if err := decodeExact(kind, r.UUID, "steps", r.Steps, &list); err != nil {
		return nil, err
	}
	var out []S
	for _, s := range list {
		out = append(out, step(s))
	}
	if err := decodeExact(kind, r.UUID, "extra", r.Extra, extra); err != nil {
		return nil, err
	}
	return out, nil
}

// encodeSteps encodes the steps (each converted with step) and the extra
// map of a template or runbook of kind.
func encodeSteps[S any](kind, uuid string, steps []S, step func(S) stepJSON, extra map[string]any) (any, any, error) {
	list := make([]stepJSON, len(steps))
	for i, s := range steps {
		list[i] = step(s)
	}
	stepsV, err := encodeJSON(kind, uuid, "steps", list, false)
	if err != nil {
		return nil, nil, err
	}
	extraV, err := encodeMap(kind, uuid, "extra", extra)
	return stepsV, extraV, err
}

func (r *templateRow) template() (*baremetal.DeployTemplate, error) {
	t := &baremetal.DeployTemplate{ID: r.ID, UUID: r.UUID, Name: r.Name, Version: r.Version,
		CreatedAt: timeFrom(sql.NullInt64{Int64: r.CreatedAt, Valid: true}),
		UpdatedAt: timeFrom(sql.NullInt64{Int64: r.UpdatedAt, Valid: true})}
	var err error
	t.Steps, err = decodeSteps(r, "deploy_template", &t.Extra, func(s stepJSON) baremetal.DeployTemplateStep {
		st := baremetal.DeployTemplateStep{Interface: s.Interface, Step: s.Step, Args: s.Args}
		if s.Priority != nil {
			st.Priority = *s.Priority
		}
		return st
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (r *templateRow) runbook() (*baremetal.Runbook, error) {
	rb := &baremetal.Runbook{ID: r.ID, UUID: r.UUID, Name: r.Name, Version: r.Version,
		DisableRamdisk: r.DisableRamdisk, Public: r.Public, Owner: r.Owner.String,
		CreatedAt: timeFrom(sql.NullInt64{Int64: r.CreatedAt, Valid: true}),
		UpdatedAt: timeFrom(sql.NullInt64{Int64: r.UpdatedAt, Valid: true})}
	var err error
	rb.Steps, err = decodeSteps(r, "runbook", &rb.Extra, func(s stepJSON) baremetal.RunbookStep {
		st := baremetal.RunbookStep{Interface: s.Interface, Step: s.Step, Args: s.Args}
		if s.Order != nil {
			st.Order = *s.Order
		}
		return st
	})
	if err != nil {
		return nil, err
	}
	return rb, nil
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
// disable_ramdisk, public and owner. Steps are stored in run order.
func runbookArgs(r *baremetal.Runbook) ([]any, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	r.Steps = r.SortedSteps()
	steps, extra, err := encodeSteps("runbook", r.UUID, r.Steps, func(s baremetal.RunbookStep) stepJSON {
		return stepJSON{Interface: s.Interface, Step: s.Step, Args: s.Args, Order: &s.Order}
	}, r.Extra)
	if err != nil {
		return nil, err
	}
	return []any{r.Name, steps, extra, r.DisableRamdisk, r.Public, nullIfEmpty(r.Owner)}, nil
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
	cols:   []string{"name", "steps", "extra", "disable_ramdisk", "public", "owner"},
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
