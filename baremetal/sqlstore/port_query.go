package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
)

// portSortExpr maps a sort key to the expression ordered on. Nullable
// text columns sort as "" so that keyset paging can compare them.
var portSortExpr = map[string]string{
	"id": "p.id", "uuid": "p.uuid", "address": "p.address",
	"name": "COALESCE(p.name, '')", "pxe_enabled": "p.pxe_enabled",
	"physical_network": "COALESCE(p.physical_network, '')", "is_smartnic": "p.is_smartnic",
	"description": "COALESCE(p.description, '')", "vendor": "COALESCE(p.vendor, '')",
	"category": "COALESCE(p.category, '')", "created_at": "p.created_at", "updated_at": "p.updated_at",
}

// QueryPorts implements baremetal.PortStore: one query joining the
// nodes, with keyset paging on (sort expression, id).
func (s *Store) QueryPorts(ctx context.Context, q baremetal.PortQuery, page baremetal.Page) ([]*baremetal.Port, error) {
	if page.Limit < 0 {
		return nil, &baremetal.InvalidFieldError{Kind: "page", Field: "limit", Expected: "zero (no limit) or a positive number"}
	}
	key := q.SortKey
	if key == "" {
		key = "id"
	}
	expr, ok := portSortExpr[key]
	if !ok {
		return nil, &baremetal.InvalidFieldError{Kind: "page", Field: "sort_key", Expected: "one of " + strings.Join(baremetal.PortSortKeys(), ", ")}
	}
	var conds []string
	var args []any
	if q.NodeUUID != "" {
		conds = append(conds, "n.uuid = ?")
		args = append(args, strings.ToLower(q.NodeUUID))
	}
	if q.Address != "" {
		mac, err := baremetal.NormalizeMAC("address", q.Address)
		if err != nil {
			return nil, err
		}
		conds = append(conds, "p.address = ?")
		args = append(args, mac)
	}
	if q.Name != "" {
		conds = append(conds, "p.name = ?")
		args = append(args, q.Name)
	}
	if q.PortgroupUUID != "" {
		conds = append(conds, "g.uuid = ?")
		args = append(args, strings.ToLower(q.PortgroupUUID))
	}
	in := func(col string, vals []string, lower bool) {
		marks := make([]string, len(vals))
		for i, v := range vals {
			marks[i] = "?"
			if lower {
				v = strings.ToLower(v)
			}
			args = append(args, v)
		}
		conds = append(conds, col+" IN ("+strings.Join(marks, ", ")+")")
	}
	if len(q.ConductorGroups) > 0 {
		in("lower(n.conductor_group)", q.ConductorGroups, true)
	}
	if len(q.Shards) > 0 {
		in("n.shard", q.Shards, false)
	}
	if q.DescriptionContains != "" {
		esc := strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(strings.ToLower(q.DescriptionContains))
		conds = append(conds, `lower(p.description) LIKE ? ESCAPE '\'`)
		args = append(args, "%"+esc+"%")
	}
	cmp, dir := ">", "ASC"
	if q.Descending {
		cmp, dir = "<", "DESC"
	}
	if page.Marker != "" {
		var mv any
		var mid int64
		err := s.r.QueryRowxContext(ctx, s.d.q("SELECT "+expr+", p.id FROM ports p WHERE p.uuid = ?"), strings.ToLower(page.Marker)).Scan(&mv, &mid)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, &baremetal.InvalidFieldError{Kind: "page", Field: "marker", Expected: "the UUID of an existing port"}
		}
		if err != nil {
			return nil, fmt.Errorf("sqlstore: resolving port marker: %w", err)
		}
		if b, ok := mv.([]byte); ok {
			mv = string(b) // compare as text, never as a blob
		}
		if key == "id" {
			conds = append(conds, "p.id "+cmp+" ?")
			args = append(args, mid)
		} else {
			conds = append(conds, "("+expr+" "+cmp+" ? OR ("+expr+" = ? AND p.id "+cmp+" ?))")
			args = append(args, mv, mv, mid)
		}
	}
	stmt := portSelect
	if len(conds) > 0 {
		stmt += "WHERE " + strings.Join(conds, " AND ") + " "
	}
	stmt += "ORDER BY " + expr + " " + dir
	if key != "id" {
		stmt += ", p.id " + dir
	}
	if page.Limit > 0 {
		stmt += fmt.Sprintf(" LIMIT %d", page.Limit)
	}
	var rows []portRow
	if err := s.r.SelectContext(ctx, &rows, s.d.q(stmt), args...); err != nil {
		return nil, fmt.Errorf("sqlstore: querying ports: %w", err)
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

// ListConductors implements baremetal.ConductorStore.
func (s *Store) ListConductors(ctx context.Context) ([]*baremetal.ConductorRecord, error) {
	var rows []conductorRow
	if err := s.r.SelectContext(ctx, &rows, s.d.q(conductorSelect+"ORDER BY id")); err != nil {
		return nil, fmt.Errorf("sqlstore: listing conductors: %w", err)
	}
	out := make([]*baremetal.ConductorRecord, 0, len(rows))
	for i := range rows {
		c, err := rows[i].record()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
