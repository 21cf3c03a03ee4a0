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

type allocationRow struct {
	ID                int64          `db:"id"`
	UUID              string         `db:"uuid"`
	Name              sql.NullString `db:"name"`
	NodeUUID          sql.NullString `db:"node_uuid"`
	State             string         `db:"state"`
	LastError         sql.NullString `db:"last_error"`
	ResourceClass     sql.NullString `db:"resource_class"`
	Traits            sql.NullString `db:"traits"`
	CandidateNodes    sql.NullString `db:"candidate_nodes"`
	Extra             sql.NullString `db:"extra"`
	Owner             sql.NullString `db:"owner"`
	ConductorAffinity sql.NullInt64  `db:"conductor_affinity"`
	CreatedAt         int64          `db:"created_at"`
	UpdatedAt         int64          `db:"updated_at"`
	Version           int64          `db:"version"`
}

const allocationSelect = "SELECT a.id, a.uuid, a.name, n.uuid AS node_uuid, a.state, a.last_error, a.resource_class, " +
	"a.traits, a.candidate_nodes, a.extra, a.owner, a.conductor_affinity, a.created_at, a.updated_at, a.version " +
	"FROM allocations a LEFT JOIN nodes n ON n.id = a.node_id"

func (r *allocationRow) allocation() (*baremetal.Allocation, error) {
	a := &baremetal.Allocation{
		ID: r.ID, UUID: r.UUID, Name: r.Name.String, NodeUUID: r.NodeUUID.String,
		State: baremetal.AllocationState(r.State), LastError: r.LastError.String, ResourceClass: r.ResourceClass.String,
		Owner: r.Owner.String, ConductorAffinity: r.ConductorAffinity.Int64,
		CreatedAt: timeFrom(sql.NullInt64{Int64: r.CreatedAt, Valid: true}),
		UpdatedAt: timeFrom(sql.NullInt64{Int64: r.UpdatedAt, Valid: true}),
		Version:   r.Version,
	}
	if err := decodeExact("allocation", r.UUID, "traits", r.Traits, &a.Traits); err != nil {
		return nil, err
	}
	if err := decodeExact("allocation", r.UUID, "candidate_nodes", r.CandidateNodes, &a.CandidateNodes); err != nil {
		return nil, err
	}
	if err := decodeExact("allocation", r.UUID, "extra", r.Extra, &a.Extra); err != nil {
		return nil, err
	}
	return a, nil
}

// allocationArgs validates a (lower-casing its candidate UUIDs) and
// returns the values of name, state, last_error, resource_class, traits,
// candidate_nodes, extra, owner and conductor_affinity.
func allocationArgs(a *baremetal.Allocation) ([]any, error) {
	if a.State == "" {
		a.State = baremetal.AllocationAllocating
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	for i, c := range a.CandidateNodes {
		if !isUUID(c) {
			return nil, &baremetal.InvalidFieldError{Kind: "allocation", Ident: a.UUID, Field: "candidate_nodes",
				Expected: fmt.Sprintf("node UUIDs (names are resolved before storing); item %d is not one", i)}
		}
		a.CandidateNodes[i] = strings.ToLower(c)
	}
	if err := checkText(&baremetal.Node{UUID: a.UUID}, "last_error", a.LastError, 0); err != nil {
		return nil, &baremetal.InvalidFieldError{Kind: "allocation", Ident: a.UUID, Field: "last_error", Expected: "valid UTF-8 text without NUL bytes"}
	}
	traits, err := encodeList("allocation", a.UUID, "traits", a.Traits)
	if err != nil {
		return nil, err
	}
	cands, err := encodeList("allocation", a.UUID, "candidate_nodes", a.CandidateNodes)
	if err != nil {
		return nil, err
	}
	extra, err := encodeMap("allocation", a.UUID, "extra", a.Extra)
	if err != nil {
		return nil, err
	}
	var affinity any
	if a.ConductorAffinity != 0 {
		affinity = a.ConductorAffinity
	}
	return []any{nullIfEmpty(a.Name), string(a.State), nullIfEmpty(a.LastError), nullIfEmpty(a.ResourceClass),
		traits, cands, extra, nullIfEmpty(a.Owner), affinity}, nil
}

func (s *Store) explainAllocationDuplicate(ctx context.Context, a *baremetal.Allocation, isNew bool, cause error) error {
	fields := []uniqueField{{"name", "name", nullIfEmpty(a.Name)}}
	if a.NodeUUID != "" {
		var nodeID int64
		if s.w.QueryRowxContext(ctx, s.d.q("SELECT id FROM nodes WHERE uuid = ?"), a.NodeUUID).Scan(&nodeID) == nil {
			var other string
			if s.w.QueryRowxContext(ctx, s.d.q("SELECT uuid FROM allocations WHERE node_id = ? AND uuid <> ?"), nodeID, a.UUID).Scan(&other) == nil {
				return &baremetal.DuplicateError{Kind: "allocation", Field: "node_uuid", Value: a.NodeUUID}
			}
		}
	}
	return s.explainDuplicate(ctx, "allocation", "allocations", a.UUID, isNew, fields, cause)
}

// allocationNode resolves a.NodeUUID to a node id (nil for none).
func (s *Store) allocationNode(ctx context.Context, tx *sqlx.Tx, a *baremetal.Allocation) (any, error) {
	if a.NodeUUID == "" {
		return nil, nil
	}
	id, err := s.nodeIDOf(ctx, tx, "allocation", a.UUID, a.NodeUUID)
	if err != nil {
		return nil, err
	}
	a.NodeUUID = strings.ToLower(a.NodeUUID)
	return id, nil
}

// CreateAllocation implements baremetal.AllocationStore.
func (s *Store) CreateAllocation(ctx context.Context, a *baremetal.Allocation) error {
	if a == nil {
		return &baremetal.InvalidFieldError{Kind: "allocation", Field: "allocation", Expected: "a non-nil allocation"}
	}
	w := a.Clone()
	var err error
	if w.UUID, err = newIdentity("allocation", w.UUID); err != nil {
		return err
	}
	args, err := allocationArgs(w)
	if err != nil {
		return err
	}
	now := s.now()
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		nodeID, err := s.allocationNode(ctx, tx, w)
		if err != nil {
			return err
		}
		bind := append([]any{w.UUID, nodeID}, args...)
		bind = append(bind, micros(now), micros(now), int64(1))
		return tx.QueryRowxContext(ctx, s.d.q("INSERT INTO allocations (uuid, node_id, name, state, last_error, resource_class, "+
			"traits, candidate_nodes, extra, owner, conductor_affinity, created_at, updated_at, version) "+
			"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"), bind...).Scan(&w.ID)
	})
	if err = s.finish(ctx, err, "creating allocation "+w.UUID, func() error { return s.explainAllocationDuplicate(ctx, w, true, err) }); err != nil {
		return err
	}
	w.CreatedAt, w.UpdatedAt, w.Version = now, now, 1
	*a = *w
	return nil
}

