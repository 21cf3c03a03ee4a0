package conductor_test

import (
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestAgentFastTrackStaleHeartbeatReboots enables fast track and keeps the
// agent up after cleaning, then lets the conductor's clock run past
// fast_track_timeout without a heartbeat it could count as recent: the
// deploy must not reuse the agent but reboot the node into the ramdisk
// (reference §8, condition 6).
func TestAgentFastTrackStaleHeartbeatReboots(t *testing.T) {
	t.Parallel()
	// The conductor's clock starts at the wall clock (the agent API stamps
	// heartbeats with it) and is moved by hand.
	clk := storetest.NewManualClock(time.Now().UTC())
	// Lock retries keep real time: the agent's heartbeats hold the node's
	// lock for moments while the verbs below run, and a retry paced by a
	// clock nobody advances would wait forever.
	lockPolicy := baremetal.LockPolicy{Attempts: 50, Interval: 20 * time.Millisecond, Clock: clock.System()}
	h := newAgentHarnessWith(t, conductor.Options{Clock: clk, LockPolicy: &lockPolicy},
		conductor.AgentSettings{FastTrack: true, FastTrackTimeout: 60 * time.Second}, nil)
	n := h.enrollAgentNode("agent-stale")
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	av := h.waitFor(n.UUID, statemachine.Available)
	if _, ok := av.DriverInternalInfo[driver.InternalAgentURL]; !ok || h.fleet.Boots(n.UUID) != 1 {
		t.Fatalf("fast track did not keep the agent after cleaning (url kept %t, boots %d)", ok, h.fleet.Boots(n.UUID))
	}
	// Every heartbeat recorded so far is now more than the timeout old.
	clk.Advance(10 * time.Minute)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	h.waitFor(n.UUID, statemachine.Active)
	if got := h.fleet.Boots(n.UUID); got != 2 {
		t.Fatalf("ramdisk boots = %d, want 2: a stale heartbeat must force a reboot into the ramdisk", got)
	}
}

// TestAgentFastTrackPoweredOffReboots powers the node off between cleaning
// and deploy behind the conductor's back (the agent record stays): the
// live power query disables fast track and the deploy boots the ramdisk.
func TestAgentFastTrackPoweredOffReboots(t *testing.T) {
	t.Parallel()
	h := newAgentHarnessWith(t, conductor.Options{}, conductor.AgentSettings{FastTrack: true}, nil)
	n := h.enrollAgentNode("agent-off")
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	// The node loses power behind the conductor's back: the ramdisk stops
	// and the (simulated) BMC reports power off, while the agent's URL,
	// token and recent heartbeat stay recorded.
	h.fleet.Halt(n.UUID)
	deadline := time.Now().Add(10 * time.Second)
	for {
		cur, err := h.store.GetNode(h.ctx, n.UUID)
		h.must(err)
		if _, ok := cur.DriverInternalInfo[driver.InternalAgentURL]; !ok {
			t.Fatal("agent URL not kept after cleaning with fast track")
		}
		cur.DriverInternalInfo[fake.PowerStateKey] = string(driver.PowerOff)
		if err = h.store.UpdateNode(h.ctx, cur, ""); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cannot record the power loss: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	h.waitFor(n.UUID, statemachine.Active)
	if got := h.fleet.Boots(n.UUID); got != 2 {
		t.Fatalf("ramdisk boots = %d, want 2: a powered-off node must be booted into the ramdisk", got)
	}
}
