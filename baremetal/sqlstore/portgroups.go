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

type portgroupRow struct {
	ID                       int64          `db:"id"`
	UUID                     string         `db:"uuid"`
	NodeUUID                 string         `db:"node_uuid"`
	Name                     sql.NullString `db:"name"`
	Address                  sql.NullString `db:"address"`
	Mode                     sql.NullString `db:"mode"`
	Properties               sql.NullString `db:"properties"`
	StandalonePortsSupported bool           `db:"standalone_ports_supported"`
	PhysicalNetwork          sql.NullString `db:"physical_network"`
	InternalInfo             sql.NullString `db:"internal_info"`
	Extra                    sql.NullString `db:"extra"`
	CreatedAt                int64          `db:"created_at"`
	UpdatedAt                int64          `db:"updated_at"`
	Version                  int64          `db:"version"`
}

const portgroupSelect = "SELECT g.id, g.uuid, n.uuid AS node_uuid, g.name, g.address, g.mode, g.properties, " +
	"g.standalone_ports_supported, g.physical_network, g.internal_info, g.extra, g.created_at, g.updated_at, g.version " +
	"FROM portgroups g JOIN nodes n ON n.id = g.node_id"

func (r *portgroupRow) portgroup() (*baremetal.Portgroup, error) {
	g := &baremetal.Portgroup{
		ID: r.ID, UUID: r.UUID, NodeUUID: r.NodeUUID, Name: r.Name.String, Address: r.Address.String,
		Mode: r.Mode.String, StandalonePortsSupported: r.StandalonePortsSupported, PhysicalNetwork: r.PhysicalNetwork.String,
		CreatedAt: timeFrom(sql.NullInt64{Int64: r.CreatedAt, Valid: true}),
		UpdatedAt: timeFrom(sql.NullInt64{Int64: r.UpdatedAt, Valid: true}),
		Version:   r.Version,
	}
	for _, c := range []struct {
		field string
		ns    sql.NullString
		dst   *map[string]any
	}{{"properties", r.Properties, &g.Properties}, {"internal_info", r.InternalInfo, &g.InternalInfo}, {"extra", r.Extra, &g.Extra}} {
		if err := decodeExact("portgroup", r.UUID, c.field, c.ns, c.dst); err != nil {
			return nil, err
		}
	}
	return g, nil
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
	out := []any{nullIfEmpty(g.Name), nullIfEmpty(g.Address), nullIfEmpty(g.Mode)}
	props, err := encodeMap("portgroup", g.UUID, "properties", g.Properties)
	if err != nil {
		return nil, err
	}
	out = append(out, props, g.StandalonePortsSupported, nullIfEmpty(g.PhysicalNetwork))
	for _, m := range []struct {
		field string
		v     map[string]any
	}{{"internal_info", g.InternalInfo}, {"extra", g.Extra}} {
		v, err := encodeMap("portgroup", g.UUID, m.field, m.v)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (s *Store) explainPortgroupDuplicate(ctx context.Context, g *baremetal.Portgroup, isNew bool, cause error) error {
	return s.explainDuplicate(ctx, "portgroup", "portgroups", g.UUID, isNew, []uniqueField{
		{"address", "address", nullIfEmpty(g.Address)}, {"name", "name", nullIfEmpty(g.Name)}}, cause)
}

// CreatePortgroup implements baremetal.PortgroupStore.
func (s *Store) CreatePortgroup(ctx context.Context, g *baremetal.Portgroup) error {
	if g == nil {
		return &baremetal.InvalidFieldError{Kind: "portgroup", Field: "portgroup", Expected: "a non-nil portgroup"}
	}
	w := g.Clone()
	var err error
	if w.UUID, err = newIdentity("portgroup", w.UUID); err != nil {
		return err
	}
	args, err := portgroupArgs(w)
	if err != nil {
		return err
	}
	now := s.now()
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		nodeID, err := s.nodeIDOf(ctx, tx, "portgroup", w.UUID, w.NodeUUID)
		if err != nil {
			return err
		}
		w.NodeUUID = strings.ToLower(w.NodeUUID)
		bind := append([]any{w.UUID, nodeID}, args...)
		bind = append(bind, micros(now), micros(now), int64(1))
		return tx.QueryRowxContext(ctx, s.d.q("INSERT INTO portgroups (uuid, node_id, name, address, mode, properties, "+
			"standalone_ports_supported, physical_network, internal_info, extra, created_at, updated_at, version) "+
			"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"), bind...).Scan(&w.ID)
	})
	if err = s.finish(ctx, err, "creating portgroup "+w.UUID, func() error { return s.explainPortgroupDuplicate(ctx, w, true, err) }); err != nil {
		return err
	}
	w.CreatedAt, w.UpdatedAt, w.Version = now, now, 1
	*g = *w
	return nil
}

