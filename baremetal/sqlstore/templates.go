package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/jmoiron/sqlx"
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

func (r *templateRow) steps(kind string) ([]stepJSON, error) {
	var out []stepJSON
	err := decodeExact(kind, r.UUID, "steps", r.Steps, &out)
	return out, err
}

func (r *templateRow) template() (*baremetal.DeployTemplate, error) {
	t := &baremetal.DeployTemplate{ID: r.ID, UUID: r.UUID, Name: r.Name, Version: r.Version,
		CreatedAt: timeFrom(sql.NullInt64{Int64: r.CreatedAt, Valid: true}),
		UpdatedAt: timeFrom(sql.NullInt64{Int64: r.UpdatedAt, Valid: true})}
	list, err := r.steps("deploy_template")
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		st := baremetal.DeployTemplateStep{Interface: s.Interface, Step: s.Step, Args: s.Args}
		if s.Priority != nil {
			st.Priority = *s.Priority
		}
		t.Steps = append(t.Steps, st)
	}
	if err := decodeExact("deploy_template", r.UUID, "extra", r.Extra, &t.Extra); err != nil {
		return nil, err
	}
	return t, nil
}

func (r *templateRow) runbook() (*baremetal.Runbook, error) {
	rb := &baremetal.Runbook{ID: r.ID, UUID: r.UUID, Name: r.Name, Version: r.Version,
		DisableRamdisk: r.DisableRamdisk, Public: r.Public, Owner: r.Owner.String,
		CreatedAt: timeFrom(sql.NullInt64{Int64: r.CreatedAt, Valid: true}),
		UpdatedAt: timeFrom(sql.NullInt64{Int64: r.UpdatedAt, Valid: true})}
	list, err := r.steps("runbook")
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		st := baremetal.RunbookStep{Interface: s.Interface, Step: s.Step, Args: s.Args}
		if s.Order != nil {
			st.Order = *s.Order
		}
		rb.Steps = append(rb.Steps, st)
	}
	if err := decodeExact("runbook", r.UUID, "extra", r.Extra, &rb.Extra); err != nil {
		return nil, err
	}
	return rb, nil
}

// templateArgs validates t and returns the values of name, steps, extra.
func templateArgs(t *baremetal.DeployTemplate) ([]any, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	list := make([]stepJSON, len(t.Steps))
	for i, s := range t.Steps {
		p := s.Priority
		list[i] = stepJSON{Interface: s.Interface, Step: s.Step, Args: s.Args, Priority: &p}
	}
	steps, err := encodeJSON("deploy_template", t.UUID, "steps", list, false)
	if err != nil {
		return nil, err
	}
	extra, err := encodeMap("deploy_template", t.UUID, "extra", t.Extra)
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
	list := make([]stepJSON, len(r.Steps))
	for i, s := range r.Steps {
		o := s.Order
		list[i] = stepJSON{Interface: s.Interface, Step: s.Step, Args: s.Args, Order: &o}
	}
	steps, err := encodeJSON("runbook", r.UUID, "steps", list, false)
	if err != nil {
		return nil, err
	}
	extra, err := encodeMap("runbook", r.UUID, "extra", r.Extra)
	if err != nil {
		return nil, err
	}
	return []any{r.Name, steps, extra, r.DisableRamdisk, r.Public, nullIfEmpty(r.Owner)}, nil
}

// CreateDeployTemplate implements baremetal.DeployTemplateStore.
func (s *Store) CreateDeployTemplate(ctx context.Context, t *baremetal.DeployTemplate) error {
	if t == nil {
		return &baremetal.InvalidFieldError{Kind: "deploy_template", Field: "deploy_template", Expected: "a non-nil deploy template"}
	}
	w := t.Clone()
	var err error
	if w.UUID, err = newIdentity("deploy_template", w.UUID); err != nil {
		return err
	}
	args, err := templateArgs(w)
	if err != nil {
		return err
	}
	now := s.now()
	bind := append([]any{w.UUID}, args...)
	bind = append(bind, micros(now), micros(now), int64(1))
	err = s.w.QueryRowxContext(ctx, s.d.q("INSERT INTO deploy_templates (uuid, name, steps, extra, created_at, updated_at, version) "+
		"VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id"), bind...).Scan(&w.ID)
	if err = s.finish(ctx, err, "creating deploy template "+w.UUID, func() error {
		return s.explainDuplicate(ctx, "deploy_template", "deploy_templates", w.UUID, true, []uniqueField{{"name", "name", w.Name}}, err)
	}); err != nil {
		return err
	}
	w.CreatedAt, w.UpdatedAt, w.Version = now, now, 1
	*t = *w
	return nil
}

// GetDeployTemplate implements baremetal.DeployTemplateStore.
func (s *Store) GetDeployTemplate(ctx context.Context, ident string) (*baremetal.DeployTemplate, error) {
	cond, arg := identWhere("", ident)
	var r templateRow
	err := s.r.GetContext(ctx, &r, s.d.q(templateSelect+" WHERE "+cond), arg)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &baremetal.NotFoundError{Kind: "deploy_template", Ident: ident}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: reading deploy template %s: %w", ident, err)
	}
	return r.template()
}

