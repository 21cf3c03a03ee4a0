package conductor_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/statemachine"
)

// lastRun returns the last execution of command, or nil.
func lastRun(ex []agenttest.Execution, command string) *agenttest.Execution {
	var out *agenttest.Execution
	for i := range ex {
		if ex[i].Command == command {
			out = &ex[i]
		}
	}
	return out
}

// oobAfter returns the out-of-band power actions with target at or after
// since.
func oobAfter(calls []simfleet.PowerCall, target driver.PowerState, since time.Time) []simfleet.PowerCall {
	var out []simfleet.PowerCall
	for _, c := range calls {
		if c.Target == target && !c.At.Before(since) {
			out = append(out, c)
		}
	}
	return out
}

// TestTearDownAgentOrder checks Ironic's tear-down order for a node whose
// agent runs: at the end of a deploy (tear_down_agent) the conductor
// flushes the disks (standby.sync), asks the agent to power off
// (standby.power_off), waits for the power off, and powers off out of
// band only a node that is still on, after the sync; with
// ForceOOBPowerOff it syncs and powers off out of band. At the end of
// cleaning (no fast track) the out-of-band power off follows a sync too.
// Anvil used to power the node off out of band under a running agent
// without any sync, leaving a real disk with unflushed writes.
func TestTearDownAgentOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		settings conductor.AgentSettings
		failSoft bool
		wantSoft bool // standby.power_off sent
		wantHard bool // out-of-band power off during tear_down_agent
	}{
		{name: "agent powers off", wantSoft: true},
		{name: "agent power off fails", failSoft: true, wantSoft: true, wantHard: true},
		{name: "forced out-of-band power off", settings: conductor.AgentSettings{ForceOOBPowerOff: true}, wantHard: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &agentRecorder{}
			factory := func(uuid string) *agenttest.Agent {
				a := rec.factory(uuid)
				if tc.failSoft {
					a.SetBehavior(agentclient.CmdPowerOff, agenttest.Behavior{Fail: &agentclient.AgentError{
						Type: "SystemRebootError", Code: 500, Message: "Failed to execute poweroff", Details: "poweroff: not allowed"}})
				}
				return a
			}
			tc.settings.PowerOffWait = 3 * time.Second
			tc.settings.PowerOffPollInterval = 50 * time.Millisecond
			h := newAgentHarnessWith(t, conductor.Options{}, tc.settings, factory)
			n := h.enrollAgentNode("teardown")
			h.must(h.c.Manage(h.ctx, n.UUID))
			h.waitFor(n.UUID, statemachine.Manageable)
			h.must(h.c.Provide(h.ctx, n.UUID))
			h.waitFor(n.UUID, statemachine.Available)
			h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
			h.waitFor(n.UUID, statemachine.Active)
			agents := rec.all()
			if len(agents) != 2 {
				t.Fatalf("%d ramdisk boots, want 2 (clean, deploy)", len(agents))
			}
			calls := h.fleet.PowerCalls(n.UUID)

			// End of cleaning: sync, then the out-of-band power off.
			clean := agents[0].Executed()
			sync := lastRun(clean, agentclient.CmdSync)
			if sync == nil || sync.Status != agentclient.StatusSucceeded {
				t.Fatalf("cleaning agent ran %v: no standby.sync before the power off", commandNames(clean))
			}
			if len(oobAfter(calls, driver.PowerOff, sync.FinishedAt)) == 0 {
				t.Fatalf("no out-of-band power off after the cleaning agent's sync: %v", calls)
			}

			// End of deploy: tear_down_agent.
			dep := agents[1].Executed()
			sync, soft := lastRun(dep, agentclient.CmdSync), lastRun(dep, agentclient.CmdPowerOff)
			if sync == nil || sync.Status != agentclient.StatusSucceeded {
				t.Fatalf("deploy agent ran %v: no standby.sync", commandNames(dep))
			}
			if (soft != nil) != tc.wantSoft {
				t.Fatalf("deploy agent ran %v: standby.power_off sent %v, want %v", commandNames(dep), soft != nil, tc.wantSoft)
			}
			if soft != nil && soft.StartedAt.Before(sync.FinishedAt) {
				t.Fatalf("standby.power_off started %v, before standby.sync finished %v", soft.StartedAt, sync.FinishedAt)
			}
			write := lastRun(dep, "deploy.execute_deploy_step")
			if write == nil || sync.StartedAt.Before(write.FinishedAt) {
				t.Fatalf("standby.sync must follow write_image: %v", commandNames(dep))
			}
			// Power actions after the sync: the tear_down_agent power off
			// (out of band only when wanted), then boot_instance's power on.
			offs := oobAfter(calls, driver.PowerOff, sync.FinishedAt)
			if got := len(offs) > 0; got != tc.wantHard {
				t.Fatalf("out-of-band power off after the deploy agent's sync: %v, want %v (calls %v)", got, tc.wantHard, calls)
			}
			if len(oobAfter(calls, driver.PowerOn, sync.FinishedAt)) != 1 {
				t.Fatalf("boot_instance power on missing after the tear-down: %v", calls)
			}
		})
	}
}

