package sqlstore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/clock"
)

var restartEpoch = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// TestBreakDeadSparesRestartedConductor restarts a dead conductor under
// the same hostname (release its old reservations, register again, take a
// new reservation) before a survivor's orphan check runs: the check
// releases the nodes of the conductor that is still dead and leaves the
// restarted one's new reservation alone.
func TestBreakDeadSparesRestartedConductor(t *testing.T) {
	stores := map[string]func(t *testing.T, clock clock.Clock) *sqlstore.Store{
		"sqlite": func(t *testing.T, clock clock.Clock) *sqlstore.Store { return sqlstoretest.OpenSQLite(t, clock) },
		"postgres": func(t *testing.T, clock clock.Clock) *sqlstore.Store {
			return sqlstoretest.OpenPostgres(t, clock)
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clock := storetest.NewManualClock(restartEpoch)
			s := open(t, clock)
			for _, h := range []string{"c-restarted", "c-dead", "c-self"} {
				if _, err := s.RegisterConductor(ctx, baremetal.ConductorRegistration{Hostname: h}); err != nil {
					t.Fatal(err)
				}
			}
			mine, theirs := newNode(t, s), newNode(t, s)
			reserve(t, s, mine.UUID, "c-restarted")
			reserve(t, s, theirs.UUID, "c-dead")
			clock.Advance(61 * time.Second)

			// c-restarted comes back as its Start does it.
			if _, err := s.ReleaseReservationsOf(ctx, "c-restarted"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.RegisterConductor(ctx, baremetal.ConductorRegistration{Hostname: "c-restarted", UpdateExisting: true}); err != nil {
				t.Fatal(err)
			}
			reserve(t, s, mine.UUID, "c-restarted")

			broken, err := s.BreakDeadReservations(ctx, time.Minute, "c-self")
			if err != nil {
				t.Fatal(err)
			}
			if len(broken) != 1 || broken[0].NodeUUID != theirs.UUID || broken[0].Holder != "c-dead" {
				t.Fatalf("broken = %+v, want only node %s of c-dead", broken, theirs.UUID)
			}
			if got, _ := s.GetNode(ctx, mine.UUID); got.Reservation != "c-restarted" {
				t.Fatalf("the restarted conductor's new reservation was broken: reservation %q", got.Reservation)
			}
		})
	}
}

// TestBreakDeadWaitsForReRegistration races the orphan check against a
// conductor re-registering on PostgreSQL: the restart (release the old
// reservation, refresh the conductor row, reserve the node again) is held
// open in a transaction while the check runs, then committed. The check
// must see the conductor alive and break nothing, however the two
// interleave.
func TestBreakDeadWaitsForReRegistration(t *testing.T) {
	dsn := sqlstoretest.PostgresDSN(t)
	ctx := context.Background()
	clock := storetest.NewManualClock(restartEpoch)
	s, err := sqlstore.OpenPostgres(ctx, dsn, sqlstore.Options{Clock: clock, MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for _, h := range []string{"c1", "c-self"} {
		if _, err := s.RegisterConductor(ctx, baremetal.ConductorRegistration{Hostname: h}); err != nil {
			t.Fatal(err)
		}
	}
	n := newNode(t, s)
	reserve(t, s, n.UUID, "c1")
	clock.Advance(61 * time.Second)

	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, st := range []struct {
		q    string
		args []any
	}{
		{"UPDATE nodes SET reservation = NULL WHERE uuid = $1", []any{n.UUID}},
		{"UPDATE conductors SET updated_at = $1 WHERE hostname = 'c1'", []any{clock.Now().UnixMicro()}},
		{"UPDATE nodes SET reservation = 'c1' WHERE uuid = $1", []any{n.UUID}},
	} {
		if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
			t.Fatalf("%s: %v", st.q, err)
		}
	}

	type result struct {
		broken []baremetal.BrokenReservation
		err    error
	}
	done := make(chan result, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		b, err := s.BreakDeadReservations(cctx, time.Minute, "c-self")
		done <- result{b, err}
	}()
	// Give the check time to reach the rows the restart holds.
	time.Sleep(300 * time.Millisecond)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.broken) != 0 {
		t.Fatalf("broken = %+v: the orphan check released a reservation of the re-registered conductor", r.broken)
	}
	if got, _ := s.GetNode(ctx, n.UUID); got.Reservation != "c1" {
		t.Fatalf("reservation %q after the check, want c1's new one kept", got.Reservation)
	}
}

func newNode(t *testing.T, s *sqlstore.Store) *baremetal.Node {
	t.Helper()
	n := &baremetal.Node{Driver: "fake-hardware"}
	if err := s.CreateNode(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	return n
}

func reserve(t *testing.T, s *sqlstore.Store, uuid, host string) {
	t.Helper()
	if _, err := s.ReserveNode(context.Background(), uuid, host); err != nil {
		t.Fatalf("reserve %s for %s: %v", uuid, host, err)
	}
}
