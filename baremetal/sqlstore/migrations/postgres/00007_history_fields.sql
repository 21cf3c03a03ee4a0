-- +goose Up
-- Ironic 1.115's history fields: the node's provision state and target
-- when the entry was recorded, and how long the node had been in that
-- state (microseconds; NULL when the node's provision state was never
-- stamped). The index pages a node's history by created_at in the
-- database (ties broken by id).
ALTER TABLE node_history ADD COLUMN state VARCHAR(255);
ALTER TABLE node_history ADD COLUMN target_provision_state VARCHAR(255);
ALTER TABLE node_history ADD COLUMN duration_us BIGINT;
CREATE INDEX node_history_node_created ON node_history (node_id, created_at, id);

-- +goose Down
DROP INDEX node_history_node_created;
ALTER TABLE node_history DROP COLUMN duration_us;
ALTER TABLE node_history DROP COLUMN target_provision_state;
ALTER TABLE node_history DROP COLUMN state;