// ListDeployTemplates implements baremetal.DeployTemplateStore.
func (s *Store) ListDeployTemplates(ctx context.Context, page baremetal.Page) ([]*baremetal.DeployTemplate, error) {
	tail, args, err := s.pageClause(ctx, "deploy_templates", "deploy template", "", page, nil, nil)
	if err != nil {
		return nil, err
	}
	var rows []templateRow
	if err := s.r.SelectContext(ctx, &rows, s.d.q(templateSelect+tail), args...); err != nil {
		return nil, fmt.Errorf("sqlstore: listing deploy templates: %w", err)
	}
	out := make([]*baremetal.DeployTemplate, 0, len(rows))
	for i := range rows {
		t, err := rows[i].template()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// UpdateDeployTemplate implements baremetal.DeployTemplateStore.
func (s *Store) UpdateDeployTemplate(ctx context.Context, t *baremetal.DeployTemplate) error {
	if t == nil {
		return &baremetal.InvalidFieldError{Kind: "deploy_template", Field: "deploy_template", Expected: "a non-nil deploy template"}
	}
	w := t.Clone()
	w.UUID = strings.ToLower(w.UUID)
	args, err := templateArgs(w)
	if err != nil {
		return err
	}
	now := s.now()
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		w.Version, err = s.casUpdate(ctx, tx, "deploy_template", "deploy_templates", w.UUID, w.Version,
			"name = ?, steps = ?, extra = ?, updated_at = ?", append(args, micros(now)))
		return err
	})
	if err = s.finish(ctx, err, "updating deploy template "+w.UUID, func() error {
		return s.explainDuplicate(ctx, "deploy_template", "deploy_templates", w.UUID, false, []uniqueField{{"name", "name", w.Name}}, err)
	}); err != nil {
		return err
	}
	w.UpdatedAt = now
	*t = *w
	return nil
}

// DeleteDeployTemplate implements baremetal.DeployTemplateStore.
func (s *Store) DeleteDeployTemplate(ctx context.Context, id string) error {
	return s.deleteByUUID(ctx, "deploy_template", "deploy_templates", id)
}

// CreateRunbook implements baremetal.RunbookStore.
func (s *Store) CreateRunbook(ctx context.Context, r *baremetal.Runbook) error {
	if r == nil {
		return &baremetal.InvalidFieldError{Kind: "runbook", Field: "runbook", Expected: "a non-nil runbook"}
	}
	w := r.Clone()
	var err error
	if w.UUID, err = newIdentity("runbook", w.UUID); err != nil {
		return err
	}
	args, err := runbookArgs(w)
	if err != nil {
		return err
	}
	now := s.now()
	bind := append([]any{w.UUID}, args...)
	bind = append(bind, micros(now), micros(now), int64(1))
	err = s.w.QueryRowxContext(ctx, s.d.q("INSERT INTO runbooks (uuid, name, steps, extra, disable_ramdisk, public, owner, "+
		"created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"), bind...).Scan(&w.ID)
	if err = s.finish(ctx, err, "creating runbook "+w.UUID, func() error {
		return s.explainDuplicate(ctx, "runbook", "runbooks", w.UUID, true, []uniqueField{{"name", "name", w.Name}}, err)
	}); err != nil {
		return err
	}
	w.CreatedAt, w.UpdatedAt, w.Version = now, now, 1
	*r = *w
	return nil
}

// GetRunbook implements baremetal.RunbookStore.
func (s *Store) GetRunbook(ctx context.Context, ident string) (*baremetal.Runbook, error) {
	cond, arg := identWhere("", ident)
	var r templateRow
	err := s.r.GetContext(ctx, &r, s.d.q(runbookSelect+" WHERE "+cond), arg)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &baremetal.NotFoundError{Kind: "runbook", Ident: ident}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: reading runbook %s: %w", ident, err)
	}
	return r.runbook()
}

// ListRunbooks implements baremetal.RunbookStore.
func (s *Store) ListRunbooks(ctx context.Context, f baremetal.RunbookFilter, page baremetal.Page) ([]*baremetal.Runbook, error) {
	var conds []string
	var args []any
	if f.Owner != "" {
		conds = append(conds, "owner = ?")
		args = append(args, f.Owner)
	}
	if f.Public != nil {
		conds = append(conds, "public = ?")
		args = append(args, *f.Public)
	}
	tail, args, err := s.pageClause(ctx, "runbooks", "runbook", "", page, conds, args)
	if err != nil {
		return nil, err
	}
	var rows []templateRow
	if err := s.r.SelectContext(ctx, &rows, s.d.q(runbookSelect+tail), args...); err != nil {
		return nil, fmt.Errorf("sqlstore: listing runbooks: %w", err)
	}
	out := make([]*baremetal.Runbook, 0, len(rows))
	for i := range rows {
		rb, err := rows[i].runbook()
		if err != nil {
			return nil, err
		}
		out = append(out, rb)
	}
	return out, nil
}

// UpdateRunbook implements baremetal.RunbookStore.
func (s *Store) UpdateRunbook(ctx context.Context, r *baremetal.Runbook) error {
	if r == nil {
		return &baremetal.InvalidFieldError{Kind: "runbook", Field: "runbook", Expected: "a non-nil runbook"}
	}
	w := r.Clone()
	w.UUID = strings.ToLower(w.UUID)
	args, err := runbookArgs(w)
	if err != nil {
		return err
	}
	now := s.now()
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		w.Version, err = s.casUpdate(ctx, tx, "runbook", "runbooks", w.UUID, w.Version,
			"name = ?, steps = ?, extra = ?, disable_ramdisk = ?, public = ?, owner = ?, updated_at = ?", append(args, micros(now)))
		return err
	})
	if err = s.finish(ctx, err, "updating runbook "+w.UUID, func() error {
		return s.explainDuplicate(ctx, "runbook", "runbooks", w.UUID, false, []uniqueField{{"name", "name", w.Name}}, err)
	}); err != nil {
		return err
	}
	w.UpdatedAt = now
	*r = *w
	return nil
}

// DeleteRunbook implements baremetal.RunbookStore.
func (s *Store) DeleteRunbook(ctx context.Context, id string) error {
	return s.deleteByUUID(ctx, "runbook", "runbooks", id)
}
