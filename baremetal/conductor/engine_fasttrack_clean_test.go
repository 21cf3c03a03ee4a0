package conductor_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"

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

// lookupGate is an HTTP transport for the simulated ramdisks that
// answers their lookups 404 (as Ironic does for a node not ready for
// one) until open is closed: the agent is up but has not checked in.
type lookupGate struct {
	open chan struct{}
	next http.RoundTripper
}

func (g *lookupGate) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/v1/lookup") {
		select {
		case <-g.open:
		default:
			return &http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(`{"error_message":"{\"faultstring\":\"not yet\"}"}`)),
				Request: r}, nil
		}
	}
	return g.next.RoundTrip(r)
}

// TestFastTrackCleanAfterInspectionWaitsForAgent provides a node right
// after a fast-track in-band inspection, before the agent that inspected
// it has looked it up: as Ironic's is_fast_track (power on, inspection
// finished within fast_track_timeout) the cleaning does not reboot the
// node into a new ramdisk but waits in clean wait for that agent's
// heartbeat, which then runs the clean steps. Found with the real IPA
// in a VM (internal/vmlab), where the agent's lookup comes seconds after
// its inspection data and the provide rebooted it.
func TestFastTrackCleanAfterInspectionWaitsForAgent(t *testing.T) {
	t.Parallel()
	rec := &agentRecorder{}
	gate := &lookupGate{open: make(chan struct{}), next: http.DefaultTransport}
	h := newAgentHarnessFleet(t, conductor.Options{}, conductor.AgentSettings{FastTrack: true},
		simfleet.Config{Agent: rec.factory, HTTPClient: &http.Client{Transport: gate, Timeout: 30 * time.Second}})
	n := h.enrollInspectNode("ft-inspect-clean", simfleet.PowerName, nil)
	h.must(h.c.Inspect(h.ctx, n.UUID))
	if m := h.waitForFinished(n.UUID, statemachine.Manageable); m.PowerState != driver.PowerOn {
		t.Fatalf("power %q after a fast-track inspection, want power on", m.PowerState)
	}
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.CleanWait)
	if got := h.fleet.Boots(n.UUID); got != 1 {
		t.Fatalf("%d ramdisk boots once cleaning waits, want 1 (the inspection's agent is still up)", got)
	}
	close(gate.open)
	h.waitFor(n.UUID, statemachine.Available)
	agents := rec.all()
	if got := h.fleet.Boots(n.UUID); got != 1 || len(agents) != 1 {
		t.Fatalf("%d boots, %d agents after cleaning, want 1 each", got, len(agents))
	}
	if got := agents[0].StepRuns(steps.Clean, "deploy", "erase_devices_metadata"); got != 1 {
		t.Fatalf("erase_devices_metadata ran %d times on the inspection's agent, want 1", got)
	}
}

// TestFastTrackUndeployPowersOffAndBootsTheRamdisk undeploys a node
// deployed with fast track, soon after its inspection: the tear-down
// powers the instance off (Ironic's agent deploy tear_down), so fast
// track no longer applies (power off) and cleaning boots a new ramdisk
// instead of waiting for a heartbeat from the instance, which has no
// agent. The conductor used to leave the instance running, and with the
// inspection still recent the cleaning waited in clean wait for an agent
// that would never come.
func TestFastTrackUndeployPowersOffAndBootsTheRamdisk(t *testing.T) {
	t.Parallel()
	// RetryInterval: the new agent's lookups refused while the undeploy
	// holds the node are retried at once, not after IPA's 5, 10, 30 s.
	h := newAgentHarnessFleet(t, conductor.Options{}, conductor.AgentSettings{FastTrack: true}, simfleet.Config{RetryInterval: 50 * time.Millisecond})
	n := h.enrollInspectNode("ft-undeploy", simfleet.PowerName, nil)
	h.must(h.c.Inspect(h.ctx, n.UUID))
	h.waitForFinished(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	if a := h.waitFor(n.UUID, statemachine.Active); a.PowerState != driver.PowerOn {
		t.Fatalf("active node power %q", a.PowerState)
	}
	boots, calls := h.fleet.Boots(n.UUID), len(h.fleet.PowerCalls(n.UUID))
	h.must(h.c.Undeploy(h.ctx, n.UUID))
	// Once cleaning waits for its agent the ramdisk is booted (before
	// the fix it was not, and the wait never ended).
	h.waitFor(n.UUID, statemachine.CleanWait)
	if got := h.fleet.Boots(n.UUID); got != boots+1 {
		t.Fatalf("%d ramdisk boots once cleaning waits, want %d (one for cleaning)", got, boots+1)
	}
	h.waitFor(n.UUID, statemachine.Available)
	if pc := h.fleet.PowerCalls(n.UUID)[calls:]; len(pc) == 0 || pc[0].Target != driver.PowerOff {
		t.Fatalf("power actions of the undeploy %v: want the instance powered off first", pc)
	}
}
