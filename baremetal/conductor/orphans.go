package conductor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/prometheus/client_golang/prometheus"
)

// ClusterCollectors returns the Prometheus collectors of the conductor's
// multi-conductor machinery (rings and takeovers), for the embedder to
// register beside Metrics(); nil for a lone conductor.
func (c *Conductor) ClusterCollectors() []prometheus.Collector {
	if c.cluster == nil {
		return nil
	}
	return []prometheus.Collector{c.cluster.own, c.cluster.takeovers, c.cluster.latency}
}

// checkOrphanNodes is Ironic's _check_orphan_nodes, run once: it releases
// the reservations of conductors whose keepalive is older than the
// heartbeat timeout, then takes over the nodes this conductor owns that a
// dead conductor left mid-operation (resumed, restarted, failed or left to
// wait, per docs/takeover.md). A restart under the same hostname goes
// through it too, so that both paths follow one rule. Tests call it
// through export_test.go.
func (c *Conductor) checkOrphanNodes(ctx context.Context) {
	if c.breakOrphans(ctx) {
		c.takeOverInterrupted(ctx, true)
	}
}

// orphanDeadlineEpsilon is how long after a peer's last keepalive plus the
// heartbeat timeout the prompt orphan check runs. The store keeps
// keepalives to the microsecond and calls a conductor dead only once its
// keepalive is strictly older than the timeout, so a check at exactly
// that instant could still find it alive.
const orphanDeadlineEpsilon = 10 * time.Millisecond

// runOrphanChecks starts the orphan check loop, which ends with ctx. The
// check runs every OrphanCheckInterval, as in Ironic, and also as soon as
// a live peer's keepalive would cross the heartbeat timeout, so that a dead
// peer's nodes are released about one timeout after its last keepalive
// rather than up to one interval later. docs/takeover.md explains the
// deadlines and the clocks they use. A negative OrphanCheckInterval
// disables both.
func (c *Conductor) runOrphanChecks(ctx context.Context) {
	cl := c.cluster
	if cl == nil || cl.opts.OrphanCheckInterval <= 0 {
		return
	}
	c.loops.Add(1)
	go func() {
		defer c.loops.Done()
		w := &peerWatch{self: c.host, timeout: cl.opts.Ring.HeartbeatTimeout}
		tick := c.clock.After(cl.opts.OrphanCheckInterval)
		deadline := c.clock.After(c.watchPeers(ctx, w))
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick:
				c.checkOrphansPeriodic(ctx)
				tick = c.clock.After(cl.opts.OrphanCheckInterval)
			case <-deadline:
				wait := c.watchPeers(ctx, w)
				if w.gone {
					c.checkOrphansPeriodic(ctx)
				}
				deadline = c.clock.After(wait)
			}
		}
	}()
}

// watchPeers reads the live conductors once and returns how long to wait
// before the next look; w.gone says whether a peer seen alive before is
// no longer. A failed read is retried after one heartbeat timeout.
func (c *Conductor) watchPeers(ctx context.Context, w *peerWatch) time.Duration {
	alive, err := c.store.ListAliveConductors(ctx, w.timeout)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("orphan check: cannot list live conductors", "error", err)
		}
		w.gone = false
		return w.timeout
	}
	return w.observe(c.clock.Now(), alive)
}

// peerWatch is the state of the prompt orphan check (see
// runOrphanChecks): the peers seen alive at the last look, by lower-cased
// hostname, with their last keepalive.
type peerWatch struct {
	self    string
	timeout time.Duration
	seen    map[string]time.Time
	// gone is set by observe when a peer of the previous look is missing.
	gone bool
	// late is the pause after a deadline that passed on the conductor's
	// clock while the store still listed the peer alive.
	late time.Duration
}

// observe takes the live conductors listed just before now and returns
// how long to wait for the earliest peer to cross the heartbeat timeout,
// at most one heartbeat timeout; it sets w.gone when a peer of the
// previous look is not in alive.
func (w *peerWatch) observe(now time.Time, alive []*baremetal.ConductorRecord) time.Duration {
	next := make(map[string]time.Time, len(alive))
	var earliest time.Time
	for _, r := range alive {
		h := strings.ToLower(r.Hostname)
		if h == strings.ToLower(w.self) {
			continue
		}
		next[h] = r.UpdatedAt
		if earliest.IsZero() || r.UpdatedAt.Before(earliest) {
			earliest = r.UpdatedAt
		}
	}
	w.gone = false
	for h := range w.seen {
		if _, ok := next[h]; !ok {
			w.gone = true
			break
		}
	}
	w.seen = next
	if earliest.IsZero() {
		w.late = 0
		return w.timeout
	}
	wait := earliest.Add(w.timeout + orphanDeadlineEpsilon).Sub(now)
	if wait <= 0 {
		w.late = min(max(2*w.late, orphanDeadlineEpsilon), w.timeout)
		return w.late
	}
	w.late = 0
	return min(wait, w.timeout)
}

