package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// portRow is a ports row as sqlx scans it (joined with the node's UUID).
type portRow struct {
	ID                  int64          `db:"id"`
	UUID                string         `db:"uuid"`
	NodeUUID            string         `db:"node_uuid"`
	PortgroupUUID       sql.NullString `db:"portgroup_uuid"`
	Address             string         `db:"address"`
	Name                sql.NullString `db:"name"`
	PXEEnabled          bool           `db:"pxe_enabled"`
	LocalLinkConnection sql.NullString `db:"local_link_connection"`
	PhysicalNetwork     sql.NullString `db:"physical_network"`
	IsSmartNIC          bool           `db:"is_smartnic"`
	InternalInfo        sql.NullString `db:"internal_info"`
	Extra               sql.NullString `db:"extra"`
	Description         sql.NullString `db:"description"`
	Vendor              sql.NullString `db:"vendor"`
	Category            sql.NullString `db:"category"`
	DynamicPortgroup    bool           `db:"available_for_dynamic_portgroup"`
	CreatedAt           int64          `db:"created_at"`
	UpdatedAt           int64          `db:"updated_at"`
	Version             int64          `db:"version"`
}

const portSelect = "SELECT p.id, p.uuid, n.uuid AS node_uuid, g.uuid AS portgroup_uuid, p.address, p.name, p.pxe_enabled, p.local_link_connection, " +
	"p.physical_network, p.is_smartnic, p.internal_info, p.extra, p.description, p.vendor, p.category, " +
	"p.available_for_dynamic_portgroup, p.created_at, p.updated_at, p.version FROM ports p JOIN nodes n ON n.id = p.node_id " +
	"LEFT JOIN portgroups g ON g.id = p.portgroup_id "

func decodeMap(kind, ident, field string, ns sql.NullString) (map[string]any, error) {
	if !ns.Valid {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(ns.String), &m); err != nil {
		return nil, fmt.Errorf("sqlstore: %s %s: decoding %s: %w", kind, ident, field, err)
	}
	return m, nil
}

func (r *portRow) port() (*baremetal.Port, error) {
	p := &baremetal.Port{
		ID: r.ID, UUID: r.UUID, NodeUUID: r.NodeUUID, PortgroupUUID: r.PortgroupUUID.String, Address: r.Address, Name: r.Name.String,
		PXEEnabled: r.PXEEnabled, PhysicalNetwork: r.PhysicalNetwork.String, IsSmartNIC: r.IsSmartNIC,
		Description: r.Description.String, Vendor: r.Vendor.String, Category: r.Category.String,
		NotForDynamicPortgroup: !r.DynamicPortgroup,
		CreatedAt:              timeFrom(sql.NullInt64{Int64: r.CreatedAt, Valid: true}),
		UpdatedAt:              timeFrom(sql.NullInt64{Int64: r.UpdatedAt, Valid: true}),
		Version:                r.Version,
	}
	var err error
	if p.LocalLinkConnection, err = decodeMap("port", r.UUID, "local_link_connection", r.LocalLinkConnection); err != nil {
		return nil, err
	}
	if p.InternalInfo, err = decodeMap("port", r.UUID, "internal_info", r.InternalInfo); err != nil {
		return nil, err
	}
	if p.Extra, err = decodeMap("port", r.UUID, "extra", r.Extra); err != nil {
		return nil, err
	}
	return p, nil
}

