package conductor_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// heldReserveStore is a store whose next reservation of one node waits
// until the test lets it go: a worker waiting for a database connection,
// as every store call of a conductor does while its pool is saturated.
type heldReserveStore struct {
	*sqlstore.Store
	mu      sync.Mutex
	node    string
	reached chan struct{}
	release chan struct{}
}

// hold makes the next ReserveNode of node wait for release.
func (s *heldReserveStore) hold(node string) {
	s.mu.Lock()
	s.node = strings.ToLower(node)
	s.mu.Unlock()
}

func (s *heldReserveStore) ReserveNode(ctx context.Context, id, holder string) (*baremetal.Node, error) {
	s.mu.Lock()
	held := s.node != "" && strings.EqualFold(id, s.node)
	if held {
		s.node = ""
	}
	s.mu.Unlock()
	if held {
		close(s.reached)
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.ReserveNode(ctx, id, holder)
}

// TestCallbackTimeoutSparesHeartbeatBeingReserved: a node in wait
// call-back whose agent's heartbeat was taken from the queue by a
// worker, which waits for the node's reservation (the database's
// connections are all busy), is not failed by a callback timeout check
// run meanwhile: the heartbeat came in time, only its processing is
// late. The chaos test's nodes failed so ("Timeout reached while
// waiting for callback ... (failed step deploy.deploy)", and "Timeout
// reached while cleaning") when the check ran in the second between the
// queue and the lock, with the heartbeat's worker then finding the node
// locked by the check. Once the reservation goes through, the heartbeat
// is processed.
func TestCallbackTimeoutSparesHeartbeatBeingReserved(t *testing.T) {
	t.Parallel()
	var store *heldReserveStore
	c, h, clock, n := deployWaitConductor(t, "reserve-conductor", "reserve-heard", func(st *sqlstore.Store) baremetal.Store {
		store = &heldReserveStore{Store: st, reached: make(chan struct{}), release: make(chan struct{})}
		return store
	})
	var once sync.Once
	letGo := func() { once.Do(func() { close(store.release) }) }
	t.Cleanup(letGo) // runs before the conductor's Stop
	ctx := h.ctx

	// The agent calls in the last minute of the callback timeout; the
	// worker that takes its heartbeat waits for the node's reservation.
	clock.Advance(29 * time.Minute)
	store.hold(n.UUID)
	h.must(c.AgentBackend().RecordHeartbeat(ctx, agentclient.Heartbeat{NodeUUID: n.UUID, CallbackURL: "http://127.0.0.1:9", ReceivedAt: clock.Now()}))
	select {
	case <-store.reached:
	case <-time.After(10 * time.Second):
		t.Fatal("no worker reserved the node for its heartbeat")
	}
	clock.Advance(2 * time.Minute)

	c.CheckTimeouts(ctx)
	got, err := store.GetNode(ctx, n.UUID)
	h.must(err)
	if got.ProvisionState != statemachine.DeployWait || got.LastError != "" {
		t.Fatalf("node whose heartbeat waits for its reservation: %s (last error %q), want still %s",
			got.ProvisionState, got.LastError, statemachine.DeployWait)
	}

	// The reservation goes through: the heartbeat is processed, and the
	// node keeps waiting for its agent.
	letGo()
	waitHeartbeatProcessed(t, store, n.UUID, "once its reservation went through")
}

// deployWaitConductor launches a conductor on a fake clock over a fresh
// SQLite store, which wrap may wrap, with the agent deploy interface and
// an agent client whose agents answer nothing (fetching a ramdisk's deploy
// steps fails as one still booting does), and deploys node name to
// deploy wait. The conductor stops at the test's end, after the cleanups
// the test registers later.
func deployWaitConductor(t *testing.T, host, name string, wrap func(*sqlstore.Store) baremetal.Store) (*conductor.Conductor, *harness, *storetest.ManualClock, *baremetal.Node) {
	t.Helper()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindDeploy: {fake.Name, agentdeploy.Name}}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(nil)); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "anvil.db"), sqlstore.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	store := wrap(st)
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	c, err := conductor.New(store, reg, conductor.Options{Hostname: host, Clock: clock, Logger: testLogger(t),
		Agent:                       conductor.AgentSettings{Client: client},
		CheckProvisionStateInterval: -1, SyncPowerStateInterval: -1, PowerFailureRecoveryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Stop(sctx)
	})
	h := &harness{t: t, store: store, c: c, ctx: ctx}
	n := h.manageable(name, agentdeploy.Name)
	h.must2(c.Update(ctx, n.UUID, func(n *baremetal.Node) error { n.AutomatedClean = new(false); return nil }))
	h.must(c.Provide(ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(c.Deploy(ctx, n.UUID, conductor.DeployOptions{}))
	h.waitFor(n.UUID, statemachine.DeployWait)
	return c, h, clock, n
}

// waitHeartbeatProcessed waits (10 s at most) until node uuid's
// heartbeat was processed, its last heartbeat recorded and its
// reservation let go, and checks that the node still waits in deploy
// wait; when names the moment the test expects it, for the failure.
func waitHeartbeatProcessed(t *testing.T, store baremetal.Store, uuid, when string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := store.GetNode(ctx, uuid)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got.DriverInternalInfo[driver.InternalAgentLastHeartbeat]; ok && got.Reservation == "" {
			if got.ProvisionState != statemachine.DeployWait {
				t.Fatalf("after its heartbeat: %s (last error %q), want %s", got.ProvisionState, got.LastError, statemachine.DeployWait)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("heartbeat not processed %s: %s, reserved by %q, driver_internal_info %v",
				when, got.ProvisionState, got.Reservation, got.DriverInternalInfo)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
