package conductor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/hashring"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultHashRingResetInterval is Ironic's [DEFAULT]hash_ring_reset_interval:
// how often a conductor rebuilds its rings even when nobody told it that
// the membership changed.
const DefaultHashRingResetInterval = 15 * time.Second

// DefaultHeartbeatTimeout is Ironic's [conductor]heartbeat_timeout: a
// conductor whose keepalive is older than this is not alive.
const DefaultHeartbeatTimeout = 60 * time.Second

// ErrNoConductor is matched (errors.Is) by a *NoConductorError: no live
// conductor serves the node's conductor group and hardware type.
var ErrNoConductor = errors.New("conductor: no live conductor for the node")

// NoConductorError says that no live conductor of the node's conductor
// group enables the node's hardware type, so nothing would execute a verb
// on it (Ironic's NoValidHost). It matches ErrNoConductor.
type NoConductorError struct {
	// Node is the node's UUID.
	Node string
	// Group is the node's conductor group ("" is the default group).
	Group string
	// HardwareType is the node's hardware type.
	HardwareType string
	// Alive lists the live conductors seen when the rings were built, so
	// the reader knows whether the fleet is empty or merely serves other
	// groups or hardware types.
	Alive []string
}

func (e *NoConductorError) Error() string {
	return fmt.Sprintf("node %s: no live conductor of group %q enables hardware type %q (live conductors: %v)",
		e.Node, e.Group, e.HardwareType, e.Alive)
}

// Is reports whether target is ErrNoConductor.
func (e *NoConductorError) Is(target error) bool { return target == ErrNoConductor }

// RingOptions configure how an Ownership builds its rings.
type RingOptions struct {
	// Ring selects the algorithm: hashring.Balanced (Anvil's default, the
	// zero value) or hashring.IronicCompatible, to agree with Ironic
	// conductors sharing the database on every node's owner.
	Ring hashring.Config
	// ResetInterval is how often the rings are rebuilt from the database;
	// 0 means DefaultHashRingResetInterval, negative disables the timer
	// (rebuilds then happen only on membership notifications and Refresh).
	ResetInterval time.Duration
	// HeartbeatTimeout is how recent a conductor's keepalive must be for it
	// to join the rings; 0 means DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration
}

func (o RingOptions) withDefaults() RingOptions {
	if o.ResetInterval == 0 {
		o.ResetInterval = DefaultHashRingResetInterval
	}
	if o.HeartbeatTimeout <= 0 {
		o.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	return o
}

// Ownership decides which conductor owns a node: the one the hash ring of
// the node's "<conductor group>:<hardware type>" picks among the live
// conductors of that group that enable that hardware type (reference
// §4.3). It builds its rings from the conductors table and the
// hardware-interface rows, publishes them atomically (readers never
// block), and rebuilds them on a timer and whenever told that the
// membership changed. Two conductors may briefly disagree while their
// rings differ; the node reservation and the versioned writes make that
// safe.
//
// Ownership is safe for concurrent use. A Conductor with
// Options.Cluster set builds and runs its own; tools (an API server that
// wants to show a node's conductor, an agent router) build one with
// NewOwnership and call Refresh or Run.
type Ownership struct {
	store baremetal.ConductorStore
	self  string
	group string
	opts  RingOptions
	clock clock.Clock
	log   *slog.Logger

	rings  hashring.Holder[hashring.GroupRings]
	mu     sync.Mutex // serialises rebuilds
	alive  []string
	stamp  time.Time
	wakeCh chan struct{}

	rebuilds prometheus.Counter
	members  prometheus.Gauge
	unserved *prometheus.CounterVec
	moves    prometheus.Counter
}

// NewOwnership returns the ownership view of conductor self, a member of
// conductor group group (self may be empty for an observer that owns
// nothing). The rings are empty until the first Refresh.
func NewOwnership(store baremetal.ConductorStore, self, group string, o RingOptions, clk clock.Clock, log *slog.Logger) (*Ownership, error) {
	if store == nil {
		return nil, &baremetal.InvalidFieldError{Kind: "ownership", Field: "store", Expected: "a ConductorStore"}
	}
	if _, err := hashring.NewGroupRings(o.Ring, nil); err != nil {
		return nil, fmt.Errorf("ownership: %w", err)
	}
	if clk == nil {
		clk = clock.System()
	}
	if log == nil {
		log = slog.Default()
	}
	labels := prometheus.Labels{"conductor": self}
	return &Ownership{
		store: store, self: self, group: group, opts: o.withDefaults(), clock: clk,
		log:    log.With("component", "ownership"),
		wakeCh: make(chan struct{}, 1),
		rebuilds: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "anvil", Subsystem: "ring", Name: "rebuilds_total",
			Help: "Hash ring rebuilds from the conductors table.", ConstLabels: labels}),
		members: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "anvil", Subsystem: "ring", Name: "live_conductors",
			Help: "Live conductors seen at the last ring rebuild.", ConstLabels: labels}),
		unserved: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "anvil", Subsystem: "ring", Name: "unserved_nodes_total",
			Help: "Nodes found whose conductor group and hardware type no live conductor serves, by group and hardware type.", ConstLabels: labels},
			[]string{"group", "hardware_type"}),
		moves: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "anvil", Subsystem: "ring", Name: "membership_changes_total",
			Help: "Ring rebuilds that changed the set of live conductors.", ConstLabels: labels}),
	}, nil
}