// portArgs validates p (normalising its MAC) and returns the values of
// the writable columns: address, name, pxe_enabled, local_link_connection,
// physical_network, is_smartnic, internal_info, extra, description,
// vendor, category, available_for_dynamic_portgroup.
func portArgs(p *baremetal.Port) ([]any, error) {
	bad := func(field, expected string, err error) error {
		return &baremetal.InvalidFieldError{Kind: "port", Ident: p.UUID, Field: field, Expected: expected, Err: err}
	}
	mac, err := baremetal.NormalizeMAC("address", p.Address)
	if err != nil {
		return nil, bad("address", "a 48-bit MAC address such as 52:54:00:12:34:56", nil)
	}
	p.Address = mac
	if p.Name != "" && !validName(p.Name) {
		return nil, bad("name", "letters, digits, '-', '.', '_' or '~', and not a UUID", nil)
	}
	text := func(field, s string, max int) (any, error) {
		if s == "" {
			return nil, nil
		}
		if err := checkText(&baremetal.Node{UUID: p.UUID}, field, s, max); err != nil {
			var ife *baremetal.InvalidFieldError
			if errors.As(err, &ife) {
				return nil, bad(field, ife.Expected, nil)
			}
			return nil, err
		}
		return s, nil
	}
	js := func(field string, m map[string]any) (any, error) {
		if m == nil {
			return nil, nil
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, bad(field, "a JSON-encodable object", err)
		}
		return text(field, string(b), 0)
	}
	out := []any{mac}
	for _, f := range []func() (any, error){
		func() (any, error) { return text("name", p.Name, 255) },
		func() (any, error) { return p.PXEEnabled, nil },
		func() (any, error) { return js("local_link_connection", p.LocalLinkConnection) },
		func() (any, error) { return text("physical_network", p.PhysicalNetwork, 64) },
		func() (any, error) { return p.IsSmartNIC, nil },
		func() (any, error) { return js("internal_info", p.InternalInfo) },
		func() (any, error) { return js("extra", p.Extra) },
		func() (any, error) { return text("description", p.Description, 0) },
		func() (any, error) { return text("vendor", p.Vendor, 32) },
		func() (any, error) { return text("category", p.Category, 80) },
		func() (any, error) { return !p.NotForDynamicPortgroup, nil },
	} {
		v, err := f()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// explainPortDuplicate finds which unique field of p is taken.
func (s *Store) explainPortDuplicate(ctx context.Context, p *baremetal.Port, cause error) error {
	var u, addr string
	var name sql.NullString
	err := s.w.QueryRowxContext(ctx, s.d.q("SELECT uuid, address, name FROM ports WHERE (uuid = ? OR address = ? OR name = ?) AND uuid <> ?"),
		p.UUID, p.Address, nullIfEmpty(p.Name), p.UUID).Scan(&u, &addr, &name)
	if err == nil {
		switch {
		case addr == p.Address:
			return &baremetal.DuplicateError{Kind: "port", Field: "address", Value: p.Address}
		case p.Name != "" && name.String == p.Name:
			return &baremetal.DuplicateError{Kind: "port", Field: "name", Value: p.Name}
		}
	}
	if p.ID == 0 {
		var one int
		if s.w.QueryRowxContext(ctx, s.d.q("SELECT 1 FROM ports WHERE uuid = ?"), p.UUID).Scan(&one) == nil {
			return &baremetal.DuplicateError{Kind: "port", Field: "uuid", Value: p.UUID}
		}
	}
	return fmt.Errorf("sqlstore: port unique constraint violated: %w", cause)
}

// CreatePort implements baremetal.PortStore.
func (s *Store) CreatePort(ctx context.Context, p *baremetal.Port) error {
	if p == nil {
		return &baremetal.InvalidFieldError{Kind: "port", Field: "port", Expected: "a non-nil port"}
	}
	w := p.Clone()
	if w.UUID == "" {
		w.UUID = uuid.NewString()
	} else if !isUUID(w.UUID) {
		return &baremetal.InvalidFieldError{Kind: "port", Ident: w.UUID, Field: "uuid", Expected: "a UUID"}
	}
	w.UUID = strings.ToLower(w.UUID)
	args, err := portValues(w)
	if err != nil {
		return err
	}
	now := s.now()
	w.CreatedAt, w.UpdatedAt, w.Version = now, now, 1
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		nodeID, pgID, err := s.portOwners(ctx, tx, w)
		if err != nil {
			return err
		}
		bind := append([]any{w.UUID, nodeID, pgID}, args...)
		bind = append(bind, micros(now), micros(now), int64(1))
		return tx.QueryRowxContext(ctx, s.d.q("INSERT INTO ports (uuid, node_id, portgroup_id, address, name, pxe_enabled, local_link_connection, "+
			"physical_network, is_smartnic, internal_info, extra, description, vendor, category, "+
			"available_for_dynamic_portgroup, created_at, updated_at, version) "+
			"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"), bind...).Scan(&w.ID)
	})
	if err != nil {
		var nf *baremetal.NotFoundError
		var ife *baremetal.InvalidFieldError
		if errors.As(err, &nf) || errors.As(err, &ife) {
			return err
		}
		if classify(err) == uniqueViolation {
			return s.explainPortDuplicate(ctx, w, err)
		}
		return fmt.Errorf("sqlstore: creating port %s: %w", w.Address, err)
	}
	*p = *w
	return nil
}

// GetPort implements baremetal.PortStore.
func (s *Store) GetPort(ctx context.Context, ident string) (*baremetal.Port, error) {
	var r portRow
	var err error
	if isUUID(ident) {
		err = s.r.GetContext(ctx, &r, s.d.q(portSelect+"WHERE p.uuid = ?"), strings.ToLower(ident))
	} else {
		mac, merr := baremetal.NormalizeMAC("address", ident)
		if merr != nil {
			return nil, &baremetal.InvalidFieldError{Kind: "port", Field: "ident", Expected: "a port UUID or MAC address"}
		}
		err = s.r.GetContext(ctx, &r, s.d.q(portSelect+"WHERE p.address = ?"), mac)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &baremetal.NotFoundError{Kind: "port", Ident: ident}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: reading port %s: %w", ident, err)
	}
	return r.port()
}

