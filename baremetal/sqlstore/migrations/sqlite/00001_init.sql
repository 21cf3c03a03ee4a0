-- +goose Up
-- Nodes, ports, conductors and node history. Timestamps are Unix
-- microseconds (NULL for "never"); JSON fields are text.
CREATE TABLE nodes (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid                   VARCHAR(36)  NOT NULL UNIQUE,
    name                   VARCHAR(255) UNIQUE,
    instance_uuid          VARCHAR(36)  UNIQUE,
    instance_name          VARCHAR(255),
    driver                 VARCHAR(255) NOT NULL DEFAULT '',
    bios_interface         VARCHAR(255),
    boot_interface         VARCHAR(255),
    console_interface      VARCHAR(255),
    deploy_interface       VARCHAR(255),
    firmware_interface     VARCHAR(255),
    inspect_interface      VARCHAR(255),
    management_interface   VARCHAR(255),
    network_interface      VARCHAR(255),
    power_interface        VARCHAR(255),
    raid_interface         VARCHAR(255),
    rescue_interface       VARCHAR(255),
    storage_interface      VARCHAR(255),
    vendor_interface       VARCHAR(255),
    driver_info            TEXT,
    driver_internal_info   TEXT,
    instance_info          TEXT,
    properties             TEXT,
    extra                  TEXT,
    clean_step             TEXT,
    deploy_step            TEXT,
    service_step           TEXT,
    raid_config            TEXT,
    target_raid_config     TEXT,
    network_data           TEXT,
    power_state            VARCHAR(15),
    target_power_state     VARCHAR(15),
    provision_state        VARCHAR(15)  NOT NULL,
    target_provision_state VARCHAR(15),
    provision_updated_at   BIGINT,
    maintenance            BOOLEAN      NOT NULL DEFAULT 0,
    maintenance_reason     TEXT,
    fault                  VARCHAR(255),
    console_enabled        BOOLEAN      NOT NULL DEFAULT 0,
    last_error             TEXT,
    reservation            VARCHAR(255),
    conductor_group        VARCHAR(255) NOT NULL DEFAULT '',
    conductor_affinity     BIGINT,
    traits                 TEXT,
    resource_class         VARCHAR(80),
    owner                  VARCHAR(255),
    lessee                 VARCHAR(255),
    description            TEXT,
    protected              BOOLEAN      NOT NULL DEFAULT 0,
    protected_reason       TEXT,
    retired                BOOLEAN      NOT NULL DEFAULT 0,
    retired_reason         TEXT,
    automated_clean        BOOLEAN,
    inspection_started_at  BIGINT,
    inspection_finished_at BIGINT,
    boot_mode              VARCHAR(16),
    secure_boot            BOOLEAN,
    shard                  VARCHAR(255),
    parent_node            VARCHAR(36),
    disable_power_off      BOOLEAN      NOT NULL DEFAULT 0,
    health                 VARCHAR(32),
    created_at             BIGINT       NOT NULL,
    updated_at             BIGINT       NOT NULL,
    version                BIGINT       NOT NULL
);
-- The queries periodic tasks run: by state (paged by id), by state and
-- age (callback timeouts), by holder (orphans, start and stop), by group
-- and driver (ring mapping), by affinity (takeover).
CREATE INDEX nodes_provision_state_id ON nodes (provision_state, id);
CREATE INDEX nodes_provision_state_updated ON nodes (provision_state, provision_updated_at);
CREATE INDEX nodes_reservation ON nodes (reservation);
CREATE INDEX nodes_conductor_group ON nodes (conductor_group);
CREATE INDEX nodes_driver ON nodes (driver);
CREATE INDEX nodes_maintenance ON nodes (maintenance);

CREATE TABLE ports (
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
CREATE INDEX ports_node_id ON ports (node_id);

CREATE TABLE conductors (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    hostname        VARCHAR(255) NOT NULL UNIQUE,
    conductor_group VARCHAR(255) NOT NULL DEFAULT '',
    drivers         TEXT,
    online          BOOLEAN      NOT NULL DEFAULT 1,
    created_at      BIGINT       NOT NULL,
    updated_at      BIGINT       NOT NULL
);

CREATE TABLE conductor_hardware_interfaces (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    conductor_id   BIGINT       NOT NULL REFERENCES conductors (id) ON DELETE CASCADE,
    hardware_type  VARCHAR(255) NOT NULL,
    interface_type VARCHAR(16)  NOT NULL,
    interface_name VARCHAR(255) NOT NULL,
    is_default     BOOLEAN      NOT NULL DEFAULT 0,
    UNIQUE (conductor_id, hardware_type, interface_type, interface_name)
);

CREATE TABLE node_history (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id    BIGINT       NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    event      VARCHAR(255) NOT NULL,
    event_type VARCHAR(255),
    severity   VARCHAR(16)  NOT NULL,
    message    TEXT,
    conductor  VARCHAR(255),
    user_name  VARCHAR(255),
    created_at BIGINT       NOT NULL
);
CREATE INDEX node_history_node_id ON node_history (node_id, id);

-- +goose Down
DROP TABLE node_history;
DROP TABLE conductor_hardware_interfaces;
DROP TABLE conductors;
DROP TABLE ports;
DROP TABLE nodes;
