package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/jmoiron/sqlx"
)

type portgroupRow struct {
	rowBase
	Name                     sql.NullString `db:"name"`
	Address                  sql.NullString `db:"address"`
	Mode                     sql.NullString `db:"mode"`
	Properties               sql.NullString `db:"properties"`
	StandalonePortsSupported bool           `db:"standalone_ports_supported"`
	PhysicalNetwork          sql.NullString `db:"physical_network"`
	InternalInfo             sql.NullString `db:"internal_info"`
	Extra                    sql.NullString `db:"extra"`
}

const portgroupSelect = "SELECT g.id, g.uuid, n.uuid AS node_uuid, g.name, g.address, g.mode, g.properties, " +
	"g.standalone_ports_supported, g.physical_network, g.internal_info, g.extra, g.created_at, g.updated_at, g.version " +
	"FROM portgroups g JOIN nodes n ON n.id = g.node_id"

func (r *portgroupRow) portgroup() (*baremetal.Portgroup, error) {
	g := &baremetal.Portgroup{
		Name: r.Name.String, Address: r.Address.String, Mode: r.Mode.String,
		StandalonePortsSupported: r.StandalonePortsSupported, PhysicalNetwork: r.PhysicalNetwork.String,
	}
	return g, decodeColumns("portgroup", r.UUID, jsonColumn{"properties", r.Properties, &g.Properties},
		jsonColumn{"internal_info", r.InternalInfo, &g.InternalInfo}, jsonColumn{"extra", r.Extra, &g.Extra})
}

// portgroupArgs validates g (normalising its MAC) and returns the values
// of name, address, mode, properties, standalone_ports_supported,
// physical_network, internal_info and extra.
func portgroupArgs(g *baremetal.Portgroup) ([]any, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if g.Address != "" {
		g.Address, _ = baremetal.NormalizeMAC("address", g.Address)
	}
	js, err := encodeColumns("portgroup", g.UUID, jsonValue{"properties", g.Properties},
		jsonValue{"internal_info", g.InternalInfo}, jsonValue{"extra", g.Extra})
	if err != nil {
		return nil, err
	}
	return []any{nullIfEmpty(g.Name), nullIfEmpty(g.Address), nullIfEmpty(g.Mode), js[0],
		g.StandalonePortsSupported, nullIfEmpty(g.PhysicalNetwork), js[1], js[2]}, nil
}

// portgroups is the portgroup table. A portgroup with ports stays on its
// node (the ports follow their node) and cannot be deleted.
var portgroups = newCrud(crud[baremetal.Portgroup, portgroupRow]{
	kind: "portgroup", noun: "portgroup", plural: "portgroups",
	table: "portgroups", alias: "g.", selectSQL: portgroupSelect, byName: true, node: nodeRequired,
	cols:   []string{"name", "address", "mode", "properties", "standalone_ports_supported", "physical_network", "internal_info", "extra"},
	clone:  (*baremetal.Portgroup).Clone,
	args:   portgroupArgs,
	decode: (*portgroupRow).portgroup,
	unique: func(g *baremetal.Portgroup) []uniqueField {
		return []uniqueField{uniqueColumn("address", "address", nullIfEmpty(g.Address)), uniqueColumn("name", "name", nullIfEmpty(g.Name))}
	},
	beforeUpdate: func(ctx context.Context, s *Store, tx *sqlx.Tx, g *baremetal.Portgroup, nodeID any) error {
		var moved int
		err := tx.QueryRowxContext(ctx, s.d.q("SELECT 1 FROM portgroups g WHERE g.uuid = ? AND g.node_id <> ? "+
			"AND EXISTS (SELECT 1 FROM ports p WHERE p.portgroup_id = g.id)"), g.UUID, nodeID).Scan(&moved)
		if err == nil {
			return &baremetal.PortgroupNotEmptyError{Portgroup: g.UUID}
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		return nil
	},
	children: &childRows{table: "ports", column: "portgroup_id", byID: true,
		refused: func(uuid string) error { return &baremetal.PortgroupNotEmptyError{Portgroup: uuid} }},
})

// Portgroups implements baremetal.ResourceStore. The foreign key of
// ports.portgroup_id refuses a delete when a port joined meanwhile.
func (s *Store) Portgroups() baremetal.Collection[baremetal.Portgroup, baremetal.PortgroupFilter] {
	return bind(s, portgroups, portgroupWhere)
}

// portgroupWhere is the conditions of a portgroup listing.
func portgroupWhere(f baremetal.PortgroupFilter) (filters, error) {
	w := ofNode(f.NodeUUID)
	if f.Address != "" {
		mac, err := baremetal.NormalizeMAC("address", f.Address)
		if err != nil {
			return w, &baremetal.InvalidFieldError{Kind: "portgroup", Field: "address", Expected: "a 48-bit MAC address such as 52:54:00:12:34:56"}
		}
		w.add("g.address = ?", mac)
	}
	return w, nil
}
