-- +goose Up
-- Chassis (Ironic's table of the same name) and the node's chassis, and
-- nodes' volume connectors and targets (Ironic's volume_connectors and
-- volume_targets). A node names its chassis by UUID, as the API shows it.
-- SQLite cannot drop a column that has a foreign key, so here the
-- reference is kept by triggers, which fail with a constraint error like
-- a foreign key would (PostgreSQL has the foreign key itself).
CREATE TABLE chassis (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid        VARCHAR(36)  NOT NULL UNIQUE,
    description VARCHAR(255),
    extra       TEXT,
    created_at  BIGINT       NOT NULL,
    updated_at  BIGINT       NOT NULL,
    version     BIGINT       NOT NULL
);

ALTER TABLE nodes ADD COLUMN chassis_uuid VARCHAR(36);
CREATE INDEX nodes_chassis_uuid ON nodes (chassis_uuid) WHERE chassis_uuid IS NOT NULL;

-- +goose StatementBegin
CREATE TRIGGER nodes_chassis_insert BEFORE INSERT ON nodes
WHEN NEW.chassis_uuid IS NOT NULL AND NOT EXISTS (SELECT 1 FROM chassis WHERE uuid = NEW.chassis_uuid)
BEGIN
    SELECT RAISE(ABORT, 'node names a chassis that does not exist');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER nodes_chassis_update BEFORE UPDATE OF chassis_uuid ON nodes
WHEN NEW.chassis_uuid IS NOT NULL AND NOT EXISTS (SELECT 1 FROM chassis WHERE uuid = NEW.chassis_uuid)
BEGIN
    SELECT RAISE(ABORT, 'node names a chassis that does not exist');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER chassis_delete BEFORE DELETE ON chassis
WHEN EXISTS (SELECT 1 FROM nodes WHERE chassis_uuid = OLD.uuid)
BEGIN
    SELECT RAISE(ABORT, 'chassis still has nodes');
END;
-- +goose StatementEnd

CREATE TABLE volume_connectors (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid         VARCHAR(36)  NOT NULL UNIQUE,
    node_id      BIGINT       NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    type         VARCHAR(32)  NOT NULL,
    connector_id VARCHAR(255) NOT NULL,
    extra        TEXT,
    created_at   BIGINT       NOT NULL,
    updated_at   BIGINT       NOT NULL,
    version      BIGINT       NOT NULL,
    UNIQUE (type, connector_id)
);
CREATE INDEX volume_connectors_node_id ON volume_connectors (node_id);

CREATE TABLE volume_targets (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid        VARCHAR(36)  NOT NULL UNIQUE,
    node_id     BIGINT       NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    volume_type VARCHAR(64)  NOT NULL,
    properties  TEXT,
    boot_index  INTEGER      NOT NULL,
    volume_id   VARCHAR(36)  NOT NULL,
    extra       TEXT,
    created_at  BIGINT       NOT NULL,
    updated_at  BIGINT       NOT NULL,
    version     BIGINT       NOT NULL,
    UNIQUE (node_id, boot_index)
);

-- +goose Down
DROP TABLE volume_targets;
DROP TABLE volume_connectors;
DROP TRIGGER chassis_delete;
DROP TRIGGER nodes_chassis_update;
DROP TRIGGER nodes_chassis_insert;
DROP INDEX nodes_chassis_uuid;
ALTER TABLE nodes DROP COLUMN chassis_uuid;
DROP TABLE chassis;
