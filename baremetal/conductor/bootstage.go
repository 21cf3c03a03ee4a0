package conductor

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/statemachine"
)

// DefaultBootStageBuffer is the default of Options.BootStageBuffer.
const DefaultBootStageBuffer = 4096

// bootHistoryLimit bounds the node history read to find the current
// boot attempt's stages.
const bootHistoryLimit = 200

// driver_internal_info keys of the boot-stage checks. bootPreparedKey is
// set when a network boot interface prepared the node's ramdisk boot
// (the conductor recorded stage.Prepared), bootHeartbeatKey when the
// ramdisk's agent first heartbeated afterwards; the stall check reads the
// history only of nodes that have the first and not the second.
const (
	bootPreparedKey  = "boot_stage_prepared"
	bootHeartbeatKey = "boot_stage_heartbeat"
)

// ObserveBootStage receives a boot stage from the boot server, which the
// embedder hands the conductor as its stage.Observer. It never blocks:
// the record waits in a queue bounded by Options.BootStageBuffer, drained
// by a goroutine of the conductor's into the node's history (event type
// "boot", the stage as event, its phrase as message, its time as the
// entry's) and the Watch stream (EventBootStage). When the queue is full,
// or the conductor is not running, the record is dropped and counted in
// anvil_conductor_boot_stages_dropped_total. A record without Node (a
// machine the boot server has no configuration for) is only logged.
//
// A stage.Prepared record is ignored: the conductor writes its own, at
// once, when a network boot interface has prepared a node's ramdisk (so it
// is in the history before any stage of the attempt), and a second one
// from the boot server would only repeat it.
func (c *Conductor) ObserveBootStage(r stage.Record) {
	if r.Stage == stage.Prepared {
		return
	}
	if r.At.IsZero() {
		r.At = c.clock.Now()
	}
	c.queueBootStage(r, "")
}

// queuedStage is a boot stage waiting in the conductor's queue, with its
// node's name when the sender knew it ("" to read it from the store).
type queuedStage struct {
	r    stage.Record
	name string
}

// queueBootStage queues r for drainBootStages without blocking, or
// counts it dropped.
func (c *Conductor) queueBootStage(r stage.Record, name string) {
	select {
	case <-c.stopCh:
		c.metrics.bootStagesDropped.Inc()
		return
	default:
	}
	select {
	case c.bootStages <- queuedStage{r, name}:
	default:
		c.metrics.bootStagesDropped.Inc()
	}
}

var _ stage.Observer = (*Conductor)(nil)

// drainBootStages records queued boot stages until ctx ends, then what
// is still queued, and returns. A dequeued record is written whatever
// ctx says (a record taken as Stop cancels ctx is not lost for want of
// its node's name).
func (c *Conductor) drainBootStages(ctx context.Context) {
	defer c.loops.Done()
	wctx := context.WithoutCancel(ctx)
	for {
		select {
		case q := <-c.bootStages:
			c.recordBootStage(wctx, q.r, q.name)
		case <-ctx.Done():
			for {
				select {
				case q := <-c.bootStages:
					c.recordBootStage(wctx, q.r, q.name)
				default:
					return
				}
			}
		}
	}
}

// recordBootStage writes r into its node's history and publishes it;
// name is the node's name, or "" to read it from the store.
func (c *Conductor) recordBootStage(ctx context.Context, r stage.Record, name string) {
	if r.Stage == "" {
		return
	}
	if r.Node == "" {
		c.log.Info("boot stage of a machine without a boot configuration", "stage", r.Stage, "mac", r.MAC, "detail", r.Phrase())
		return
	}
	if name == "" {
		n, err := c.store.GetNode(ctx, r.Node)
		if err != nil {
			c.log.Debug("boot stage of a node not in the store", "node", r.Node, "stage", r.Stage, "error", err)
			return
		}
		name = n.Name
	}
	sev := baremetal.HistoryInfo
	if r.Err != "" || r.Stage == stage.TFTPFailed {
		sev = baremetal.HistoryWarning
	}
	h := &baremetal.HistoryEntry{NodeUUID: r.Node, Event: truncEvent(string(r.Stage)), EventType: stage.EventType,
		Message: r.Phrase(), Severity: sev, Conductor: c.host, CreatedAt: r.At}
	if err := c.store.AddHistory(context.WithoutCancel(ctx), h); err != nil {
		if errors.Is(err, baremetal.ErrNotFound) {
			c.log.Debug("boot stage of a node no longer in the store", "node", r.Node, "stage", r.Stage)
		} else {
			c.log.Warn("boot stage not recorded", "node", r.Node, "stage", r.Stage, "error", err)
		}
		return
	}
	c.hub.publish(Event{Time: r.At, Type: EventBootStage, NodeUUID: r.Node, NodeName: name, BootStage: r.Stage, Detail: h.Message, Conductor: c.host})
}