// GetPortgroup implements baremetal.PortgroupStore.
func (s *Store) GetPortgroup(ctx context.Context, ident string) (*baremetal.Portgroup, error) {
	cond, arg := identWhere("g.", ident)
	var r portgroupRow
	err := s.r.GetContext(ctx, &r, s.d.q(portgroupSelect+" WHERE "+cond), arg)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &baremetal.NotFoundError{Kind: "portgroup", Ident: ident}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: reading portgroup %s: %w", ident, err)
	}
	return r.portgroup()
}

// ListPortgroups implements baremetal.PortgroupStore.
func (s *Store) ListPortgroups(ctx context.Context, f baremetal.PortgroupFilter, page baremetal.Page) ([]*baremetal.Portgroup, error) {
	var conds []string
	var args []any
	if f.NodeUUID != "" {
		conds = append(conds, "n.uuid = ?")
		args = append(args, strings.ToLower(f.NodeUUID))
	}
	if f.Address != "" {
		mac, err := baremetal.NormalizeMAC("address", f.Address)
		if err != nil {
			return nil, &baremetal.InvalidFieldError{Kind: "portgroup", Field: "address", Expected: "a 48-bit MAC address such as 52:54:00:12:34:56"}
		}
		conds = append(conds, "g.address = ?")
		args = append(args, mac)
	}
	tail, args, err := s.pageClause(ctx, "portgroups", "portgroup", "g.", page, conds, args)
	if err != nil {
		return nil, err
	}
	var rows []portgroupRow
	if err := s.r.SelectContext(ctx, &rows, s.d.q(portgroupSelect+tail), args...); err != nil {
		return nil, fmt.Errorf("sqlstore: listing portgroups: %w", err)
	}
	out := make([]*baremetal.Portgroup, 0, len(rows))
	for i := range rows {
		g, err := rows[i].portgroup()
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// UpdatePortgroup implements baremetal.PortgroupStore.
func (s *Store) UpdatePortgroup(ctx context.Context, g *baremetal.Portgroup) error {
	if g == nil {
		return &baremetal.InvalidFieldError{Kind: "portgroup", Field: "portgroup", Expected: "a non-nil portgroup"}
	}
	w := g.Clone()
	w.UUID = strings.ToLower(w.UUID)
	args, err := portgroupArgs(w)
	if err != nil {
		return err
	}
	now := s.now()
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		nodeID, err := s.nodeIDOf(ctx, tx, "portgroup", w.UUID, w.NodeUUID)
		if err != nil {
			return err
		}
		w.NodeUUID = strings.ToLower(w.NodeUUID)
		// Ports follow their node: a portgroup with ports stays on it.
		var moved int
		err = tx.QueryRowxContext(ctx, s.d.q("SELECT 1 FROM portgroups g WHERE g.uuid = ? AND g.node_id <> ? "+
			"AND EXISTS (SELECT 1 FROM ports p WHERE p.portgroup_id = g.id)"), w.UUID, nodeID).Scan(&moved)
		if err == nil {
			return &baremetal.PortgroupNotEmptyError{Portgroup: w.UUID}
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		bind := append([]any{nodeID}, args...)
		bind = append(bind, micros(now))
		w.Version, err = s.casUpdate(ctx, tx, "portgroup", "portgroups", w.UUID, w.Version,
			"node_id = ?, name = ?, address = ?, mode = ?, properties = ?, standalone_ports_supported = ?, "+
				"physical_network = ?, internal_info = ?, extra = ?, updated_at = ?", bind)
		return err
	})
	if err = s.finish(ctx, err, "updating portgroup "+w.UUID, func() error { return s.explainPortgroupDuplicate(ctx, w, false, err) }); err != nil {
		return err
	}
	w.UpdatedAt = now
	*g = *w
	return nil
}

// DeletePortgroup implements baremetal.PortgroupStore. The foreign key of
// ports.portgroup_id refuses the delete when a port joined meanwhile.
func (s *Store) DeletePortgroup(ctx context.Context, id string) error {
	id = strings.ToLower(id)
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var pgID int64
		err := tx.QueryRowxContext(ctx, s.d.q("SELECT id FROM portgroups WHERE uuid = ?"), id).Scan(&pgID)
		if errors.Is(err, sql.ErrNoRows) {
			return &baremetal.NotFoundError{Kind: "portgroup", Ident: id}
		}
		if err != nil {
			return err
		}
		var one int
		err = tx.QueryRowxContext(ctx, s.d.q("SELECT 1 FROM ports WHERE portgroup_id = ? LIMIT 1"), pgID).Scan(&one)
		if err == nil {
			return &baremetal.PortgroupNotEmptyError{Portgroup: id}
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err = tx.ExecContext(ctx, s.d.q("DELETE FROM portgroups WHERE id = ?"), pgID)
		return err
	})
	if err != nil && !typed(err) && classify(err) == foreignKeyViolation {
		return &baremetal.PortgroupNotEmptyError{Portgroup: id}
	}
	return s.finish(ctx, err, "deleting portgroup "+id, nil)
}