// checkOrphansPeriodic is checkOrphanNodes as the loop runs it: the
// takeover pass (listing the interrupted nodes, handing each to the
// worker pool, then the consoles) gets a goroutine of its own and does
// not wait for the takeovers, so that it never delays the next release
// of a dead conductor's reservations. A pass starts only when the
// previous one has finished.
func (c *Conductor) checkOrphansPeriodic(ctx context.Context) {
	if !c.breakOrphans(ctx) {
		return
	}
	c.loops.Add(1)
	go func() {
		defer c.loops.Done()
		c.takeoverPass(ctx)
	}()
}

// breakOrphans releases the reservations of dead conductors; it reports
// false for a lone conductor.
func (c *Conductor) breakOrphans(ctx context.Context) bool {
	cl := c.cluster
	if cl == nil {
		return false
	}
	timeout := cl.opts.Ring.HeartbeatTimeout
	broken, err := c.store.BreakDeadReservations(ctx, timeout, c.host)
	if err != nil {
		c.log.Warn("orphan check: cannot release dead conductors' reservations", "error", err)
	}
	now := c.clock.Now()
	// The dead holders' last keepalives, for the latency metric: read only
	// when something was released, so a quiet check is one transaction. A
	// holder restarted meanwhile (its row fresh again) is not measured.
	lastSeen := map[string]time.Time{}
	for _, b := range broken {
		if _, ok := lastSeen[b.Holder]; ok {
			continue
		}
		lastSeen[b.Holder] = time.Time{}
		if rec, err := c.store.GetConductor(ctx, b.Holder); err == nil && now.Sub(rec.UpdatedAt) >= timeout {
			lastSeen[b.Holder] = rec.UpdatedAt
		}
	}
	var slowest time.Duration
	for _, b := range broken {
		cl.takeovers.WithLabelValues("released").Inc()
		if seen := lastSeen[b.Holder]; !seen.IsZero() {
			cl.latency.Observe(now.Sub(seen).Seconds())
			slowest = max(slowest, now.Sub(seen))
		}
		// Dated when the release committed, not when its note is
		// written: a release of a hundred nodes writes a hundred notes,
		// one after the other.
		c.addHistory(ctx, &baremetal.HistoryEntry{NodeUUID: b.NodeUUID, Event: "reservation released", EventType: "conductor",
			Message:  fmt.Sprintf("reservation of dead conductor %s released by conductor %s", b.Holder, c.host),
			Severity: baremetal.HistoryWarning, Conductor: c.host, CreatedAt: now})
	}
	if len(broken) > 0 {
		holders := make([]string, 0, len(lastSeen))
		for h := range lastSeen {
			holders = append(holders, h)
		}
		sort.Strings(holders)
		args := []any{"nodes", len(broken), "holders", holders}
		if slowest > 0 {
			args = append(args, "since_last_keepalive", slowest.Round(time.Millisecond).String())
		}
		c.log.Info("released reservations of dead conductors", args...)
		// A dead conductor leaves the rings as soon as we see it dead.
		if _, err := cl.own.Refresh(ctx); err != nil {
			c.log.Warn("ring rebuild failed", "error", err)
		}
		c.tellOwners(ctx, broken)
	}
	return true
}

// tellOwners tells the other conductors that this one released the
// reservations of dead conductors (the nodes in broken), on the takeover
// topic (takeoverNotified): each takes over the interrupted nodes it
// owns. This conductor takes over its own share itself; a node another
// conductor owns would otherwise wait, unreserved in its "-ing" state,
// for that owner's next orphan check (a minute), as the owner's own
// check may have run just before the release. A missed notice costs
// that wait and nothing else.
func (c *Conductor) tellOwners(ctx context.Context, broken []baremetal.BrokenReservation) {
	n := c.cluster.opts.Notifier
	if n == nil || len(broken) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := n.Publish(ctx, baremetal.TopicTakeover, c.host); err != nil {
		c.log.Warn("takeover notice not sent; the owners take the nodes over at their next orphan check", "nodes", len(broken), "error", err)
	}
}
