package conductor_test

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestPollCommandsContinuesWithoutHeartbeats checks
// AgentSettings.PollCommands. The simulated agents heartbeat right after
// their lookup and then only every 10 min, and never when a command
// finishes (IPA forces one then, at most every 5 s): an in-band step (5 ms
// on the simulated agent) is reported by a heartbeat up to 10 min later.
// With PollCommands the conductor waits on the command (GET
// /v1/commands/{id}?wait=true) and continues at once: every in-band step
// (cleaning's two, the deploy's write_image) is continued by a finished
// wait, cleaning takes less than one heartbeat interval, and the node
// ends active. Without it the node is still in clean wait a second after
// its first step began, as Ironic's would be until the next heartbeat.
// The interval is far above the harness's 30 s waits so that no
// heartbeat can stand in for a finished wait: with 10 s, cleaning under
// -race on a loaded CI machine took longer than one interval.
func TestPollCommandsContinuesWithoutHeartbeats(t *testing.T) {
	t.Parallel()
	const every = 10 * time.Minute
	fc := simfleet.Config{HeartbeatInterval: every, ForcedHeartbeatInterval: time.Hour}
	t.Run("polling", func(t *testing.T) {
		t.Parallel()
		h := newAgentHarnessFleet(t, conductor.Options{}, conductor.AgentSettings{PollCommands: true}, fc)
		n := h.enrollAgentNode("poll-commands")
		h.must(h.c.Manage(h.ctx, n.UUID))
		h.waitFor(n.UUID, statemachine.Manageable)
		reg := prometheus.NewPedanticRegistry()
		h.must(reg.Register(h.c.Metrics()))
		start := time.Now()
		h.must(h.c.Provide(h.ctx, n.UUID))
		h.waitFor(n.UUID, statemachine.Available)
		if d := time.Since(start); d >= every {
			t.Errorf("cleaning took %s, more than one heartbeat interval (%s): it waited for heartbeats", d, every)
		}
		h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
		h.waitFor(n.UUID, statemachine.Active)
		events := h.historyEvents(n.UUID)
		for _, want := range []string{"step_end deploy.erase_devices_metadata", "step_end deploy.erase_devices", "step_end deploy.write_image", "step_end deploy.boot_instance"} {
			if !slices.Contains(events, want) {
				t.Errorf("history lacks %q: %v", want, events)
			}
		}
		families, err := reg.Gather()
		h.must(err)
		finished := 0.0
		for _, f := range families {
			if f.GetName() != "anvil_conductor_agent_command_waits_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" && l.GetValue() == "finished" {
						finished += m.GetCounter().GetValue()
					}
				}
			}
		}
		// erase_devices_metadata, erase_devices, write_image.
		if finished < 3 {
			t.Errorf("%v command waits ended with the command finished, want at least 3 (every in-band step)", finished)
		}
	})
	t.Run("heartbeats only", func(t *testing.T) {
		t.Parallel()
		h := newAgentHarnessFleet(t, conductor.Options{}, conductor.AgentSettings{}, fc)
		n := h.enrollAgentNode("heartbeat-paced")
		h.must(h.c.Manage(h.ctx, n.UUID))
		h.waitFor(n.UUID, statemachine.Manageable)
		h.must(h.c.Provide(h.ctx, n.UUID))
		h.waitStep(n.UUID, "erase_devices_metadata")
		// The step takes 5 ms on the simulated agent; no heartbeat
		// reports it.
		time.Sleep(time.Second)
		got, err := h.store.GetNode(h.ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ProvisionState != statemachine.CleanWait {
			t.Fatalf("without PollCommands and heartbeats the node is %q, want %q (the control of this test)", got.ProvisionState, statemachine.CleanWait)
		}
	})
}