// ListPorts implements baremetal.PortStore.
func (s *Store) ListPorts(ctx context.Context, nodeUUID string) ([]*baremetal.Port, error) {
	var rows []portRow
	var err error
	if nodeUUID == "" {
		err = s.r.SelectContext(ctx, &rows, s.d.q(portSelect+"ORDER BY p.id"))
	} else {
		// Every task loads its node's ports: the statement is prepared.
		err = s.st.portsOf.SelectContext(ctx, &rows, strings.ToLower(nodeUUID))
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: listing ports: %w", err)
	}
	out := make([]*baremetal.Port, 0, len(rows))
	for i := range rows {
		p, err := rows[i].port()
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// UpdatePort implements baremetal.PortStore. The port may move to another
// node by changing NodeUUID.
func (s *Store) UpdatePort(ctx context.Context, p *baremetal.Port) error {
	if p == nil {
		return &baremetal.InvalidFieldError{Kind: "port", Field: "port", Expected: "a non-nil port"}
	}
	w := p.Clone()
	w.UUID = strings.ToLower(w.UUID)
	args, err := portValues(w)
	if err != nil {
		return err
	}
	now := s.now()
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		nodeID, pgID, err := s.portOwners(ctx, tx, w)
		if err != nil {
			return err
		}
		bind := append([]any{nodeID, pgID}, args...)
		bind = append(bind, micros(now), w.UUID, w.Version)
		var version int64
		err = tx.QueryRowxContext(ctx, s.d.q("UPDATE ports SET node_id = ?, portgroup_id = ?, address = ?, name = ?, pxe_enabled = ?, local_link_connection = ?, "+
			"physical_network = ?, is_smartnic = ?, internal_info = ?, extra = ?, description = ?, vendor = ?, category = ?, "+
			"available_for_dynamic_portgroup = ?, updated_at = ?, version = version + 1 WHERE uuid = ? AND version = ? RETURNING version"), bind...).Scan(&version)
		if errors.Is(err, sql.ErrNoRows) {
			var actual int64
			if err := tx.QueryRowxContext(ctx, s.d.q("SELECT version FROM ports WHERE uuid = ?"), w.UUID).Scan(&actual); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					return &baremetal.NotFoundError{Kind: "port", Ident: w.UUID}
				}
				return err
			}
			return &baremetal.ConflictError{Kind: "port", Ident: w.UUID, Expected: w.Version, Actual: actual}
		}
		w.Version = version
		return err
	})
	if err != nil {
		var nf *baremetal.NotFoundError
		var cf *baremetal.ConflictError
		var ife *baremetal.InvalidFieldError
		if errors.As(err, &nf) || errors.As(err, &cf) || errors.As(err, &ife) {
			return err
		}
		if classify(err) == uniqueViolation {
			return s.explainPortDuplicate(ctx, w, err)
		}
		return fmt.Errorf("sqlstore: updating port %s: %w", w.UUID, err)
	}
	w.UpdatedAt = now
	*p = *w
	return nil
}

// DeletePort implements baremetal.PortStore.
func (s *Store) DeletePort(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, s.d.q("DELETE FROM ports WHERE uuid = ?"), strings.ToLower(id))
	if err != nil {
		return fmt.Errorf("sqlstore: deleting port %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return &baremetal.NotFoundError{Kind: "port", Ident: id}
	}
	return nil
}

// portValues checks the node w names, lower-cases its UUID in place and
// returns the values of w's columns (portArgs).
func portValues(w *baremetal.Port) ([]any, error) {
	if !isUUID(w.NodeUUID) {
		return nil, &baremetal.InvalidFieldError{Kind: "port", Ident: w.UUID, Field: "node_uuid", Expected: "the UUID of an existing node"}
	}
	w.NodeUUID = strings.ToLower(w.NodeUUID)
	return portArgs(w)
}

// portOwners resolves the ids of the node and the port group (nil for
// none) that p names, inside tx.
func (s *Store) portOwners(ctx context.Context, tx *sqlx.Tx, p *baremetal.Port) (int64, any, error) {
	var nodeID int64
	if err := tx.QueryRowxContext(ctx, s.d.q("SELECT id FROM nodes WHERE uuid = ?"), p.NodeUUID).Scan(&nodeID); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil, &baremetal.NotFoundError{Kind: "node", Ident: p.NodeUUID}
		}
		return 0, nil, err
	}
	pgID, err := s.portgroupOf(ctx, tx, p, nodeID)
	return nodeID, pgID, err
}

// portgroupOf resolves p.PortgroupUUID (lower-cased in place) to the id
// of a portgroup of the node nodeID, inside tx: nil for no portgroup, an
// *InvalidFieldError when it is not a UUID or names no portgroup of that
// node (Ironic refuses a port in another node's portgroup).
func (s *Store) portgroupOf(ctx context.Context, tx *sqlx.Tx, p *baremetal.Port, nodeID int64) (any, error) {
	if p.PortgroupUUID == "" {
		return nil, nil
	}
	bad := &baremetal.InvalidFieldError{Kind: "port", Ident: p.UUID, Field: "portgroup_uuid",
		Expected: "the UUID of a portgroup of node " + p.NodeUUID}
	if !isUUID(p.PortgroupUUID) {
		return nil, bad
	}
	p.PortgroupUUID = strings.ToLower(p.PortgroupUUID)
	var id int64
	err := tx.QueryRowxContext(ctx, s.d.q("SELECT id FROM portgroups WHERE uuid = ? AND node_id = ?"), p.PortgroupUUID, nodeID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, bad
	}
	if err != nil {
		return nil, err
	}
	return id, nil
}
