package conductor_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

func TestPreviousBootHeartbeatDropped(t *testing.T) {
	t.Parallel()
	synctest.Test(t, previousBootHeartbeatDropped)
}

// previousBootHeartbeatDropped: a heartbeat accepted with the agent token
// of the node's previous boot, which waited for a worker while the node
// was rebooted and its new ramdisk looked up (a new token), is dropped
// when a worker reaches it: it neither pins the previous boot's URL and
// certificate nor continues the node. Ironic checks the token in the
// conductor under the node's lock. The scale benchmark's cleans failed
// so: the previous boot's certificate was pinned and get_clean_steps
// failed against the new boot's ("x509: certificate signed by unknown
// authority"). A heartbeat with the current token is processed.
func previousBootHeartbeatDropped(t *testing.T) {
	gate := newPowerGate()
	cfg := gate.config()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(cfg)); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	h := launchOnClock(t, clock, reg, conductor.Options{Hostname: "stale-hb-conductor", Workers: 1})

	uuid := h.waitingNode("stale-hb")
	setToken := func(tok string) {
		cur, err := h.store.GetNode(h.ctx, uuid)
		h.must(err)
		cur.DriverInternalInfo[driver.InternalAgentToken] = tok
		h.must(h.store.UpdateNode(h.ctx, cur, ""))
	}
	const previous, current = "previous-boot-token-of-forty-characters-xx", "current-boot-token-of-forty-characters-xxx"
	setToken(previous)
	busy := h.manageable("stale-hb-busy", fake.Name)

	// The only worker is busy; the previous boot's heartbeat waits.
	gate.arm()
	h.must(h.c.SetPowerState(h.ctx, busy.UUID, statemachine.PowerOn, 0))
	<-gate.started
	backend := h.c.AgentBackend()
	h.must(backend.RecordHeartbeat(h.ctx, agentclient.Heartbeat{NodeUUID: uuid, CallbackURL: "https://192.0.2.10:9999",
		AgentToken: previous, AgentVersion: "10.0.0", ReceivedAt: clock.Now()}))
	// Meanwhile the node was rebooted and its new ramdisk looked up.
	setToken(current)
	gate.release()
	synctest.Wait()

	n, err := h.store.GetNode(h.ctx, uuid)
	h.must(err)
	if url, _ := n.DriverInternalInfo[driver.InternalAgentURL].(string); url != "" {
		t.Fatalf("the previous boot's heartbeat was processed: agent_url %q pinned", url)
	}
	if _, ok := n.DriverInternalInfo[driver.InternalAgentLastHeartbeat]; ok {
		t.Fatal("the previous boot's heartbeat was processed: agent_last_heartbeat recorded")
	}
	if n.ProvisionState != statemachine.DeployWait {
		t.Fatalf("node after the previous boot's heartbeat: %s, want still %s", n.ProvisionState, statemachine.DeployWait)
	}

	clock.Advance(time.Second)
	at := clock.Now().UTC()
	h.must(backend.RecordHeartbeat(h.ctx, agentclient.Heartbeat{NodeUUID: uuid, CallbackURL: "https://192.0.2.11:9999",
		AgentToken: current, AgentVersion: "10.0.0", ReceivedAt: at}))
	synctest.Wait()
	n, err = h.store.GetNode(h.ctx, uuid)
	h.must(err)
	if got, _ := n.DriverInternalInfo[driver.InternalAgentLastHeartbeat].(string); got != at.Format(agentclient.LastHeartbeatLayout) {
		t.Fatalf("the current boot's heartbeat: agent_last_heartbeat %q, want %q", got, at.Format(agentclient.LastHeartbeatLayout))
	}
}