func commandNames(ex []agenttest.Execution) []string {
	out := make([]string, 0, len(ex))
	for _, e := range ex {
		out = append(out, e.Command+":"+string(e.Status))
	}
	return out
}

// TestTearDownHungSyncIsBounded gives the deploy's agent a standby.sync
// that never answers: the power off waits at most SyncTimeout for it,
// records the failed flush in the node's history, and the deploy still
// reaches active (a node must stay controllable when its agent hangs).
// A second node whose agent syncs at once deploys at the same time: its
// deploy time, under the same load, is the baseline the hung deploy is
// measured against (a fixed 5 s bound failed on a loaded CI machine).
func TestTearDownHungSyncIsBounded(t *testing.T) {
	t.Parallel()
	const syncTimeout = 300 * time.Millisecond
	var hung atomic.Value // the UUID of the node whose sync hangs
	hung.Store("")
	rec := &agentRecorder{}
	factory := func(uuid string) *agenttest.Agent {
		a := rec.factory(uuid)
		if uuid == hung.Load().(string) {
			a.SetBehavior(agentclient.CmdSync, agenttest.Behavior{Delay: time.Hour})
		}
		return a
	}
	h := newAgentHarnessWith(t, conductor.Options{DisableAutomatedClean: true}, conductor.AgentSettings{
		ForceOOBPowerOff: true, SyncTimeout: syncTimeout}, factory)
	n := h.enrollAgentNode("hung-sync")
	base := h.enrollAgentNode("sync-answers")
	hung.Store(n.UUID)
	for _, uuid := range []string{n.UUID, base.UUID} {
		h.must(h.c.Manage(h.ctx, uuid))
		h.waitFor(uuid, statemachine.Manageable)
		h.must(h.c.Provide(h.ctx, uuid))
		h.waitFor(uuid, statemachine.Available)
	}
	start := time.Now()
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	h.must(h.c.Deploy(h.ctx, base.UUID, conductor.DeployOptions{}))
	took := map[string]time.Duration{}
	deadline := start.Add(2 * time.Minute)
	for len(took) < 2 {
		for _, uuid := range []string{n.UUID, base.UUID} {
			if _, done := took[uuid]; done {
				continue
			}
			cur, err := h.store.GetNode(h.ctx, uuid)
			h.must(err)
			if cur.ProvisionState == statemachine.Active && cur.Reservation == "" {
				took[uuid] = time.Since(start)
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s is %s (last error %q) 2 min after its deploy", cur.Name, cur.ProvisionState, cur.LastError)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Without the bound the deploy would wait the hour the sync takes;
	// with it, at most SyncTimeout more than the baseline. The margin is
	// generous, relative to the baseline, for a machine whose load
	// changes between the two deploys' steps.
	if limit := 3*took[base.UUID] + 10*syncTimeout; took[n.UUID] > limit {
		t.Fatalf("deploy took %v with a hung sync, %v with an answering one (limit %v)", took[n.UUID], took[base.UUID], limit)
	}
	synced := func(uuid string) bool {
		hist, err := h.store.ListHistory(h.ctx, uuid, 0)
		h.must(err)
		for _, e := range hist {
			if e.Event == "agent sync failed" && e.Severity == baremetal.HistoryWarning {
				return false
			}
		}
		return true
	}
	if synced(n.UUID) {
		t.Fatal("the failed flush is not in the node's history")
	}
	if !synced(base.UUID) {
		t.Fatal("the baseline node's history has a failed flush: its agent answered the sync")
	}
}