// networkBooter is the capability by which the conductor recognises a
// boot interface whose ramdisk boots the boot server serves (package
// driver/pxe's interfaces): such a boot has boot stages.
type networkBooter interface {
	NetworkBoot() string
}

// bootPrepared records, after the node's boot interface prepared a
// ramdisk boot, that a new boot attempt starts: for a network boot
// interface, stage.Prepared in the history (written at once, so it comes
// before every stage of the attempt) and the key that enables the stall
// check; for any other, the keys cleared. The node is not saved.
func (c *Conductor) bootPrepared(ctx context.Context, t *task) {
	n := t.node
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	delete(n.DriverInternalInfo, bootHeartbeatKey)
	d, err := t.driver()
	if err != nil {
		return
	}
	if _, ok := d.Boot().(networkBooter); !ok {
		delete(n.DriverInternalInfo, bootPreparedKey)
		return
	}
	now := c.clock.Now()
	n.DriverInternalInfo[bootPreparedKey] = now.UTC().Format(time.RFC3339Nano)
	c.recordBootStage(ctx, stage.Record{Node: n.UUID, Stage: stage.Prepared, At: now}, n.Name)
}

// markFirstHeartbeat marks in n that its agent heartbeated since its
// ramdisk boot was prepared, and reports whether this heartbeat is that
// first one (n was not marked). n is not saved.
func markFirstHeartbeat(n *baremetal.Node) bool {
	if _, seen := n.DriverInternalInfo[bootHeartbeatKey]; seen {
		return false
	}
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[bootHeartbeatKey] = true
	return true
}

// recordFirstHeartbeat records stage.AgentHeartbeat for the heartbeat
// markFirstHeartbeat found first, once the node carrying the mark is
// saved (so a later heartbeat writes no history).
func (c *Conductor) recordFirstHeartbeat(ctx context.Context, n *baremetal.Node, callbackURL string) {
	addr := ""
	if u, err := url.Parse(callbackURL); err == nil {
		addr = u.Hostname()
	}
	c.recordBootStage(ctx, stage.Record{Node: n.UUID, Stage: stage.AgentHeartbeat, Addr: addr, At: c.clock.Now()}, n.Name)
	c.traceBoot(ctx, n)
}

