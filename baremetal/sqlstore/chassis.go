package sqlstore

import (
	"context"
	"database/sql"

	"github.com/anvilmetal/anvil/baremetal"
)

type chassisRow struct {
	rowBase
	Description sql.NullString `db:"description"`
	Extra       sql.NullString `db:"extra"`
}

func (r *chassisRow) chassis() (*baremetal.Chassis, error) {
	c := &baremetal.Chassis{Description: r.Description.String}
	return c, decodeColumns("chassis", r.UUID, jsonColumn{"extra", r.Extra, &c.Extra})
}

// chassisArgs validates c and returns the values of description and
// extra.
func chassisArgs(c *baremetal.Chassis) ([]any, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := checkText(&baremetal.Node{UUID: c.UUID}, "description", c.Description, 0); err != nil {
		return nil, &baremetal.InvalidFieldError{Kind: "chassis", Ident: c.UUID, Field: "description", Expected: "valid UTF-8 text without NUL bytes"}
	}
	js, err := encodeColumns("chassis", c.UUID, jsonValue{"extra", c.Extra})
	if err != nil {
		return nil, err
	}
	return []any{nullIfEmpty(c.Description), js[0]}, nil
}

// chassisTable is the chassis table. Nodes name their chassis by UUID
// (nodes.chassis_uuid): a chassis they name cannot be deleted.
var chassisTable = newCrud(crud[baremetal.Chassis, chassisRow]{
	kind: "chassis", noun: "chassis", plural: "chassis",
	table: "chassis", selectSQL: "SELECT id, uuid, description, extra, created_at, updated_at, version FROM chassis",
	cols:     []string{"description", "extra"},
	sortCols: map[string]byte{"uuid": 't', "description": 't', "created_at": 'i', "updated_at": 'i'},
	clone:    (*baremetal.Chassis).Clone,
	args:     chassisArgs,
	decode:   (*chassisRow).chassis,
	children: &childRows{table: "nodes", column: "chassis_uuid",
		refused: func(uuid string) error { return &baremetal.ChassisNotEmptyError{Chassis: uuid} }},
})

// CreateChassis implements baremetal.ChassisStore.
func (s *Store) CreateChassis(ctx context.Context, c *baremetal.Chassis) error {
	return chassisTable.create(ctx, s, c)
}

// GetChassis implements baremetal.ChassisStore.
func (s *Store) GetChassis(ctx context.Context, uuid string) (*baremetal.Chassis, error) {
	return chassisTable.get(ctx, s, uuid)
}

// ListChassis implements baremetal.ChassisStore.
func (s *Store) ListChassis(ctx context.Context, page baremetal.Page) ([]*baremetal.Chassis, error) {
	return chassisTable.list(ctx, s, filters{}, page)
}

// UpdateChassis implements baremetal.ChassisStore.
func (s *Store) UpdateChassis(ctx context.Context, c *baremetal.Chassis) error {
	return chassisTable.update(ctx, s, c)
}

// DeleteChassis implements baremetal.ChassisStore. The reference of
// nodes.chassis_uuid refuses the delete when a node joined meanwhile.
func (s *Store) DeleteChassis(ctx context.Context, uuid string) error {
	return chassisTable.remove(ctx, s, uuid)
}
