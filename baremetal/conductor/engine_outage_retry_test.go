package conductor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestTearDownAndPrepareWaitOutTheDatabase: a tear-down or a deploy's
// prepare that meets a database outage (their reads of the node's ports
// fail as unavailable; here the fake deploy interface's calls fail so
// twice) is run again once the database answers, and the node goes on,
// instead of ending in error or deploy failed ("Failed to tear down.
// Error: The database was unavailable", outagebench's 40 s undeploy cut;
// "Failed to prepare to deploy", the chaos test's database cut).
func TestTearDownAndPrepareWaitOutTheDatabase(t *testing.T) {
	t.Parallel()
	var failing atomic.Int32
	var failed atomic.Int32
	cfg := fake.Config{
		Delays: map[string]time.Duration{"deploy.tear_down": time.Nanosecond, "deploy.prepare": time.Nanosecond},
		Sleep: func(ctx context.Context, _ time.Duration) error {
			for {
				n := failing.Load()
				if n <= 0 {
					return nil
				}
				if failing.CompareAndSwap(n, n-1) {
					failed.Add(1)
					return &baremetal.StoreUnavailableError{Op: "listing the node's ports", Err: errors.New("connection refused (injected)")}
				}
			}
		},
	}
	h := newHarness(t, openStore(t, false), cfg, conductor.Options{})
	n := h.manageable("outage-retry", fake.Name)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)

	failing.Store(2)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	got := h.waitFor(n.UUID, statemachine.Active)
	if failed.Load() != 2 || got.LastError != "" {
		t.Fatalf("deploy: %d injected failures, last error %q; want 2 and none", failed.Load(), got.LastError)
	}

	failing.Store(2)
	h.must(h.c.Undeploy(h.ctx, n.UUID))
	got = h.waitFor(n.UUID, statemachine.Available)
	if failed.Load() != 4 || got.LastError != "" {
		t.Fatalf("undeploy: %d injected failures in all, last error %q; want 4 and none", failed.Load(), got.LastError)
	}
}