// GetAllocation implements baremetal.AllocationStore.
func (s *Store) GetAllocation(ctx context.Context, ident string) (*baremetal.Allocation, error) {
	cond, arg := identWhere("a.", ident)
	var r allocationRow
	err := s.r.GetContext(ctx, &r, s.d.q(allocationSelect+" WHERE "+cond), arg)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &baremetal.NotFoundError{Kind: "allocation", Ident: ident}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: reading allocation %s: %w", ident, err)
	}
	return r.allocation()
}

// ListAllocations implements baremetal.AllocationStore.
func (s *Store) ListAllocations(ctx context.Context, f baremetal.AllocationFilter, page baremetal.Page) ([]*baremetal.Allocation, error) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		conds = append(conds, cond)
		args = append(args, v)
	}
	if f.NodeUUID != "" {
		add("n.uuid = ?", strings.ToLower(f.NodeUUID))
	}
	if f.ResourceClass != "" {
		add("a.resource_class = ?", f.ResourceClass)
	}
	if f.State != "" {
		add("a.state = ?", string(f.State))
	}
	if f.Owner != "" {
		add("a.owner = ?", f.Owner)
	}
	if f.ConductorAffinity != 0 {
		add("a.conductor_affinity = ?", f.ConductorAffinity)
	}
	tail, args, err := s.pageClause(ctx, "allocations", "allocation", "a.", page, conds, args)
	if err != nil {
		return nil, err
	}
	var rows []allocationRow
	if err := s.r.SelectContext(ctx, &rows, s.d.q(allocationSelect+tail), args...); err != nil {
		return nil, fmt.Errorf("sqlstore: listing allocations: %w", err)
	}
	out := make([]*baremetal.Allocation, 0, len(rows))
	for i := range rows {
		a, err := rows[i].allocation()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// UpdateAllocation implements baremetal.AllocationStore.
func (s *Store) UpdateAllocation(ctx context.Context, a *baremetal.Allocation) error {
	if a == nil {
		return &baremetal.InvalidFieldError{Kind: "allocation", Field: "allocation", Expected: "a non-nil allocation"}
	}
	w := a.Clone()
	w.UUID = strings.ToLower(w.UUID)
	args, err := allocationArgs(w)
	if err != nil {
		return err
	}
	now := s.now()
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		nodeID, err := s.allocationNode(ctx, tx, w)
		if err != nil {
			return err
		}
		bind := append([]any{nodeID}, args...)
		bind = append(bind, micros(now))
		w.Version, err = s.casUpdate(ctx, tx, "allocation", "allocations", w.UUID, w.Version,
			"node_id = ?, name = ?, state = ?, last_error = ?, resource_class = ?, traits = ?, candidate_nodes = ?, "+
				"extra = ?, owner = ?, conductor_affinity = ?, updated_at = ?", bind)
		return err
	})
	if err = s.finish(ctx, err, "updating allocation "+w.UUID, func() error { return s.explainAllocationDuplicate(ctx, w, false, err) }); err != nil {
		return err
	}
	w.UpdatedAt = now
	*a = *w
	return nil
}

// DeleteAllocation implements baremetal.AllocationStore.
func (s *Store) DeleteAllocation(ctx context.Context, id string) error {
	return s.deleteByUUID(ctx, "allocation", "allocations", id)
}
