package sqlstore

import (
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

// Chassis implements baremetal.ResourceStore. The reference of
// nodes.chassis_uuid refuses a delete when a node joined meanwhile.
func (s *Store) Chassis() baremetal.Collection[baremetal.Chassis, baremetal.ChassisFilter] {
	return bind(s, chassisTable, noFilter[baremetal.ChassisFilter])
}
