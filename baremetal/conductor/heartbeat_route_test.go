package conductor_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestHeartbeatOnAnotherConductorContinuesTheNode sends every agent
// request of a node owned by conductor a to conductor b, as an API whose
// rings saw a membership change before the conductors' did routes them
// for a moment (the chaos test's router after a SIGKILL, a restart or a
// database cut). Ironic's conductor processes any heartbeat the API hands
// it under the node's lock; b must too, or the agent's heartbeats are
// accepted and dropped until the owner's callback timeout fails the node.
// The node is deployed and undeployed through a's rings, every agent
// request answered by b.
func TestHeartbeatOnAnotherConductorContinuesTheNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := clusterStore(t, false, storetest.NewManualClock(clusterEpoch))
	agents, err := agenttest.NewServer(agenttest.ServerConfig{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agents.Close() })
	router := newAgentRouter()
	api := httptest.NewServer(router)
	t.Cleanup(api.Close)
	fleet, err := simfleet.New(simfleet.Config{APIURL: api.URL, Server: agents, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Close() })
	cl := conductor.ClusterOptions{Notifier: baremetal.NewLocalNotifier()}
	a := startAgentMember(t, s, "a", fleet, nil, cl)
	b := startAgentMember(t, s, "b", fleet, nil, cl)
	router.add("a", a)
	router.add("b", b)
	router.pin("b")
	waitAlive(t, a, 2)
	waitAlive(t, b, 2)

	n := agentNodeOwnedBy(t, a, "a")
	if owner, err := b.Ownership().OwnerOf(n); err != nil || owner != "a" {
		t.Fatalf("b's rings give the node to %q (%v), want a", owner, err)
	}
	deployVia(ctx, t, a, s, n.UUID)
	done := waitState(t, s, n.UUID, statemachine.Active)
	if done.LastError != "" {
		t.Fatalf("deployed node has last_error %q", done.LastError)
	}
	if err := a.Undeploy(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, n.UUID, statemachine.Available)
	if got := router.served("a", n.UUID); got != 0 {
		t.Errorf("%d agent requests reached a, want none", got)
	}
	if got := router.served("b", n.UUID); got == 0 {
		t.Errorf("no agent request reached b")
	}
}
