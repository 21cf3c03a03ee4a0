package conductor_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// flakyReleaseStore fails the first failures releases with a transient
// error, as a stalled or dropped database connection would.
type flakyReleaseStore struct {
	baremetal.Store
	failures atomic.Int32
	calls    atomic.Int32
}

func (s *flakyReleaseStore) ReleaseNode(ctx context.Context, uuid, holder string) error {
	s.calls.Add(1)
	if s.failures.Add(-1) >= 0 {
		return errors.New("connection reset by peer")
	}
	return s.Store.ReleaseNode(ctx, uuid, holder)
}

// TestReleaseRetriedAfterStoreFailure: when releasing a node fails (a
// transient store error), the conductor tries again, so the node does not
// stay reserved by a live conductor (nothing else would ever release it).
func TestReleaseRetriedAfterStoreFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, releaseRetriedAfterStoreFailure)
}

func releaseRetriedAfterStoreFailure(t *testing.T) {
	ctx := context.Background()
	store := &flakyReleaseStore{Store: openStore(t, false)}
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	c := startConductor(t, store, reg, "release-retry", 2)
	n, err := c.Enroll(ctx, &baremetal.Node{Driver: builtin.FakeHardware})
	if err != nil {
		t.Fatal(err)
	}
	store.failures.Store(1)
	if err := c.Manage(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	got := waitState(t, store, n.UUID, statemachine.Manageable)
	if got.Reservation != "" {
		t.Fatalf("node left reserved by %q", got.Reservation)
	}
	if store.calls.Load() < 2 {
		t.Fatalf("release called %d times, want a retry after the failure", store.calls.Load())
	}
}

// TestReleaseOutlastsALongOutage: a release keeps being retried for as
// long as the database refuses it (here 12 failures, twice what the old
// budget of six attempts survived), and the node is released as
// soon as the store answers: a live conductor never abandons a
// reservation to wait for its own restart.
func TestReleaseOutlastsALongOutage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &flakyReleaseStore{Store: openStore(t, false)}
		reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
		if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
			t.Fatal(err)
		}
		c := startConductor(t, store, reg, "release-outage", 2)
		n, err := c.Enroll(ctx, &baremetal.Node{Driver: builtin.FakeHardware})
		if err != nil {
			t.Fatal(err)
		}
		const failures = 12
		store.failures.Store(failures)
		if err := c.Manage(ctx, n.UUID); err != nil {
			t.Fatal(err)
		}
		got := waitState(t, store, n.UUID, statemachine.Manageable)
		if got.Reservation != "" {
			t.Fatalf("node left reserved by %q after %d failed releases", got.Reservation, store.calls.Load())
		}
		if calls := store.calls.Load(); calls < failures+1 {
			t.Fatalf("release called %d times, want every one of the %d failures retried", calls, failures)
		}
	})
}

// lostReserveStore commits the armed number of reservations but answers
// each with a dropped connection, as a database cut between the commit
// and its answer does.
type lostReserveStore struct {
	baremetal.Store
	lose atomic.Int32
}

func (s *lostReserveStore) ReserveNode(ctx context.Context, uuid, holder string) (*baremetal.Node, error) {
	n, err := s.Store.ReserveNode(ctx, uuid, holder)
	if err == nil && s.lose.Add(-1) >= 0 {
		return nil, fmt.Errorf("sqlstore: reserving node %s: %w", uuid, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET})
	}
	return n, err
}

// TestPhantomReservationSwept: a reservation whose commit landed while
// its answer was lost belongs to no operation of the conductor; the
// sweep releases it, and the verb accepted before goes on, without a
// restart. Without the sweep the node stays locked by its own live
// conductor and every verb gets "locked".
func TestPhantomReservationSwept(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &lostReserveStore{Store: openStore(t, false)}
		reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
		if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
			t.Fatal(err)
		}
		c := startConductor(t, store, reg, "phantom", 2)
		n, err := c.Enroll(ctx, &baremetal.Node{Driver: builtin.FakeHardware})
		if err != nil {
			t.Fatal(err)
		}
		store.lose.Store(1)
		if err := c.Manage(ctx, n.UUID); err == nil {
			t.Fatal("Manage succeeded although its reservation's answer was lost")
		}
		// The verb failed; its node must not stay locked: the next verb
		// goes through once the sweep released the phantom.
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := c.Manage(ctx, n.UUID)
			if err == nil {
				break
			}
			if !errors.Is(err, baremetal.ErrNodeLocked) || time.Now().After(deadline) {
				t.Fatalf("Manage after the lost reservation: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		waitState(t, store, n.UUID, statemachine.Manageable)
	})
}
