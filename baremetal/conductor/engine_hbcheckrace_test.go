package conductor_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/statemachine"
)

// checkHoldStore holds the next reservation of one node, once it has
// succeeded, until the test lets it go (the callback timeout check
// holding the node), and reports the first reservation of the node the
// store then refuses as locked (the heartbeat's worker meeting that
// hold).
type checkHoldStore struct {
	*sqlstore.Store
	mu      sync.Mutex
	node    string
	holding bool
	held    chan struct{}
	release chan struct{}
	refused chan struct{}
	once    sync.Once
}

func (s *checkHoldStore) arm(node string) {
	s.mu.Lock()
	s.node = strings.ToLower(node)
	s.mu.Unlock()
}

func (s *checkHoldStore) ReserveNode(ctx context.Context, id, holder string) (*baremetal.Node, error) {
	s.mu.Lock()
	mine := s.node != "" && strings.EqualFold(id, s.node)
	hold := mine && !s.holding
	if hold {
		s.holding = true
	}
	s.mu.Unlock()
	n, err := s.Store.ReserveNode(ctx, id, holder)
	if hold && err == nil {
		close(s.held)
		<-s.release
	}
	if mine && !hold && errors.Is(err, baremetal.ErrNodeLocked) {
		s.once.Do(func() { close(s.refused) })
	}
	return n, err
}

// TestCallbackTimeoutSparesHeartbeatRefusedByItsHold: a node whose
// callback timeout passed is taken by the timeout check; the agent's
// heartbeat comes meanwhile, and its worker finds the node locked by
// this very conductor. The check, which looks for a pending heartbeat
// again once it holds the node, must see it and spare the node, and the
// heartbeat is processed once the check lets the node go. The worker
// used to drop the heartbeat on the lock (as Ironic drops one whose node
// another operation holds), so the check found nothing pending and
// failed the node: in the chaos test c3 accepted a node's heartbeats
// (202) for 47 s after a database cut, processed none, and failed the
// node with "Timeout reached while cleaning" two seconds after the
// agent's last call.
func TestCallbackTimeoutSparesHeartbeatRefusedByItsHold(t *testing.T) {
	t.Parallel()
	var store *checkHoldStore
	c, h, clock, n := deployWaitConductor(t, "check-conductor", "check-heard", func(st *sqlstore.Store) baremetal.Store {
		store = &checkHoldStore{Store: st, held: make(chan struct{}), release: make(chan struct{}), refused: make(chan struct{})}
		return store
	})
	var once sync.Once
	letGo := func() { once.Do(func() { close(store.release) }) }
	t.Cleanup(letGo) // runs before the conductor's Stop
	ctx := h.ctx

	// The callback timeout passes with nothing heard; the check takes
	// the node.
	clock.Advance(31 * time.Minute)
	store.arm(n.UUID)
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		c.CheckTimeouts(ctx)
	}()
	select {
	case <-store.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the timeout check did not reserve the node")
	}
	// The agent calls now; its worker meets the check's hold.
	h.must(c.AgentBackend().RecordHeartbeat(ctx, agentclient.Heartbeat{NodeUUID: n.UUID, CallbackURL: "http://127.0.0.1:9", ReceivedAt: clock.Now()}))
	select {
	case <-store.refused:
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat's worker did not try the node")
	}
	for deadline := time.Now().Add(10 * time.Second); c.BusyWorkers() != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the heartbeat's worker did not finish")
		}
		time.Sleep(time.Millisecond)
	}
	letGo()
	select {
	case <-checked:
	case <-time.After(10 * time.Second):
		t.Fatal("the timeout check did not end")
	}
	got, err := store.GetNode(ctx, n.UUID)
	h.must(err)
	if got.ProvisionState != statemachine.DeployWait || got.LastError != "" {
		t.Fatalf("node whose agent called while the check held it: %s (last error %q), want still %s",
			got.ProvisionState, got.LastError, statemachine.DeployWait)
	}
	// The heartbeat is processed once the check let the node go.
	waitHeartbeatProcessed(t, store, n.UUID, "once the check let the node go")
}
