-- +goose Up
-- The inventory and plugin data of each node's last successful inspection
-- (Ironic's node_inventory table): one row per node, replaced by the next
-- successful inspection, deleted with the node. Both documents are JSON
-- objects stored as text, byte for byte as the conductor saved them.
CREATE TABLE node_inventory (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id        BIGINT NOT NULL UNIQUE REFERENCES nodes (id) ON DELETE CASCADE,
    inventory_data TEXT   NOT NULL,
    plugin_data    TEXT   NOT NULL,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);

-- +goose Down
DROP TABLE node_inventory;
