package conductor

import (
	"context"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
)

// fastTrackFacts are what Ironic's is_fast_track looks at beyond the
// node's configuration (reference §8, conditions 4 to 6).
type fastTrackFacts struct {
	// Able is fast_track_able: enabled for the node and no last_error.
	Able bool
	// State is the node's provision state.
	State statemachine.State
	// FirmwareUpdating is true while a firmware update is in progress.
	FirmwareUpdating bool
	// Power is the power state the power interface reported just now;
	// PowerErr is set when the query failed.
	Power    driver.PowerState
	PowerErr error
	// AgentURL is true when an agent URL is recorded.
	AgentURL bool
	// LastHeartbeat is driver_internal_info.agent_last_heartbeat ("" when
	// absent); InspectionFinished is inspection_finished_at (zero when
	// the node was never inspected).
	LastHeartbeat      string
	InspectionFinished time.Time
	// Now is the conductor's clock; Timeout is fast_track_timeout.
	Now     time.Time
	Timeout time.Duration
}

// fastTrackReason is why fast track does not apply ("" when it does).
type fastTrackReason string

const (
	fastTrackOK           fastTrackReason = ""
	fastTrackNotAble      fastTrackReason = "fast track disabled or node has a last error"
	fastTrackServicing    fastTrackReason = "node is servicing or updating firmware"
	fastTrackPowerUnknown fastTrackReason = "power state could not be read"
	fastTrackPoweredOff   fastTrackReason = "node is not powered on"
	fastTrackNoAgent      fastTrackReason = "no recent agent heartbeat or inspection"
)

// decideFastTrack is Ironic's is_fast_track on gathered facts: fast
// track applies only when the node is fast-track able, not servicing, the
// power interface reports it on, and the agent is considered alive (a
// recorded URL with a heartbeat no older than Timeout, or an inspection
// finished no longer than Timeout ago). A heartbeat stamped after Now
// (clock skew between API and conductor) counts as recent.
func decideFastTrack(f fastTrackFacts) fastTrackReason {
	if !f.Able {
		return fastTrackNotAble
	}
	switch f.State {
	case statemachine.Servicing, statemachine.ServiceWait, statemachine.ServiceHold, statemachine.ServiceFailed:
		return fastTrackServicing
	}
	if f.FirmwareUpdating {
		return fastTrackServicing
	}
	if f.PowerErr != nil {
		return fastTrackPowerUnknown
	}
	if f.Power != driver.PowerOn {
		return fastTrackPoweredOff
	}
	cutoff := f.Now.Add(-f.Timeout)
	if !f.InspectionFinished.IsZero() && f.InspectionFinished.After(cutoff) {
		return fastTrackOK
	}
	inspecting := f.State == statemachine.Inspecting || f.State == statemachine.InspectWait
	if f.AgentURL && !inspecting && f.LastHeartbeat != "" {
		hb, err := time.ParseInLocation(agentclient.LastHeartbeatLayout, f.LastHeartbeat, time.UTC)
		if err == nil && hb.After(cutoff) {
			return fastTrackOK
		}
	}
	return fastTrackNoAgent
}

// isFastTrack gathers the facts of the task's node (querying its power
// interface live) and decides whether fast track applies now.
func (c *Conductor) isFastTrack(ctx context.Context, t *task) (bool, fastTrackReason) {
	n := t.node
	f := fastTrackFacts{
		Able: c.fastTrackable(t), State: n.ProvisionState,
		InspectionFinished: n.InspectionFinishedAt, Now: c.clock.Now(), Timeout: c.agent.FastTrackTimeout,
	}
	if !f.Able {
		return false, fastTrackNotAble
	}
	for _, k := range []string{"redfish_fw_updates", "firmware_updates"} {
		if v, ok := n.DriverInternalInfo[k]; ok && v != nil {
			f.FirmwareUpdating = true
		}
	}
	url, _ := n.DriverInternalInfo[driver.InternalAgentURL].(string)
	f.AgentURL = url != ""
	f.LastHeartbeat, _ = n.DriverInternalInfo[driver.InternalAgentLastHeartbeat].(string)
	f.PowerErr = callIface(ctx, t, driver.KindPower, "read the power state", func(d *driver.Driver, p driver.PowerInterface, v *driver.Task) error {
		ps, err := p.GetPowerState(ctx, v)
		f.Power = ps
		return err
	})
	r := decideFastTrack(f)
	return r == fastTrackOK, r
}

// dropStaleAgent forgets a recorded agent (URL and, unless pre-generated,
// token) when fast track does not apply right now, so that the deploy
// interface boots the ramdisk afresh instead of reusing an agent that is
// powered off or silent for longer than fast_track_timeout.
func (c *Conductor) dropStaleAgent(ctx context.Context, t *task) {
	n := t.node
	if url, _ := n.DriverInternalInfo[driver.InternalAgentURL].(string); url == "" || !c.agentBased(t) {
		return
	}
	ok, why := c.isFastTrack(ctx, t)
	if ok {
		return
	}
	c.log.Info("not using fast track: booting the ramdisk", "node", n.UUID, "reason", string(why))
	if _, pre := n.DriverInternalInfo[driver.InternalAgentTokenPregenerated]; !pre {
		delete(n.DriverInternalInfo, driver.InternalAgentToken)
	}
	delete(n.DriverInternalInfo, driver.InternalAgentURL)
}