// Describe implements prometheus.Collector.
func (o *Ownership) Describe(ch chan<- *prometheus.Desc) {
	o.rebuilds.Describe(ch)
	o.members.Describe(ch)
	o.unserved.Describe(ch)
	o.moves.Describe(ch)
}

// Collect implements prometheus.Collector.
func (o *Ownership) Collect(ch chan<- prometheus.Metric) {
	o.rebuilds.Collect(ch)
	o.members.Collect(ch)
	o.unserved.Collect(ch)
	o.moves.Collect(ch)
}

// Refresh rebuilds the rings from the live conductors and their
// hardware-interface rows, and publishes them. It reports whether the set
// of live conductors changed.
func (o *Ownership) Refresh(ctx context.Context) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	recs, err := o.store.ListAliveConductors(ctx, o.opts.HeartbeatTimeout)
	if err != nil {
		return false, fmt.Errorf("ownership: listing live conductors: %w", err)
	}
	members := make([]hashring.Conductor, 0, len(recs))
	alive := make([]string, 0, len(recs))
	for _, r := range recs {
		hws, err := o.store.ListHardwareInterfaces(ctx, r.Hostname)
		if err != nil {
			if errors.Is(err, baremetal.ErrNotFound) {
				continue // unregistered between the two reads
			}
			return false, fmt.Errorf("ownership: hardware interfaces of %s: %w", r.Hostname, err)
		}
		types := hardwareTypesOf(hws)
		if len(types) == 0 {
			// An older row without interface rows: fall back on the
			// drivers column, as Ironic's pre-interface rings did.
			types = slices.Clone(r.Drivers)
		}
		members = append(members, hashring.Conductor{Name: r.Hostname, Group: r.ConductorGroup, HardwareTypes: types})
		alive = append(alive, r.Hostname)
	}
	g, err := hashring.NewGroupRings(o.opts.Ring, members)
	if err != nil {
		return false, fmt.Errorf("ownership: building rings: %w", err)
	}
	o.rings.Store(g)
	sort.Strings(alive)
	changed := !slices.Equal(alive, o.alive)
	if changed && o.alive != nil {
		o.moves.Inc()
		o.log.Info("conductor membership changed", "before", o.alive, "after", alive)
	}
	o.alive = alive
	o.stamp = o.clock.Now()
	o.rebuilds.Inc()
	o.members.Set(float64(len(alive)))
	return changed, nil
}

func hardwareTypesOf(hws []baremetal.HardwareInterface) []string {
	seen := map[string]bool{}
	var out []string
	for _, h := range hws {
		if !seen[h.HardwareType] {
			seen[h.HardwareType] = true
			out = append(out, h.HardwareType)
		}
	}
	return out
}

// Wake asks Run to rebuild the rings now, as a membership notification
// does. It never blocks.
func (o *Ownership) Wake() {
	select {
	case o.wakeCh <- struct{}{}:
	default:
	}
}

// Run rebuilds the rings every ResetInterval and whenever Wake is called,
// until ctx ends. onChange, when not nil, is called after a rebuild that
// changed the set of live conductors. Errors are logged and retried at
// the next tick.
func (o *Ownership) Run(ctx context.Context, onChange func(context.Context)) {
	for {
		var tick <-chan time.Time
		if o.opts.ResetInterval > 0 {
			tick = o.clock.After(o.opts.ResetInterval)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-o.wakeCh:
		}
		changed, err := o.Refresh(ctx)
		if err != nil {
			if ctx.Err() == nil {
				o.log.Warn("ring rebuild failed", "error", err)
			}
			continue
		}
		if changed && onChange != nil {
			onChange(ctx)
		}
	}
}

// OwnerOf returns the hostname of the conductor that owns n, or a
// *NoConductorError when no live conductor serves n's group and hardware
// type (the error is also counted in the unserved-nodes metric).
func (o *Ownership) OwnerOf(n *baremetal.Node) (string, error) {
	host, err := o.rings.Load().Get(n.ConductorGroup, n.Driver, n.UUID)
	if err != nil {
		o.unserved.WithLabelValues(n.ConductorGroup, n.Driver).Inc()
		o.mu.Lock()
		alive := slices.Clone(o.alive)
		o.mu.Unlock()
		return "", &NoConductorError{Node: n.UUID, Group: n.ConductorGroup, HardwareType: n.Driver, Alive: alive}
	}
	return host, nil
}

// Owns reports whether this conductor owns n: n is in this conductor's
// group and the ring of n's group and hardware type maps n's UUID to this
// conductor.
func (o *Ownership) Owns(n *baremetal.Node) bool {
	if !sameGroup(n.ConductorGroup, o.group) {
		return false
	}
	r, err := o.rings.Load().Ring(n.ConductorGroup, n.Driver)
	if err != nil {
		return false
	}
	host, err := r.Get(n.UUID)
	return err == nil && host == o.self
}

// Alive returns the live conductors seen at the last rebuild, sorted.
func (o *Ownership) Alive() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.alive)
}

// Rings returns the rings currently published.
func (o *Ownership) Rings() *hashring.GroupRings { return o.rings.Load() }

// LastRefresh returns when the rings were last rebuilt (zero before the
// first Refresh).
func (o *Ownership) LastRefresh() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stamp
}

// sameGroup compares conductor groups case-insensitively, as Ironic does.
func sameGroup(a, b string) bool {
	return hashring.GroupKey(a, "") == hashring.GroupKey(b, "")
}

var _ prometheus.Collector = (*Ownership)(nil)
