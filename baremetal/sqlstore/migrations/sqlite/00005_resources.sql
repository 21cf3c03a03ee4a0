-- +goose Up
-- Portgroups, allocations, deploy templates and runbooks (Ironic's tables
-- of the same names), the port's portgroup and the node's allocation.
-- A template's or runbook's steps are one JSON list in the row (Ironic
-- keeps them in child tables): they are always read and written whole.
CREATE TABLE portgroups (
    id                         INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid                       VARCHAR(36)  NOT NULL UNIQUE,
    node_id                    BIGINT       NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    name                       VARCHAR(255) UNIQUE,
    address                    VARCHAR(18)  UNIQUE,
    mode                       VARCHAR(255),
    properties                 TEXT,
    standalone_ports_supported BOOLEAN      NOT NULL DEFAULT 1,
    physical_network           VARCHAR(64),
    internal_info              TEXT,
    extra                      TEXT,
    created_at                 BIGINT       NOT NULL,
    updated_at                 BIGINT       NOT NULL,
    version                    BIGINT       NOT NULL
);
CREATE INDEX portgroups_node_id ON portgroups (node_id);

-- NO ACTION: checked at the end of the statement, so deleting a node
-- (which cascades to both its ports and its portgroups) passes, while
-- deleting a portgroup that still has ports fails.
ALTER TABLE ports ADD COLUMN portgroup_id BIGINT REFERENCES portgroups (id);
CREATE INDEX ports_portgroup_id ON ports (portgroup_id);

CREATE TABLE allocations (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid               VARCHAR(36)  NOT NULL UNIQUE,
    name               VARCHAR(255) UNIQUE,
    node_id            BIGINT       UNIQUE REFERENCES nodes (id) ON DELETE CASCADE,
    state              VARCHAR(15)  NOT NULL,
    last_error         TEXT,
    resource_class     VARCHAR(80),
    traits             TEXT,
    candidate_nodes    TEXT,
    extra              TEXT,
    owner              VARCHAR(255),
    conductor_affinity BIGINT,
    created_at         BIGINT       NOT NULL,
    updated_at         BIGINT       NOT NULL,
    version            BIGINT       NOT NULL
);
CREATE INDEX allocations_state ON allocations (state);

ALTER TABLE nodes ADD COLUMN allocation_uuid VARCHAR(36);
CREATE UNIQUE INDEX nodes_allocation_uuid ON nodes (allocation_uuid) WHERE allocation_uuid IS NOT NULL;

CREATE TABLE deploy_templates (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid       VARCHAR(36)  NOT NULL UNIQUE,
    name       VARCHAR(255) NOT NULL UNIQUE,
    steps      TEXT         NOT NULL,
    extra      TEXT,
    created_at BIGINT       NOT NULL,
    updated_at BIGINT       NOT NULL,
    version    BIGINT       NOT NULL
);

CREATE TABLE runbooks (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid            VARCHAR(36)  NOT NULL UNIQUE,
    name            VARCHAR(255) NOT NULL UNIQUE,
    steps           TEXT         NOT NULL,
    disable_ramdisk BOOLEAN      NOT NULL DEFAULT 0,
    public          BOOLEAN      NOT NULL DEFAULT 0,
    owner           VARCHAR(255),
    extra           TEXT,
    created_at      BIGINT       NOT NULL,
    updated_at      BIGINT       NOT NULL,
    version         BIGINT       NOT NULL
);

-- +goose Down
DROP TABLE runbooks;
DROP TABLE deploy_templates;
DROP INDEX nodes_allocation_uuid;
ALTER TABLE nodes DROP COLUMN allocation_uuid;
DROP TABLE allocations;
-- SQLite cannot drop a column that has a foreign key: rebuild ports.
CREATE TABLE ports_v4 (
    id                    INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid                  VARCHAR(36)  NOT NULL UNIQUE,
    node_id               BIGINT       NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    address               VARCHAR(18)  NOT NULL UNIQUE,
    name                  VARCHAR(255) UNIQUE,
    pxe_enabled           BOOLEAN      NOT NULL DEFAULT 1,
    local_link_connection TEXT,
    physical_network      VARCHAR(64),
    is_smartnic           BOOLEAN      NOT NULL DEFAULT 0,
    internal_info         TEXT,
    extra                 TEXT,
    description           TEXT,
    vendor                VARCHAR(32),
    category              VARCHAR(80),
    created_at            BIGINT       NOT NULL,
    updated_at            BIGINT       NOT NULL,
    version               BIGINT       NOT NULL
);
INSERT INTO ports_v4 (id, uuid, node_id, address, name, pxe_enabled, local_link_connection, physical_network,
    is_smartnic, internal_info, extra, description, vendor, category, created_at, updated_at, version)
SELECT id, uuid, node_id, address, name, pxe_enabled, local_link_connection, physical_network,
    is_smartnic, internal_info, extra, description, vendor, category, created_at, updated_at, version FROM ports;
DROP TABLE ports;
ALTER TABLE ports_v4 RENAME TO ports;
CREATE INDEX ports_node_id ON ports (node_id);
DROP TABLE portgroups;
