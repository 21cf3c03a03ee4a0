package conductor_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
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

// TestDriverNetworkFailureIsNotTheDatabase: a step whose driver call
// fails to reach its BMC or agent (a network error: connection refused)
// fails the deploy with that error, at once. It used to be taken for the
// database's absence, since a network error is how an outage surfaces:
// last_error said "The database was unavailable" (the chaos test's
// takeover of a deploy at prepare_instance_boot whose agent was gone),
// with nothing in the log, and the conductor's outage retries would wait
// on the unreachable BMC or agent as on the database.
func TestDriverNetworkFailureIsNotTheDatabase(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	for _, op := range []string{"deploy.deploy", "deploy.tear_down"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, openStore(t, false), fake.Config{Failures: map[string]error{op: refused}}, conductor.Options{})
			n := h.manageable("net-failure", fake.Name)
			h.must(h.c.Provide(h.ctx, n.UUID))
			h.waitFor(n.UUID, statemachine.Available)
			var got *baremetal.Node
			if op == "deploy.deploy" {
				h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
				got = h.waitFor(n.UUID, statemachine.DeployFailed)
			} else {
				h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
				h.waitFor(n.UUID, statemachine.Active)
				start := time.Now()
				h.must(h.c.Undeploy(h.ctx, n.UUID))
				got = h.waitFor(n.UUID, statemachine.Error)
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("tear-down failing to reach its BMC took %s to fail: retried as a database outage", d)
				}
			}
			if strings.Contains(got.LastError, "database") || !strings.Contains(got.LastError, "connection refused") {
				t.Fatalf("last_error %q, want the driver's network error, not the database", got.LastError)
			}
		})
	}
}
