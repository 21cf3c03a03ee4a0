package conductor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of the takeover periodic tasks (reference §4.6, §6).
const (
	// DefaultOrphanCheckInterval is Ironic's check_provision_state_interval,
	// the pace of _check_orphan_nodes.
	DefaultOrphanCheckInterval = 60 * time.Second
	// DefaultSyncLocalStateInterval is Ironic's sync_local_state_interval.
	DefaultSyncLocalStateInterval = 180 * time.Second
)

// ClusterOptions make a Conductor one of several sharing a database: it
// then acts only on the nodes the hash ring gives it, takes over nodes of
// dead conductors and can be drained. Leave Options.Cluster nil for a
// lone conductor, which owns every node of its group.
type ClusterOptions struct {
	// Ring configures the rings (algorithm, reset interval, heartbeat
	// timeout).
	Ring RingOptions
	// Notifier, when set, makes membership changes and hand-offs
	// immediate; without it they wait for the ring reset interval and the
	// intent poll.
	Notifier baremetal.ClusterNotifier
	// OrphanCheckInterval paces the release of dead conductors'
	// reservations and the takeover of the nodes they left mid-operation;
	// 0 means DefaultOrphanCheckInterval, negative disables it. Besides
	// this tick, the check runs as soon as a peer seen alive crosses the
	// heartbeat timeout (see checkOrphanNodes), so takeover does not wait
	// for the tick.
	OrphanCheckInterval time.Duration
	// SyncLocalStateInterval paces the re-preparation of active nodes last
	// prepared by another conductor; 0 means DefaultSyncLocalStateInterval,
	// negative disables it.
	SyncLocalStateInterval time.Duration
	// FailInterrupted makes takeover fail every node interrupted in
	// deploying, cleaning or servicing, as Ironic does, instead of
	// resuming the ones whose interrupted step is safe to re-run.
	FailInterrupted bool
	// RerunSafeSteps lists out-of-band steps ("interface.step") that are
	// safe to run again after a conductor died while running them, in
	// addition to those whose implementation says so (RerunSafeStepper).
	RerunSafeSteps []string
}

func (o ClusterOptions) withDefaults() ClusterOptions {
	o.Ring = o.Ring.withDefaults()
	if o.OrphanCheckInterval == 0 {
		o.OrphanCheckInterval = DefaultOrphanCheckInterval
	}
	if o.SyncLocalStateInterval == 0 {
		o.SyncLocalStateInterval = DefaultSyncLocalStateInterval
	}
	return o
}

// cluster is a conductor's multi-conductor state.
type cluster struct {
	opts     ClusterOptions
	own      *Ownership
	draining atomic.Bool
	rerun    map[string]bool
	// hardwareTypes are the hardware types this conductor enables: the
	// nodes it can work on, whoever the rings make their owner.
	hardwareTypes map[string]bool
	// takeoverBusy is set while a takeover pass runs (takeoverPass);
	// takeoverAgain asks the running pass for one more.
	takeoverBusy, takeoverAgain atomic.Bool

	takeovers *prometheus.CounterVec
	latency   prometheus.Histogram
}

// startCluster builds the conductor's rings once its row is registered;
// it does nothing for a lone conductor. It runs before any work is picked
// up, so start-up recovery already sees the right owners.
func (c *Conductor) startCluster(ctx context.Context) error {
	if c.opts.Cluster == nil {
		return nil
	}
	o := c.opts.Cluster.withDefaults()
	own, err := NewOwnership(c.store, c.host, c.opts.ConductorGroup, o.Ring, c.clock, c.log)
	if err != nil {
		return err
	}
	cl := &cluster{opts: o, own: own, rerun: map[string]bool{}, hardwareTypes: map[string]bool{}}
	for _, k := range o.RerunSafeSteps {
		cl.rerun[k] = true
	}
	for _, h := range c.drivers.Enabled().HardwareTypes {
		cl.hardwareTypes[h] = true
	}
	labels := prometheus.Labels{"conductor": c.host}
	cl.takeovers = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "anvil", Subsystem: "conductor", Name: "takeovers_total",
		Help: "Nodes taken over from dead conductors, by outcome (released, resumed, finished, restarted, waiting, failed, power_cleared, reprepared).", ConstLabels: labels},
		[]string{"outcome"})
	cl.latency = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "anvil", Subsystem: "conductor", Name: "takeover_latency_seconds",
		Help:        "Time from a dead conductor's last keepalive to the release of its reservations by this conductor.",
		ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(0.5, 2, 12)})
	if _, err := own.Refresh(ctx); err != nil {
		return err
	}
	c.cluster = cl
	c.announceMembership(ctx)
	return nil
}

