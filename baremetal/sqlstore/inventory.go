package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/jmoiron/sqlx"
)

// saveInventorySQL inserts a node's inventory or replaces the one it has
// (one row per node: node_id is unique), keeping created_at. The SELECT
// yields no row for an unknown node, so nothing is written and RETURNING
// returns nothing.
const saveInventorySQL = "INSERT INTO node_inventory (node_id, inventory_data, plugin_data, created_at, updated_at) " +
	"SELECT id, ?, ?, CAST(? AS BIGINT), CAST(? AS BIGINT) FROM nodes WHERE uuid = ? " +
	"ON CONFLICT (node_id) DO UPDATE SET inventory_data = excluded.inventory_data, plugin_data = excluded.plugin_data, " +
	"updated_at = excluded.updated_at " +
	"RETURNING created_at, updated_at"

// SaveNodeInventory implements baremetal.InventoryStore: one upsert, so
// the node's inventory is either the old one or the new one, never a mix.
// On SQLite it joins the group commit of concurrent writes.
func (s *Store) SaveNodeInventory(ctx context.Context, nodeUUID string, inv *baremetal.NodeInventory) error {
	if err := baremetal.CheckInventory(nodeUUID, inv); err != nil {
		return err
	}
	id := strings.ToLower(nodeUUID)
	plugin := "{}"
	if len(bytes.TrimSpace(inv.PluginData)) > 0 {
		plugin = string(inv.PluginData)
	}
	now := micros(s.now())
	var created, updated int64
	err := s.write(ctx, func(w writeTx) error {
		return s.writeRow(w, saveInventorySQL, string(inv.Inventory), plugin, now, now, id).Scan(&created, &updated)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return &baremetal.NotFoundError{Kind: "node", Ident: nodeUUID}
	}
	if err != nil {
		// The error never quotes the documents: they can be large, and
		// plugin data may carry the ramdisk's logs.
		return fmt.Errorf("sqlstore: saving the inventory of node %s: %w", nodeUUID, err)
	}
	inv.CreatedAt = timeFrom(sql.NullInt64{Int64: created, Valid: true})
	inv.UpdatedAt = timeFrom(sql.NullInt64{Int64: updated, Valid: true})
	return nil
}

// writeRow runs a one-row write query on the op's transaction when it has
// one, on the writer otherwise.
func (s *Store) writeRow(w writeTx, query string, args ...any) *sqlx.Row {
	if w.tx != nil {
		return w.tx.QueryRowxContext(w.ctx, s.d.q(query), args...)
	}
	return s.w.QueryRowxContext(w.ctx, s.d.q(query), args...)
}

// GetNodeInventory implements baremetal.InventoryStore. The node row is
// read in the same query, so an unknown node and a node without an
// inventory are told apart without a race.
func (s *Store) GetNodeInventory(ctx context.Context, nodeUUID string) (*baremetal.NodeInventory, error) {
	var inv, plugin sql.NullString
	var created, updated sql.NullInt64
	err := s.r.QueryRowxContext(ctx, s.d.q("SELECT i.inventory_data, i.plugin_data, i.created_at, i.updated_at "+
		"FROM nodes n LEFT JOIN node_inventory i ON i.node_id = n.id WHERE n.uuid = ?"), strings.ToLower(nodeUUID)).
		Scan(&inv, &plugin, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &baremetal.NotFoundError{Kind: "node", Ident: nodeUUID}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: reading the inventory of node %s: %w", nodeUUID, err)
	}
	if !inv.Valid {
		return nil, &baremetal.InventoryNotRecordedError{Node: nodeUUID}
	}
	return &baremetal.NodeInventory{
		Inventory:  json.RawMessage(inv.String),
		PluginData: json.RawMessage(plugin.String),
		CreatedAt:  timeFrom(created),
		UpdatedAt:  timeFrom(updated),
	}, nil
}
