package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
)

type allocationRow struct {
	rowBase
	Name              sql.NullString `db:"name"`
	State             string         `db:"state"`
	LastError         sql.NullString `db:"last_error"`
	ResourceClass     sql.NullString `db:"resource_class"`
	Traits            sql.NullString `db:"traits"`
	CandidateNodes    sql.NullString `db:"candidate_nodes"`
	Extra             sql.NullString `db:"extra"`
	Owner             sql.NullString `db:"owner"`
	ConductorAffinity sql.NullInt64  `db:"conductor_affinity"`
}

const allocationSelect = "SELECT a.id, a.uuid, a.name, n.uuid AS node_uuid, a.state, a.last_error, a.resource_class, " +
	"a.traits, a.candidate_nodes, a.extra, a.owner, a.conductor_affinity, a.created_at, a.updated_at, a.version " +
	"FROM allocations a LEFT JOIN nodes n ON n.id = a.node_id"

func (r *allocationRow) allocation() (*baremetal.Allocation, error) {
	a := &baremetal.Allocation{
		Name: r.Name.String, State: baremetal.AllocationState(r.State), LastError: r.LastError.String,
		ResourceClass: r.ResourceClass.String, Owner: r.Owner.String, ConductorAffinity: r.ConductorAffinity.Int64,
	}
	return a, decodeColumns("allocation", r.UUID, jsonColumn{"traits", r.Traits, &a.Traits},
		jsonColumn{"candidate_nodes", r.CandidateNodes, &a.CandidateNodes}, jsonColumn{"extra", r.Extra, &a.Extra})
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
	js, err := encodeColumns("allocation", a.UUID, jsonValue{"traits", a.Traits},
		jsonValue{"candidate_nodes", a.CandidateNodes}, jsonValue{"extra", a.Extra})
	if err != nil {
		return nil, err
	}
	var affinity any
	if a.ConductorAffinity != 0 {
		affinity = a.ConductorAffinity
	}
	return []any{nullIfEmpty(a.Name), string(a.State), nullIfEmpty(a.LastError), nullIfEmpty(a.ResourceClass),
		js[0], js[1], js[2], nullIfEmpty(a.Owner), affinity}, nil
}

// explainAllocationDuplicate finds the unique field a write of a broke:
// its node first (a node has one allocation at most), then its UUID and
// name.
func explainAllocationDuplicate(ctx context.Context, s *Store, a *baremetal.Allocation, isNew bool, cause error) error {
	if a.NodeUUID != "" {
		var nodeID int64
		if s.w.QueryRowxContext(ctx, s.d.q("SELECT id FROM nodes WHERE uuid = ?"), a.NodeUUID).Scan(&nodeID) == nil {
			var other string
			if s.w.QueryRowxContext(ctx, s.d.q("SELECT uuid FROM allocations WHERE node_id = ? AND uuid <> ?"), nodeID, a.UUID).Scan(&other) == nil {
				return &baremetal.DuplicateError{Kind: "allocation", Field: "node_uuid", Value: a.NodeUUID}
			}
		}
	}
	return s.explainDuplicate(ctx, "allocation", "allocations", a.UUID, isNew, []uniqueField{uniqueColumn("name", "name", nullIfEmpty(a.Name))}, cause)
}

// allocations is the allocation table; a row names its node once one is
// allocated (or backfilled).
var allocations = newCrud(crud[baremetal.Allocation, allocationRow]{
	kind: "allocation", noun: "allocation", plural: "allocations",
	table: "allocations", alias: "a.", selectSQL: allocationSelect, byName: true, node: nodeOptional,
	cols:    []string{"name", "state", "last_error", "resource_class", "traits", "candidate_nodes", "extra", "owner", "conductor_affinity"},
	clone:   (*baremetal.Allocation).Clone,
	args:    allocationArgs,
	decode:  (*allocationRow).allocation,
	explain: explainAllocationDuplicate,
})

// Allocations implements baremetal.ResourceStore.
func (s *Store) Allocations() baremetal.Collection[baremetal.Allocation, baremetal.AllocationFilter] {
	return bind(s, allocations, allocationWhere)
}

// allocationWhere is the conditions of an allocation listing.
func allocationWhere(f baremetal.AllocationFilter) (filters, error) {
	w := ofNode(f.NodeUUID)
	if f.ResourceClass != "" {
		w.add("a.resource_class = ?", f.ResourceClass)
	}
	if f.State != "" {
		w.add("a.state = ?", string(f.State))
	}
	if f.Owner != "" {
		w.add("a.owner = ?", f.Owner)
	}
	if f.ConductorAffinity != 0 {
		w.add("a.conductor_affinity = ?", f.ConductorAffinity)
	}
	return w, nil
}
