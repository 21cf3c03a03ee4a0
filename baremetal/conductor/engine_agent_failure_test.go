package conductor_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// scripted returns an agent factory that applies script to every agent
// booted (each boot of each node gets a fresh agent).
func scripted(script func(a *agenttest.Agent)) func(string) *agenttest.Agent {
	return func(string) *agenttest.Agent {
		a := agenttest.NewAgent(agenttest.AgentConfig{CommandDelay: 5 * time.Millisecond})
		script(a)
		return a
	}
}

func TestAgentCleanStepFails(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{}, scripted(func(a *agenttest.Agent) {
		a.SetStepBehavior(steps.Clean, "deploy", "erase_devices", agenttest.Behavior{
			Fail: &agentclient.AgentError{Type: "BlockDeviceEraseError", Code: 500, Message: "sda refused to erase"}})
	}))
	n := h.enrollAgentNode("agent-fail")
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	f := h.waitFor(n.UUID, statemachine.CleanFailed)
	if !f.Maintenance || f.Fault != "clean failure" {
		t.Errorf("maintenance %t fault %q, want the node in maintenance with fault clean failure", f.Maintenance, f.Fault)
	}
	if !strings.Contains(f.LastError, "erase_devices") || !strings.Contains(f.LastError, "sda refused to erase") {
		t.Errorf("last error %q does not name the step and the agent's error", f.LastError)
	}
	if f.PowerState != "power off" {
		t.Errorf("failed clean left power %q, want power off (ramdisk torn down)", f.PowerState)
	}
}

func TestAgentVersionMismatchRestartsAutomatedClean(t *testing.T) {
	t.Parallel()
	// The first erase_devices_metadata runs until the test upgraded the
	// hardware manager (a fixed 300 ms delay raced the test's poll on a
	// loaded machine: the step could end, and cleaning move on, before
	// the upgrade).
	release := make(chan struct{})
	h := newAgentHarness(t, conductor.Options{}, scripted(func(a *agenttest.Agent) {
		a.SetStepBehavior(steps.Clean, "deploy", "erase_devices_metadata", agenttest.Behavior{Release: release, Times: 1})
	}))
	n := h.enrollAgentNode("agent-mismatch")
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	// While the first step runs, the agent's hardware manager is upgraded
	// behind the conductor's back: the next step is refused for the
	// version and automated cleaning restarts from the first step.
	h.waitStep(n.UUID, "erase_devices_metadata")
	if !h.fleet.Agent(n.UUID).SetHardwareManagerVersion("GenericHardwareManager", "2.0") {
		t.Fatal("no GenericHardwareManager on the agent")
	}
	close(release)
	h.waitFor(n.UUID, statemachine.Available)
	hist, _ := h.store.ListHistory(h.ctx, n.UUID, 0)
	starts := 0
	for _, e := range hist {
		if e.Event == "step_start deploy.erase_devices_metadata" {
			starts++
		}
	}
	if starts != 2 {
		t.Fatalf("erase_devices_metadata started %d times, want 2 (before and after the restart)", starts)
	}
}

// waitStep waits until the node waits on the named clean step.
func (h *agentHarness) waitStep(uuid, step string) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cur, _ := h.store.GetNode(h.ctx, uuid)
		if cur.ProvisionState == "clean wait" && cur.CleanStep["step"] == step && cur.Reservation == "" {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("node never waited on %s: %s %v", step, cur.ProvisionState, cur.CleanStep)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestAgentRebootRequestedStep(t *testing.T) {
	t.Parallel()
	hm := agenttest.HardwareManager{Name: "RebootingManager", VersionKey: "rebooting", Version: "1",
		CleanSteps: []steps.Step{{Interface: "deploy", Name: "flash_firmware", Priority: 50, Abortable: true, RebootRequested: true}}}
	h := newAgentHarness(t, conductor.Options{}, func(string) *agenttest.Agent {
		return agenttest.NewAgent(agenttest.AgentConfig{CommandDelay: 5 * time.Millisecond,
			HardwareManagers: []agenttest.HardwareManager{agenttest.GenericHardwareManager(), hm}})
	})
	n := h.enrollAgentNode("agent-reboot")
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	if got := h.fleet.Boots(n.UUID); got != 2 {
		t.Fatalf("ramdisk boots = %d, want 2 (initial boot and the reboot the step asked for)", got)
	}
}

func TestAgentAbortRunningCleanStep(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{}, scripted(func(a *agenttest.Agent) {
		a.SetStepBehavior(steps.Clean, "deploy", "erase_devices_metadata", agenttest.Behavior{Delay: time.Minute})
	}))
	n := h.enrollAgentNode("agent-abort")
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitStep(n.UUID, "erase_devices_metadata")
	// A heartbeat being handled holds the node's lock: the abort is
	// refused with ErrNodeLocked (HTTP 409, as Ironic's NodeLocked) and
	// retried, as Ironic's clients do. Under load the two met.
	for deadline := time.Now().Add(time.Minute); ; {
		err := h.c.Abort(h.ctx, n.UUID)
		if err == nil {
			break
		}
		if !errors.Is(err, baremetal.ErrNodeLocked) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f := h.waitFor(n.UUID, statemachine.CleanFailed)
	if !strings.Contains(f.LastError, "deploy.erase_devices_metadata") {
		t.Fatalf("last error %q does not name the running step", f.LastError)
	}
	if f.PowerState != "power off" || h.fleet.Agent(n.UUID) != nil {
		t.Fatalf("after abort power is %q and the ramdisk runs: %t", f.PowerState, h.fleet.Agent(n.UUID) != nil)
	}
}

// TestAgentFastTrack keeps the agent running between cleaning and
// deployment (reference §8): the deploy reuses it without rebooting.
func TestAgentFastTrack(t *testing.T) {
	t.Parallel()
	h := newAgentHarnessWith(t, conductor.Options{}, conductor.AgentSettings{FastTrack: true}, nil)
	n := h.enrollAgentNode("agent-fast")
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	av := h.waitFor(n.UUID, statemachine.Available)
	if h.fleet.Agent(n.UUID) == nil || av.PowerState != "power on" {
		t.Fatalf("fast track: after cleaning the agent runs = %t, power %q; want the agent kept up", h.fleet.Agent(n.UUID) != nil, av.PowerState)
	}
	if _, ok := av.DriverInternalInfo[driver.InternalAgentURL]; !ok {
		t.Fatalf("fast track: agent URL wiped at the end of cleaning")
	}
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	h.waitFor(n.UUID, statemachine.Active)
	if got := h.fleet.Boots(n.UUID); got != 1 {
		t.Fatalf("fast track: ramdisk boots = %d, want 1 (no reboot for the deploy)", got)
	}
}
