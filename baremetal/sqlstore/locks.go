package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/jmoiron/sqlx"
)

// checkHolder validates a reservation holder name.
func checkHolder(holder string) error {
	if holder == "" || len(holder) > 255 {
		return &baremetal.InvalidFieldError{Kind: "reservation", Field: "holder", Expected: "a conductor hostname of 1 to 255 bytes"}
	}
	return nil
}

// ReserveNode implements baremetal.ReservationStore with the single
// conditional update of reference §5.1; the row comes back from the same
// statement (RETURNING), so a successful lock costs one round trip.
func (s *Store) ReserveNode(ctx context.Context, id, holder string) (*baremetal.Node, error) {
	if err := checkHolder(holder); err != nil {
		return nil, err
	}
	id = strings.ToLower(id)
	var n *baremetal.Node
	err := s.write(ctx, func(w writeTx) error {
		var err error
		n, err = scanNode(w.stmt(s.st.reserve).QueryRowxContext(w.ctx, holder, id))
		return err
	})
	if err == nil {
		s.notify(baremetal.NodeChange{UUID: n.UUID, Op: "reserve", ProvisionState: n.ProvisionState,
			TargetProvisionState: n.TargetProvisionState, Reservation: holder, Version: n.Version})
		return n, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlstore: reserving node %s for %s: %w", id, holder, err)
	}
	var cur sql.NullString
	var version int64
	err = s.st.lockHolder.QueryRowxContext(ctx, id).Scan(&cur, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &baremetal.NotFoundError{Kind: "node", Ident: id}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: reserving node %s for %s: %w", id, holder, err)
	}
	// cur may be empty when the holder released between the two
	// statements; it is still a lost race, reported as locked.
	return nil, &baremetal.NodeLockedError{Node: id, Holder: cur.String}
}

// ReleaseNode implements baremetal.ReservationStore.
func (s *Store) ReleaseNode(ctx context.Context, id, holder string) error {
	if err := checkHolder(holder); err != nil {
		return err
	}
	id = strings.ToLower(id)
	var released int64
	err := s.write(ctx, func(w writeTx) error {
		res, err := w.stmt(s.st.release).ExecContext(w.ctx, id, holder)
		if err != nil {
			return err
		}
		released, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlstore: releasing node %s for %s: %w", id, holder, err)
	}
	if released == 1 {
		s.notify(baremetal.NodeChange{UUID: id, Op: "release"})
		return nil
	}
	var cur sql.NullString
	var version int64
	err = s.st.lockHolder.QueryRowxContext(ctx, id).Scan(&cur, &version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return &baremetal.NotFoundError{Kind: "node", Ident: id}
	case err != nil:
		return fmt.Errorf("sqlstore: releasing node %s for %s: %w", id, holder, err)
	case !cur.Valid:
		return &baremetal.NodeNotLockedError{Node: id, Holder: holder}
	default:
		return &baremetal.NodeLockedError{Node: id, Holder: cur.String}
	}
}

// ReleaseReservationsOf implements baremetal.ReservationStore.
func (s *Store) ReleaseReservationsOf(ctx context.Context, hostname string) (int, error) {
	if err := checkHolder(hostname); err != nil {
		return 0, err
	}
	var uuids []string
	err := s.w.SelectContext(ctx, &uuids, s.d.q(
		"UPDATE nodes SET reservation = NULL WHERE reservation IS NOT NULL AND lower(reservation) = lower(?) RETURNING uuid"), hostname)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: releasing the reservations of %s: %w", hostname, err)
	}
	s.notifyUUIDs("release", uuids)
	return len(uuids), nil
}

// ClearTargetPowerStateOf implements baremetal.ReservationStore.
func (s *Store) ClearTargetPowerStateOf(ctx context.Context, hostname, lastError string) (int, error) {
	if err := checkHolder(hostname); err != nil {
		return 0, err
	}
	var uuids []string
	err := s.w.SelectContext(ctx, &uuids, s.d.q(
		"UPDATE nodes SET target_power_state = NULL, last_error = ?, version = version + 1, updated_at = ? "+
			"WHERE reservation IS NOT NULL AND lower(reservation) = lower(?) AND target_power_state IS NOT NULL RETURNING uuid"),
		nullIfEmpty(baremetal.MaskText(lastError)), micros(s.now()), hostname)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: clearing target power states of %s: %w", hostname, err)
	}
	s.notifyUUIDs("update", uuids)
	return len(uuids), nil
}

func (s *Store) notifyUUIDs(op string, uuids []string) {
	if len(uuids) == 0 || !s.hasSubscribers() {
		return
	}
	changes := make([]baremetal.NodeChange, len(uuids))
	for i, u := range uuids {
		changes[i] = baremetal.NodeChange{UUID: u, Op: op}
	}
	s.notify(changes...)
}

// BreakDeadReservations implements baremetal.ReservationStore. It runs
// in one transaction: find the dead conductors, then release each of
// their nodes only if that conductor still holds it and its row is still
// dead when the release runs. A conductor restarted under the same
// hostname refreshes its row before it takes any reservation, so its new
// reservations are never broken: on PostgreSQL the dead rows are locked
// (FOR UPDATE) for the transaction, which makes the re-registration wait
// for the release, or the release skip a row refreshed meanwhile; the
// release itself re-checks the row (SQLite serialises writers anyway).
func (s *Store) BreakDeadReservations(ctx context.Context, heartbeatTimeout time.Duration, self string) ([]baremetal.BrokenReservation, error) {
	cutoff := micros(s.now().Add(-heartbeatTimeout))
	lock := ""
	if s.d.name == postgresDialect.name {
		lock = " FOR UPDATE"
	}
	var broken []baremetal.BrokenReservation
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		broken = broken[:0]
		var dead []string
		if err := tx.SelectContext(ctx, &dead, s.d.q(
			"SELECT hostname FROM conductors WHERE updated_at < ? AND lower(hostname) <> lower(?) ORDER BY hostname"+lock), cutoff, self); err != nil {
			return err
		}
		for _, host := range dead {
			var uuids []string
			if err := tx.SelectContext(ctx, &uuids, s.d.q(
				"UPDATE nodes SET reservation = NULL WHERE reservation IS NOT NULL AND lower(reservation) = lower(?) "+
					"AND EXISTS (SELECT 1 FROM conductors WHERE lower(conductors.hostname) = lower(?) AND conductors.updated_at < ?) "+
					"RETURNING uuid"), host, host, cutoff); err != nil {
				return err
			}
			for _, u := range uuids {
				broken = append(broken, baremetal.BrokenReservation{NodeUUID: u, Holder: host})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: breaking reservations of dead conductors: %w", err)
	}
	if len(broken) > 0 && s.hasSubscribers() {
		changes := make([]baremetal.NodeChange, len(broken))
		for i, b := range broken {
			changes[i] = baremetal.NodeChange{UUID: b.NodeUUID, Op: "release"}
		}
		s.notify(changes...)
	}
	return broken, nil
}
