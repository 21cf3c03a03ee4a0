package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/jmoiron/sqlx"
)

type conductorRow struct {
	ID             int64          `db:"id"`
	Hostname       string         `db:"hostname"`
	ConductorGroup string         `db:"conductor_group"`
	Drivers        sql.NullString `db:"drivers"`
	Online         bool           `db:"online"`
	CreatedAt      int64          `db:"created_at"`
	UpdatedAt      int64          `db:"updated_at"`
}

const conductorSelect = "SELECT id, hostname, conductor_group, drivers, online, created_at, updated_at FROM conductors "

func (r *conductorRow) record() (*baremetal.ConductorRecord, error) {
	c := &baremetal.ConductorRecord{
		ID: r.ID, Hostname: r.Hostname, ConductorGroup: r.ConductorGroup, Online: r.Online,
		CreatedAt: timeFrom(sql.NullInt64{Int64: r.CreatedAt, Valid: true}),
		UpdatedAt: timeFrom(sql.NullInt64{Int64: r.UpdatedAt, Valid: true}),
	}
	if r.Drivers.Valid {
		if err := json.Unmarshal([]byte(r.Drivers.String), &c.Drivers); err != nil {
			return nil, fmt.Errorf("sqlstore: conductor %s: decoding drivers: %w", r.Hostname, err)
		}
	}
	return c, nil
}

func badConductor(host, field, expected string) error {
	return &baremetal.InvalidFieldError{Kind: "conductor", Ident: host, Field: field, Expected: expected}
}

// RegisterConductor implements baremetal.ConductorStore.
func (s *Store) RegisterConductor(ctx context.Context, r baremetal.ConductorRegistration) (*baremetal.ConductorRecord, error) {
	n := &baremetal.Node{UUID: r.Hostname}
	if r.Hostname == "" {
		return nil, badConductor("", "hostname", "a non-empty hostname")
	}
	if err := checkText(n, "hostname", r.Hostname, 255); err != nil {
		return nil, badConductor(r.Hostname, "hostname", "at most 255 characters of UTF-8 text")
	}
	if err := checkText(n, "conductor_group", r.ConductorGroup, 255); err != nil {
		return nil, badConductor(r.Hostname, "conductor_group", "at most 255 characters of UTF-8 text")
	}
	for _, hi := range r.Interfaces {
		if hi.HardwareType == "" || hi.InterfaceName == "" || hi.InterfaceType == "" || len(hi.InterfaceType) > 16 ||
			len(hi.HardwareType) > 255 || len(hi.InterfaceName) > 255 {
			return nil, badConductor(r.Hostname, "interfaces", "hardware type, interface type (at most 16 characters) and interface name, all set")
		}
	}
	drivers := r.Drivers
	if drivers == nil {
		drivers = []string{}
	}
	dj, err := json.Marshal(drivers)
	if err != nil {
		return nil, badConductor(r.Hostname, "drivers", "a list of hardware type names")
	}
	now := micros(s.now())
	var id int64
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		var online bool
		err := tx.QueryRowxContext(ctx, s.d.q("SELECT id, online FROM conductors WHERE hostname = ?"), r.Hostname).Scan(&id, &online)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if err := tx.QueryRowxContext(ctx, s.d.q("INSERT INTO conductors (hostname, conductor_group, drivers, online, created_at, updated_at) "+
				"VALUES (?, ?, ?, ?, ?, ?) RETURNING id"), r.Hostname, r.ConductorGroup, string(dj), true, now, now).Scan(&id); err != nil {
				return err
			}
		case err != nil:
			return err
		case online && !r.UpdateExisting:
			return &baremetal.ConductorAlreadyRegisteredError{Hostname: r.Hostname}
		default:
			if _, err := tx.ExecContext(ctx, s.d.q("UPDATE conductors SET conductor_group = ?, drivers = ?, online = ?, updated_at = ? WHERE id = ?"),
				r.ConductorGroup, string(dj), true, now, id); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, s.d.q("DELETE FROM conductor_hardware_interfaces WHERE conductor_id = ?"), id); err != nil {
			return err
		}
		for _, hi := range r.Interfaces {
			if _, err := tx.ExecContext(ctx, s.d.q("INSERT INTO conductor_hardware_interfaces (conductor_id, hardware_type, interface_type, interface_name, is_default) "+
				"VALUES (?, ?, ?, ?, ?)"), id, hi.HardwareType, hi.InterfaceType, hi.InterfaceName, hi.Default); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		var already *baremetal.ConductorAlreadyRegisteredError
		if errors.As(err, &already) {
			return nil, err
		}
		if classify(err) == uniqueViolation {
			// Another process registered the same hostname, or the
			// interfaces list repeats a row.
			if _, gerr := s.GetConductor(ctx, r.Hostname); gerr == nil && !r.UpdateExisting {
				return nil, &baremetal.ConductorAlreadyRegisteredError{Hostname: r.Hostname}
			}
			return nil, badConductor(r.Hostname, "interfaces", "no repeated (hardware type, interface type, interface name) row")
		}
		return nil, fmt.Errorf("sqlstore: registering conductor %s: %w", r.Hostname, err)
	}
	return s.GetConductor(ctx, r.Hostname)
}

