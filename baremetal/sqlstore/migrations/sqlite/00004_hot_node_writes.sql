-- +goose Up
-- Nothing: migration 4 tunes PostgreSQL's row versioning (see
-- migrations/postgres/00004_hot_node_writes.sql); SQLite updates rows in
-- place and keeps its reservation index. The empty step keeps both
-- dialects at the same schema version.
SELECT 1;

-- +goose Down
SELECT 1;
