-- +goose Up
-- Reservations and step saves become heap-only (HOT) updates. PostgreSQL
-- writes a new row version for every update; when no indexed column
-- changes and the page has room, the new version stays on the same page,
-- no index gets an entry, and the old version is pruned the next time the
-- page is read, without waiting for VACUUM. Before, every reserve and
-- release changed the indexed reservation column, so each one added an
-- entry to all nine node indexes, and with autovacuum slow or off those
-- entries piled up run after run (the fleet benchmark got slower with
-- every run on the same database). The reservation index served only the
-- orphan query and the release of a conductor's locks, periodic
-- statements for which a scan of the nodes table is cheap next to the
-- reserve and release of every operation. A fill factor of 70 leaves the
-- room on each page that a HOT update needs.
DROP INDEX nodes_reservation;
ALTER TABLE nodes SET (fillfactor = 70);

-- +goose Down
ALTER TABLE nodes RESET (fillfactor);
CREATE INDEX nodes_reservation ON nodes (reservation) WHERE reservation IS NOT NULL;