// touchConductor sets online and updated_at of a conductor.
func (s *Store) touchConductor(ctx context.Context, hostname string, online bool) error {
	q := "UPDATE conductors SET online = ?, updated_at = ? WHERE hostname = ?"
	res, err := s.ka.ExecContext(ctx, s.d.q(q), online, micros(s.now()), hostname)
	if err != nil {
		return fmt.Errorf("sqlstore: updating conductor %s: %w", hostname, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return &baremetal.NotFoundError{Kind: "conductor", Ident: hostname}
	}
	return nil
}

// KeepaliveConductor implements baremetal.ConductorStore.
func (s *Store) KeepaliveConductor(ctx context.Context, hostname string, online bool) error {
	return s.touchConductor(ctx, hostname, online)
}

// DrainConductor implements baremetal.ConductorStore.
func (s *Store) DrainConductor(ctx context.Context, hostname string) error {
	return s.touchConductor(ctx, hostname, false)
}

// UnregisterConductor implements baremetal.ConductorStore. It leaves
// updated_at alone, so the row ages towards DeleteStaleConductors.
func (s *Store) UnregisterConductor(ctx context.Context, hostname string) error {
	res, err := s.w.ExecContext(ctx, s.d.q("UPDATE conductors SET online = ? WHERE hostname = ?"), false, hostname)
	if err != nil {
		return fmt.Errorf("sqlstore: unregistering conductor %s: %w", hostname, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return &baremetal.NotFoundError{Kind: "conductor", Ident: hostname}
	}
	return nil
}

// GetConductor implements baremetal.ConductorStore.
func (s *Store) GetConductor(ctx context.Context, hostname string) (*baremetal.ConductorRecord, error) {
	var r conductorRow
	err := s.w.GetContext(ctx, &r, s.d.q(conductorSelect+"WHERE hostname = ?"), hostname)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &baremetal.NotFoundError{Kind: "conductor", Ident: hostname}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: reading conductor %s: %w", hostname, err)
	}
	return r.record()
}

// ListAliveConductors implements baremetal.ConductorStore.
func (s *Store) ListAliveConductors(ctx context.Context, heartbeatTimeout time.Duration) ([]*baremetal.ConductorRecord, error) {
	var rows []conductorRow
	cutoff := micros(s.now().Add(-heartbeatTimeout))
	if err := s.r.SelectContext(ctx, &rows, s.d.q(conductorSelect+"WHERE online = ? AND updated_at >= ? ORDER BY hostname"), true, cutoff); err != nil {
		return nil, fmt.Errorf("sqlstore: listing alive conductors: %w", err)
	}
	out := make([]*baremetal.ConductorRecord, 0, len(rows))
	for i := range rows {
		c, err := rows[i].record()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// ListOfflineConductors implements baremetal.ConductorStore.
func (s *Store) ListOfflineConductors(ctx context.Context, heartbeatTimeout time.Duration, self string) ([]string, error) {
	var hosts []string
	cutoff := micros(s.now().Add(-heartbeatTimeout))
	if err := s.r.SelectContext(ctx, &hosts, s.d.q("SELECT hostname FROM conductors WHERE updated_at < ? AND lower(hostname) <> lower(?) ORDER BY hostname"), cutoff, self); err != nil {
		return nil, fmt.Errorf("sqlstore: listing offline conductors: %w", err)
	}
	return hosts, nil
}

// ListHardwareInterfaces implements baremetal.ConductorStore.
func (s *Store) ListHardwareInterfaces(ctx context.Context, hostname string) ([]baremetal.HardwareInterface, error) {
	var rows []struct {
		HardwareType  string `db:"hardware_type"`
		InterfaceType string `db:"interface_type"`
		InterfaceName string `db:"interface_name"`
		Default       bool   `db:"is_default"`
	}
	if err := s.r.SelectContext(ctx, &rows, s.d.q("SELECT h.hardware_type, h.interface_type, h.interface_name, h.is_default "+
		"FROM conductor_hardware_interfaces h JOIN conductors c ON c.id = h.conductor_id WHERE c.hostname = ? ORDER BY h.id"), hostname); err != nil {
		return nil, fmt.Errorf("sqlstore: listing hardware interfaces of %s: %w", hostname, err)
	}
	out := make([]baremetal.HardwareInterface, len(rows))
	for i, r := range rows {
		out[i] = baremetal.HardwareInterface{HardwareType: r.HardwareType, InterfaceType: r.InterfaceType, InterfaceName: r.InterfaceName, Default: r.Default}
	}
	return out, nil
}

// DeleteStaleConductors implements baremetal.ConductorStore.
func (s *Store) DeleteStaleConductors(ctx context.Context, olderThan time.Duration, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	cutoff := micros(s.now().Add(-olderThan))
	var hosts []string
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := tx.SelectContext(ctx, &hosts, s.d.q(fmt.Sprintf(
			"SELECT hostname FROM conductors WHERE online = ? AND updated_at < ? ORDER BY updated_at LIMIT %d", limit)), false, cutoff); err != nil {
			return err
		}
		for _, h := range hosts {
			if _, err := tx.ExecContext(ctx, s.d.q("DELETE FROM conductors WHERE hostname = ?"), h); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: deleting stale conductors: %w", err)
	}
	return hosts, nil
}