// bootRecords reads the node's boot stages from its recent history,
// oldest first.
func (c *Conductor) bootRecords(ctx context.Context, uuid string) ([]stage.Record, error) {
	hist, err := c.store.ListHistory(ctx, uuid, bootHistoryLimit)
	if err != nil {
		return nil, err
	}
	var out []stage.Record
	for _, h := range hist {
		if h.EventType != stage.EventType {
			continue
		}
		out = append(out, stage.Record{Node: uuid, Stage: stage.Stage(h.Event), Note: h.Message, At: h.CreatedAt})
	}
	// The queue may write a record after a later one the conductor wrote
	// itself (stage.Prepared is written at once): order by time.
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

// bootSummary returns ", last boot stage: ..." for a node whose current
// attempt has network-boot stages, else "".
func (c *Conductor) bootSummary(ctx context.Context, n *baremetal.Node) string {
	if _, ok := n.DriverInternalInfo[bootPreparedKey]; !ok {
		return ""
	}
	recs, err := c.bootRecords(ctx, n.UUID)
	if err != nil {
		return ""
	}
	cur := stage.Current(recs)
	if len(cur) == 0 {
		return ""
	}
	last := cur[len(cur)-1]
	return fmt.Sprintf(", last boot stage: %s at %s (boot stages: %s)", last.Phrase(), last.At.Format("15:04:05"), stage.Summary(cur))
}

// waitCheck is one wait state the callback-timeout periodic checks.
type waitCheck struct {
	state   statemachine.State
	timeout time.Duration
	msg     string
}

// checkBootStalls fails, early, the nodes waiting in a check's state
// whose network boot has not reached its next stage within
// Options.BootStageDeadlines: as the callback timeout would (same failure
// path and states), with last_error "<the timeout message>: boot
// stalled: <where it stopped>".
func (c *Conductor) checkBootStalls(ctx context.Context, now time.Time, checks []waitCheck) {
	d := c.opts.BootStageDeadlines
	if d.DHCP < 0 && d.Fetch < 0 && d.Agent < 0 && d.Heartbeat < 0 {
		return
	}
	for _, chk := range checks {
		if chk.timeout <= 0 {
			// The state's callback timeout is disabled: nothing fails
			// a node waiting there, early or late.
			continue
		}
		f := baremetal.NodeFilter{ProvisionStates: []statemachine.State{chk.state}, Reserved: new(false), Maintenance: new(false)}
		nodes, err := c.listAll(ctx, f)
		if err != nil {
			c.log.Warn("boot stall check failed", "state", chk.state, "error", err)
			continue
		}
		for _, n := range nodes {
			if _, ok := n.DriverInternalInfo[bootPreparedKey]; !ok {
				continue
			}
			if _, ok := n.DriverInternalInfo[bootHeartbeatKey]; ok {
				continue
			}
			recs, err := c.bootRecords(ctx, n.UUID)
			if err != nil {
				c.log.Warn("boot stall check: cannot read history", "node", n.UUID, "error", err)
				continue
			}
			stall, stalled := stage.Check(recs, now, d)
			if !stalled {
				continue
			}
			c.log.Warn("network boot stalled", "node", n.UUID, "state", chk.state, "last_stage", stall.Last.Stage, "waiting_for", stall.Waiting)
			// Any heartbeat waiting for a worker shows the boot reached
			// its agent.
			c.timeoutNode(ctx, n.UUID, chk.state, time.Time{}, fmt.Sprintf(chk.msg, n.UUID)+": boot stalled: "+stall.Message)
		}
	}
}

// NodeForMAC says which enrolled node has a pxe-enabled port with MAC
// address mac, whatever the node's state: the conductor is the boot
// server's netboot.Resolver, so that a known machine without a boot
// configuration boots from its disk instead of the discovery fallback.
// mac is read as a port address is (baremetal.NormalizeMAC); one that is
// not a port address is not found.
func (c *Conductor) NodeForMAC(ctx context.Context, mac string) (node string, found bool, err error) {
	hw, err := baremetal.NormalizeMAC("address", mac)
	if err != nil {
		return "", false, nil
	}
	p, err := c.store.GetPort(ctx, hw)
	if err != nil {
		if errors.Is(err, baremetal.ErrNotFound) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("conductor %s: port of MAC %s: %w", c.host, hw, err)
	}
	if !p.PXEEnabled {
		return "", false, nil
	}
	return p.NodeUUID, true, nil
}

// recordLookup records a successful agent lookup as a boot stage (the
// first MAC address the agent sent as its address). The lookup is on the
// agent's request path, so the record goes through the bounded queue
// like the boot server's: no history write before the answer. Order
// does not need it written at once: bootRecords orders by time, and
// stage.Prepared, written at once, is older than any lookup.
func (c *Conductor) recordLookup(n *baremetal.Node, macs []string) {
	r := stage.Record{Node: n.UUID, Stage: stage.AgentLookup, At: c.clock.Now()}
	if len(macs) > 0 {
		r.Addr = macs[0]
	}
	c.queueBootStage(r, n.Name)
}