// startClusterLoops starts the ring refresher, the notification listeners
// and the takeover periodics; they end with ctx.
func (c *Conductor) startClusterLoops(ctx context.Context) {
	cl := c.cluster
	if cl == nil {
		return
	}
	c.loops.Add(1)
	go func() {
		defer c.loops.Done()
		cl.own.Run(ctx, c.ringChanged)
	}()
	if n := cl.opts.Notifier; n != nil {
		mch, mcancel := n.Subscribe(baremetal.TopicMembership)
		ich, icancel := n.Subscribe(baremetal.TopicIntent)
		tch, tcancel := n.Subscribe(baremetal.TopicTakeover)
		c.loops.Add(1)
		go func() {
			defer c.loops.Done()
			defer mcancel()
			defer icancel()
			defer tcancel()
			for {
				select {
				case <-ctx.Done():
					return
				case <-mch:
					cl.own.Wake()
				case uuid := <-ich:
					c.intentNotified(ctx, uuid)
				case <-tch:
					c.takeoverNotified(ctx)
				}
			}
		}()
	}
	c.runOrphanChecks(ctx)
	c.every(ctx, cl.opts.SyncLocalStateInterval, func(ctx context.Context) { c.syncLocalState(ctx) })
}

// intentNotified queues a node another conductor accepted a verb for, if
// this conductor owns it.
func (c *Conductor) intentNotified(ctx context.Context, uuid string) {
	n, err := c.store.GetNode(ctx, uuid)
	if err != nil || n.Reserved() || !c.ownsNode(n) {
		return
	}
	if _, ok := readIntent(n); ok {
		c.queue.push(job{uuid: uuid})
	}
}

// takeoverNotified runs when a conductor released a dead one's
// reservations (tellOwners): the rings are rebuilt from the database,
// and, if they hold this conductor (a conductor the others take for
// dead, its keepalive late, does not act on the notice), it takes over
// the interrupted nodes it owns.
func (c *Conductor) takeoverNotified(ctx context.Context) {
	cl := c.cluster
	if _, err := cl.own.Refresh(ctx); err != nil {
		c.log.Warn("takeover notice: ring rebuild failed; the orphan check takes the nodes over", "error", err)
		return
	}
	if !slices.ContainsFunc(cl.own.Alive(), func(h string) bool { return strings.EqualFold(h, c.host) }) {
		return
	}
	c.takeoverPass(ctx)
}

// ringChanged runs after a ring rebuild changed the set of live
// conductors: the intents and the interrupted nodes this conductor now
// owns are picked up at once, not at the next poll or orphan check. A
// conductor that joins (a restart under the same hostname among them)
// takes its share of the nodes a dead one left, and a survivor whose
// ring dropped the dead one takes the nodes released before it knew it
// owned them.
func (c *Conductor) ringChanged(ctx context.Context) {
	c.pollIntents(ctx)
	c.takeoverPass(ctx)
}

// takeoverPass lists the interrupted nodes this conductor owns and hands
// each to the worker pool (takeOverInterrupted, without waiting). One
// pass runs at a time; a pass asked for while one runs makes that one
// run again, so a release it listed too early for is not missed.
func (c *Conductor) takeoverPass(ctx context.Context) {
	cl := c.cluster
	cl.takeoverAgain.Store(true)
	for cl.takeoverAgain.Load() {
		if !cl.takeoverBusy.CompareAndSwap(false, true) {
			return // the running pass sees takeoverAgain
		}
		cl.takeoverAgain.Store(false)
		c.takeOverInterrupted(ctx, false)
		cl.takeoverBusy.Store(false)
	}
}

// announceMembership tells the other conductors to rebuild their rings.
func (c *Conductor) announceMembership(ctx context.Context) {
	cl := c.cluster
	if cl == nil || cl.opts.Notifier == nil {
		return
	}
	if err := cl.opts.Notifier.Publish(ctx, baremetal.TopicMembership, c.host); err != nil {
		c.log.Warn("membership notification not sent", "error", err)
	}
}

// ownsNode reports whether this conductor acts on n: always for a lone
// conductor, per the hash ring otherwise. A draining conductor owns
// nothing new.
func (c *Conductor) ownsNode(n *baremetal.Node) bool {
	cl := c.cluster
	if cl == nil {
		return true
	}
	if cl.draining.Load() {
		return false
	}
	return cl.own.Owns(n)
}

