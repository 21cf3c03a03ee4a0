package conductor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestTakeoversRunInTheWorkerPool: the nodes a dead conductor left
// mid-step are resumed by the survivor's worker pool, all at once, not
// PeriodicMaxWorkers at a time by the orphan check itself. Resuming a
// step runs the rest of the operation (power actions, the agent's
// commands), so a pass that did it eight at a time took tens of seconds
// after a SIGKILL in the chaos test's 500-node fleet, and the nodes it
// had not reached yet sat unowned while their ring owner changed again
// (a deploy left in deploying for over a minute). Here the periodic pool
// has two workers and six nodes' resumed steps must all run together.
func TestTakeoversRunInTheWorkerPool(t *testing.T) {
	t.Parallel()
	const nodes = 6
	ctx := context.Background()
	clock := storetest.NewManualClock(clusterEpoch)
	s, _ := clusterStore(t, false, clock)
	notifier := clusterNotifier(t, "")
	entered := make(chan struct{}, nodes)
	frozen := fake.Config{
		Delays: map[string]time.Duration{"deploy.deploy": time.Hour},
		Sleep: func(ctx context.Context, _ time.Duration) error {
			entered <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		},
	}
	// The survivor's resumed steps meet at a barrier: each waits until
	// all have entered, or 3 s.
	var mu sync.Mutex
	inflight, most := 0, 0
	all := make(chan struct{})
	barrier := fake.Config{
		Delays: map[string]time.Duration{"deploy.deploy": time.Nanosecond},
		Sleep: func(ctx context.Context, _ time.Duration) error {
			mu.Lock()
			inflight++
			most = max(most, inflight)
			if inflight == nodes {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-time.After(3 * time.Second):
			case <-ctx.Done():
			}
			mu.Lock()
			inflight--
			mu.Unlock()
			return nil
		},
	}
	cl := conductor.ClusterOptions{Notifier: notifier, RerunSafeSteps: []string{"deploy.deploy"}}
	victim := startMember(t, s, "victim", frozen, cl)
	survivor := startMemberWith(t, s, "survivor", barrier, cl, conductor.Options{Clock: storetest.NewManualClock(clusterEpoch), PeriodicMaxWorkers: 2})
	waitAlive(t, survivor, 2)
	waitAlive(t, victim, 2)

	var ids []string
	for range nodes {
		n := ownedBy(t, survivor, "victim")
		deployVia(ctx, t, survivor, s, n.UUID)
		ids = append(ids, n.UUID)
	}
	for range nodes {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the victim never started every deploy step")
		}
	}

	// The victim's keepalive goes stale: the survivor breaks its
	// reservations and takes its nodes over.
	clock.Advance(61 * time.Second)
	if err := s.KeepaliveConductor(ctx, "survivor", true); err != nil {
		t.Fatal(err)
	}
	survivor.CheckOrphanNodes(ctx)
	for _, id := range ids {
		if got := waitState(t, s, id, statemachine.Active); got.LastError != "" {
			t.Errorf("node %s resumed with last_error %q", id, got.LastError)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != nodes {
		t.Fatalf("at most %d resumed steps ran at once, want all %d: takeovers ran in the orphan check's %d workers, not the worker pool", most, nodes, 2)
	}
}
