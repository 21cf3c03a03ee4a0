package conductor_test

import (
	"testing"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// TestFastTrackCleanRunsAgentCleanSteps cleans a node twice with fast
// track: the second automated clean finds the agent of the first still up
// and must fetch its clean steps before planning, so the agent's
// erase_devices_metadata (99) and erase_devices (10) run again on the same
// agent, without a reboot. The step list used to be planned from the
// wiped cache, leaving the disks of a fast-track clean unerased.
func TestFastTrackCleanRunsAgentCleanSteps(t *testing.T) {
	t.Parallel()
	rec := &agentRecorder{}
	h := newAgentHarnessWith(t, conductor.Options{}, conductor.AgentSettings{FastTrack: true}, rec.factory)
	n := h.enrollAgentNode("ft-clean")
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	agents := rec.all()
	if len(agents) != 1 || h.fleet.Boots(n.UUID) != 1 {
		t.Fatalf("%d agents, %d boots: want one (fast track)", len(agents), h.fleet.Boots(n.UUID))
	}
	for _, s := range []string{"erase_devices_metadata", "erase_devices"} {
		if got := agents[0].StepRuns(steps.Clean, "deploy", s); got != 2 {
			t.Errorf("clean step deploy.%s ran %d times, want 2 (once per clean)", s, got)
		}
	}
}