// servesNode reports whether this conductor continues n for its agent
// when the agent's heartbeat reaches it: always for a lone conductor; in
// a cluster when it is not draining and serves n's conductor group and
// hardware type, whichever conductor its rings make n's owner. Ironic's
// conductor processes any heartbeat its API hands it, under the node's
// lock: the API's rings chose it. While a membership change (a death, a
// restart, a database cut) reaches the API and the conductors at
// different moments, their rings disagree; a conductor that dropped the
// heartbeats its rings gave to another left the node's agent unheard,
// and the owner failed the node at its callback timeout.
func (c *Conductor) servesNode(n *baremetal.Node) bool {
	cl := c.cluster
	if cl == nil {
		return true
	}
	if cl.draining.Load() {
		return false
	}
	return sameGroup(n.ConductorGroup, c.opts.ConductorGroup) && cl.hardwareTypes[n.Driver]
}

// ownedOnly keeps the nodes this conductor owns, reusing nodes' array.
func (c *Conductor) ownedOnly(nodes []*baremetal.Node) []*baremetal.Node {
	if c.cluster == nil {
		return nodes
	}
	out := nodes[:0]
	for _, n := range nodes {
		if c.ownsNode(n) {
			out = append(out, n)
		}
	}
	clear(nodes[len(out):])
	return out
}

// handOff gives an accepted intent to its owner: the reservation this
// conductor took to accept the verb is released and the owner is told.
func (c *Conductor) handOff(n *baremetal.Node) {
	c.releaseQuietly(n.UUID)
	if cl := c.cluster; cl != nil && cl.opts.Notifier != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := cl.opts.Notifier.Publish(ctx, baremetal.TopicIntent, n.UUID); err != nil {
			c.log.Warn("hand-off notification not sent; the owner will find the intent at its next poll", "node", n.UUID, "error", err)
		}
	}
}

// checkServed refuses a verb on a node that no live conductor serves,
// with a *NoConductorError, a log line and the unserved-nodes metric: the
// intent would otherwise sit in the database with nobody to run it.
func (c *Conductor) checkServed(n *baremetal.Node) error {
	cl := c.cluster
	if cl == nil {
		return nil
	}
	if _, err := cl.own.OwnerOf(n); err != nil {
		var nc *NoConductorError
		if errors.As(err, &nc) {
			c.log.Warn("verb refused: no live conductor serves the node", "node", n.UUID, "group", nc.Group, "hardware_type", nc.HardwareType)
		}
		return err
	}
	return nil
}

// draining reports whether Drain was called.
func (c *Conductor) draining() bool {
	return c.cluster != nil && c.cluster.draining.Load()
}

// Ownership returns the conductor's ring view, or nil for a lone
// conductor (Options.Cluster nil).
func (c *Conductor) Ownership() *Ownership {
	if c.cluster == nil {
		return nil
	}
	return c.cluster.own
}

// NodeOwner returns the hostname of the conductor that owns node ident,
// for routing what must reach the owner (an agent heartbeat received by
// another conductor's handler). A lone conductor owns every node. A node
// no live conductor serves gives a *NoConductorError.
func (c *Conductor) NodeOwner(ctx context.Context, ident string) (string, error) {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return "", err
	}
	return c.OwnerOfNode(n)
}

// OwnerOfNode is NodeOwner for a node the caller has already read: the
// ring decides from the node's conductor group and hardware type, so no
// store read is needed (an API listing a thousand nodes asks it once per
// node).
func (c *Conductor) OwnerOfNode(n *baremetal.Node) (string, error) {
	if c.cluster == nil {
		return c.host, nil
	}
	return c.cluster.own.OwnerOf(n)
}

// Drain is the graceful way out of a fleet (Ironic's SIGUSR2 drain): the
// conductor leaves the rings at once (its row goes offline, the others
// are told) but keeps its keepalive running so nobody takes its nodes as
// orphans, lets the operations it is running finish, and then stops as
// Stop does. Nothing is failed; nodes waiting for an agent continue on
// their new owner. ctx bounds the wait; when it ends the conductor stops
// anyway, and work still running is left for the next owner's takeover.
func (c *Conductor) Drain(ctx context.Context) error {
	if err := c.checkRunning(); err != nil {
		return err
	}
	if cl := c.cluster; cl != nil {
		cl.draining.Store(true)
	}
	if err := c.store.DrainConductor(ctx, c.host); err != nil {
		return fmt.Errorf("conductor %s drain: %w", c.host, err)
	}
	c.announceMembership(ctx)
	c.log.Info("conductor draining")
	for c.busy.Load() > 0 {
		select {
		case <-ctx.Done():
			return c.Stop(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return c.Stop(ctx)
}
