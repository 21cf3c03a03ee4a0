-- +goose Up
-- Fewer index entries per node write: the callback-timeout query is served
-- by (provision_state, id) since nodes in a wait state are few; the
-- reservation and maintenance indexes only hold the rows they are for
-- (reserved nodes, nodes in maintenance), which is what the orphan and
-- maintenance queries look up.
DROP INDEX nodes_provision_state_updated;
DROP INDEX nodes_reservation;
CREATE INDEX nodes_reservation ON nodes (reservation) WHERE reservation IS NOT NULL;
DROP INDEX nodes_maintenance;
CREATE INDEX nodes_maintenance ON nodes (id) WHERE maintenance = TRUE;

-- +goose Down
DROP INDEX nodes_maintenance;
CREATE INDEX nodes_maintenance ON nodes (maintenance);
DROP INDEX nodes_reservation;
CREATE INDEX nodes_reservation ON nodes (reservation);
CREATE INDEX nodes_provision_state_updated ON nodes (provision_state, provision_updated_at);
