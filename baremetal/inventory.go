package baremetal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Stored inspection inventories (Ironic's node inventory, API 1.81, with
// [inventory]data_backend = "database"): the hardware inventory and the
// plugin data of a node's last successful in-band inspection, kept beside
// the node, replaced by the next successful inspection, left alone by a
// failed one and deleted with the node.

// NodeInventory is what the last successful inspection of a node
// reported: the ramdisk's inventory document and the plugin data (every
// other key the ramdisk posted, such as boot_interface, root_disk or the
// ramdisk's logs), both as JSON objects kept byte for byte as saved.
type NodeInventory struct {
	// Inventory is IPA's hardware inventory document, a JSON object.
	Inventory json.RawMessage
	// PluginData is a JSON object; empty when saved is stored and read
	// back as {} (Ironic's default).
	PluginData json.RawMessage
	// CreatedAt is when the node's first inventory was saved; UpdatedAt
	// when the current one was. The store stamps both.
	CreatedAt time.Time
	UpdatedAt time.Time
}

// InventoryStore keeps one inspection inventory per node.
type InventoryStore interface {
	// SaveNodeInventory stores inv as the inventory of the node with the
	// given UUID, replacing the one it had, and fills inv.CreatedAt
	// (kept from the replaced inventory) and inv.UpdatedAt. Errors:
	// *InvalidFieldError (inventory or plugin_data not a JSON object),
	// *NotFoundError (node).
	SaveNodeInventory(ctx context.Context, nodeUUID string, inv *NodeInventory) error
	// GetNodeInventory returns the inventory of the node with the given
	// UUID. Errors: *InventoryNotRecordedError when the node has none,
	// *NotFoundError when the node does not exist (both match
	// ErrNotFound).
	GetNodeInventory(ctx context.Context, nodeUUID string) (*NodeInventory, error)
}

// InventoryNotRecordedError says a node exists but has no stored
// inspection inventory (Ironic's InventoryNotRecorded, HTTP 404): it was
// never inspected in band, or its inspections all failed. It matches
// ErrNotFound.
type InventoryNotRecordedError struct {
	// Node is the node's UUID.
	Node string
}

func (e *InventoryNotRecordedError) Error() string {
	return fmt.Sprintf("baremetal: inventory not recorded for node %s", e.Node)
}

// Is reports whether target is ErrNotFound.
func (e *InventoryNotRecordedError) Is(target error) bool { return target == ErrNotFound }

// CheckInventory validates inv for SaveNodeInventory, for the stores:
// the inventory must be a JSON object and the plugin data empty or a JSON
// object. The errors name the node and the field, never the value.
func CheckInventory(nodeUUID string, inv *NodeInventory) error {
	if inv == nil {
		return &InvalidFieldError{Kind: "inventory", Ident: nodeUUID, Field: "inventory", Expected: "a non-nil inventory"}
	}
	if !isJSONObject(inv.Inventory) {
		return &InvalidFieldError{Kind: "inventory", Ident: nodeUUID, Field: "inventory", Expected: "a JSON object (the ramdisk's inventory document)"}
	}
	if len(bytes.TrimSpace(inv.PluginData)) > 0 && !isJSONObject(inv.PluginData) {
		return &InvalidFieldError{Kind: "inventory", Ident: nodeUUID, Field: "plugin_data", Expected: "empty or a JSON object"}
	}
	return nil
}

// isJSONObject reports whether b is one valid JSON object.
func isJSONObject(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) >= 2 && t[0] == '{' && json.Valid(t)
}
