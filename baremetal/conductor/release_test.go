package conductor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

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
