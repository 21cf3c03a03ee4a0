-- +goose Up
-- Ironic 1.111 and 1.112: a port's available_for_dynamic_portgroup
-- (Ironic's default true), a runbook's description and traits (a JSON
-- list of trait names, sorted). A runbook stored before traits existed
-- gets its name, then always a trait, as its one trait, as Ironic's
-- online data migration migrate_runbook_names_to_traits gives it.
ALTER TABLE ports ADD COLUMN available_for_dynamic_portgroup BOOLEAN NOT NULL DEFAULT 1;
ALTER TABLE runbooks ADD COLUMN description VARCHAR(255);
ALTER TABLE runbooks ADD COLUMN traits TEXT;
UPDATE runbooks SET traits = '["' || name || '"]';

-- +goose Down
ALTER TABLE runbooks DROP COLUMN traits;
ALTER TABLE runbooks DROP COLUMN description;
ALTER TABLE ports DROP COLUMN available_for_dynamic_portgroup;
