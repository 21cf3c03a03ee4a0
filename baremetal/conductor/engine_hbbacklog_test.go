package conductor_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

func TestCallbackTimeoutSparesQueuedHeartbeat(t *testing.T) {
	t.Parallel()
	synctest.Test(t, callbackTimeoutSparesQueuedHeartbeat)
}

// callbackTimeoutSparesQueuedHeartbeat: a node in wait call-back whose
// agent's heartbeat was accepted but waits for a worker (every worker
// busy with a long power action) is not failed by the callback timeout
// check; a node whose latest heartbeat is older than the timeout is. The
// chaos test's nodes failed so ("Timeout reached while waiting for
// callback ... (failed step deploy.write_image)") while every worker of
// their owner sat in a 30 s power-off wait.
func callbackTimeoutSparesQueuedHeartbeat(t *testing.T) {
	gate := newPowerGate()
	cfg := gate.config()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindDeploy: {fake.Name, agentdeploy.Name}}})
	if err := reg.Register(builtin.Bundle(cfg)); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(nil)); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	h := launchOnClock(t, clock, reg, conductor.Options{Hostname: "backlog-conductor", Workers: 1})
	defer gate.release()

	waiting := func(name string) string {
		n := h.manageable(name, agentdeploy.Name)
		h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error { n.AutomatedClean = new(false); return nil }))
		h.must(h.c.Provide(h.ctx, n.UUID))
		h.waitFor(n.UUID, statemachine.Available)
		h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
		h.waitFor(n.UUID, statemachine.DeployWait)
		return n.UUID
	}
	heard, silent := waiting("backlog-heard"), waiting("backlog-silent")
	busy := h.manageable("backlog-busy", fake.Name)

	// The only worker starts a power action that does not end.
	gate.arm()
	h.must(h.c.SetPowerState(h.ctx, busy.UUID, statemachine.PowerOn, 0))
	<-gate.started

	// Both agents called; heard's latest heartbeat is recent, silent's
	// is as old as the node's wait.
	backend := h.c.AgentBackend()
	h.must(backend.RecordHeartbeat(h.ctx, agentclient.Heartbeat{NodeUUID: silent, CallbackURL: "http://127.0.0.1:9", ReceivedAt: clock.Now()}))
	clock.Advance(29 * time.Minute)
	h.must(backend.RecordHeartbeat(h.ctx, agentclient.Heartbeat{NodeUUID: heard, CallbackURL: "http://127.0.0.1:9", ReceivedAt: clock.Now()}))
	clock.Advance(2 * time.Minute)
	synctest.Wait()

	h.c.CheckTimeouts(h.ctx)
	got, err := h.store.GetNode(h.ctx, heard)
	h.must(err)
	if got.ProvisionState != statemachine.DeployWait {
		t.Fatalf("node whose heartbeat waits for a worker: %s (last error %q), want still %s", got.ProvisionState, got.LastError, statemachine.DeployWait)
	}
	f := h.waitFor(silent, statemachine.DeployFailed)
	if !strings.Contains(f.LastError, "Timeout reached while waiting for callback") {
		t.Fatalf("node silent for the whole timeout: last error %q", f.LastError)
	}
}
