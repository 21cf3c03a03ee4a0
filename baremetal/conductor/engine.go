package conductor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// ErrConductorNotRunning is returned by verbs called before Launch (or Run)
// or after Stop.
var ErrConductorNotRunning = errors.New("conductor: not running")

// Conductor is the provisioning engine: it accepts verbs by persisting
// their intent on the node row, and executes them in a bounded worker
// pool under the node's exclusive reservation. All node state lives in the
// Store, so another conductor can resume whatever this one leaves behind.
//
// A Conductor is built with New, started with Launch (or Run, alias Start,
// which also blocks and drains when its context ends) and stopped with Stop
// or Drain.
// Its methods are safe for concurrent use.
type Conductor struct {
	// bootTokens holds the token desk of each node this conductor is
	// powering into a ramdisk (node UUID to *tokenDesk), so a lookup
	// during the power action needs no lock (see EnsureAgentToken).
	bootTokens sync.Map
	// unanswered holds, per node, the agent tokens this conductor's
	// lookups wrote without learning whether the write committed (see
	// noteUnanswered).
	unanswered unansweredTokens

	store   baremetal.Store
	drivers *driver.Registry
	// tracer makes the operations' spans (no-op without
	// Options.TracerProvider).
	tracer  trace.Tracer
	agent   AgentSettings
	opts    Options
	host    string
	clock   clock.Clock
	log     *slog.Logger
	fsm     *statemachine.Machine
	metrics *Metrics
	hub     *watchHub

	running atomic.Bool
	mu      sync.Mutex
	state   lifecycle
	record  *baremetal.ConductorRecord
	cancel  context.CancelFunc // ends background loops
	bg      context.Context    // the background loops' context (ended by cancel)
	workCtx context.Context    // passed to jobs; cancelled when Stop gives up waiting
	workEnd context.CancelFunc
	loops   sync.WaitGroup // pickup, dispatcher, periodic loops
	workers sync.WaitGroup
	// releasing counts the background retries of releases the database
	// refused (releaseQuietly); Stop ends and waits for them.
	releasing sync.WaitGroup
	// later owns the timers of short retries (retryLater,
	// retryHeartbeat); Stop ends them.
	later laterSet

	queue   *jobQueue
	handoff chan job // unbuffered: succeeds only when a worker is idle
	stopCh  chan struct{}
	busy    atomic.Int64

	powerMu       sync.Mutex
	powerFailures map[string]int

	// bootStages queues the boot stages ObserveBootStage received, and
	// the agent lookups, for drainBootStages.
	bootStages chan queuedStage

	hbMu      sync.Mutex
	pendingHB map[string]agentclient.Heartbeat

	// watches holds the command wait of each node whose in-band step
	// runs (node UUID to *commandWatch; AgentSettings.PollCommands).
	watches      sync.Map
	pollCommands atomic.Bool // AgentSettings.PollCommands, or SetPollCommands

	plannerOnce sync.Once
	plan        *steps.Planner

	cluster *cluster // nil for a lone conductor

	// resv tracks the reservations this conductor's goroutines hold,
	// for the phantom sweep.
	resv *reservations
	// storeRetryPause is the first pause of the retries of a release or
	// state write the database could not take (doubled up to
	// storeRetryMax).
	storeRetryPause time.Duration
}

type lifecycle int

const (
	lifecycleNew lifecycle = iota
	lifecycleRunning
	lifecycleStopped
)

// New builds a conductor over store with the driver registry drivers. It
// does not touch the store until Launch.
func New(store baremetal.Store, drivers *driver.Registry, opts Options) (*Conductor, error) {
	if store == nil {
		return nil, &baremetal.InvalidFieldError{Kind: "conductor", Field: "store", Expected: "a Store"}
	}
	if drivers == nil {
		return nil, &baremetal.InvalidFieldError{Kind: "conductor", Field: "drivers", Expected: "a driver registry"}
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Conductor{
		store:         store,
		drivers:       drivers,
		agent:         o.Agent,
		opts:          o,
		host:          o.Hostname,
		clock:         o.Clock,
		log:           o.Logger.With("component", "conductor", "conductor", o.Hostname),
		fsm:           statemachine.NewProvisionMachine(),
		metrics:       newMetrics(o.Hostname),
		tracer:        newTracer(o.TracerProvider),
		hub:           newWatchHub(o.WatchBuffer, nil),
		queue:         newJobQueue(),
		handoff:       make(chan job),
		stopCh:        make(chan struct{}),
		powerFailures: make(map[string]int),
		pendingHB:     make(map[string]agentclient.Heartbeat),
		bootStages:    make(chan queuedStage, o.BootStageBuffer),
		resv:          newReservations(),

		storeRetryPause: 100 * time.Millisecond,
	}
	c.pollCommands.Store(o.Agent.PollCommands)
	c.metrics.workers.Set(float64(o.Workers))
	c.hub.onDrop = func(n int) { c.metrics.watchDropped.Add(float64(n)) }
	return c, nil
}

// Hostname returns the conductor's hostname, the value it writes into the
// reservation of the nodes it locks.
func (c *Conductor) Hostname() string { return c.host }

// Store returns the conductor's store, for reading nodes.
func (c *Conductor) Store() baremetal.Store { return c.store }

// Launch registers the conductor, recovers from a previous run of the same
// hostname (clears its reservations and pending power actions, fails the
// nodes it left in an active "-ing" state without a pending intent), picks
// up accepted intents, starts again the enabled consoles of the nodes it
// owns (a console that does not start is disabled, with last_error), and
// starts the worker pool and the periodic tasks.
// The goroutines run until Stop; ctx bounds only the start-up itself, and
// Launch returns as soon as the conductor runs (Run, and Start, are the
// blocking forms).
func (c *Conductor) Launch(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != lifecycleNew {
		return fmt.Errorf("conductor %s: Start called twice or after Stop", c.host)
	}
	if _, err := c.store.ClearTargetPowerStateOf(ctx, c.host,
		fmt.Sprintf("Pending power operation was aborted due to conductor %s restart", c.host)); err != nil {
		return fmt.Errorf("conductor %s start: clear pending power actions: %w", c.host, err)
	}
	if _, err := c.store.ReleaseReservationsOf(ctx, c.host); err != nil {
		return fmt.Errorf("conductor %s start: release stale reservations: %w", c.host, err)
	}
	rec, err := c.store.RegisterConductor(ctx, baremetal.ConductorRegistration{
		Hostname:       c.host,
		ConductorGroup: c.opts.ConductorGroup,
		Drivers:        c.drivers.Enabled().HardwareTypes,
		Interfaces:     c.hardwareInterfaces(),
		UpdateExisting: true,
	})
	if err != nil {
		return fmt.Errorf("conductor %s start: register: %w", c.host, err)
	}
	c.record = rec
	if err := c.startCluster(ctx); err != nil {
		return fmt.Errorf("conductor %s start: %w", c.host, err)
	}

	bg, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.bg = bg
	c.workCtx, c.workEnd = context.WithCancel(context.Background())
	c.state = lifecycleRunning
	c.running.Store(true)

	for i := 0; i < c.opts.Workers; i++ {
		c.workers.Add(1)
		go c.worker()
	}
	c.loops.Add(1)
	go c.dispatch(bg)
	c.loops.Add(1)
	go c.drainBootStages(bg)
	c.startKeepalive(bg)

	if err := c.recoverNodes(ctx); err != nil {
		c.log.Warn("start-up recovery incomplete", "error", err)
	}
	c.restoreConsoles(ctx)
	c.resumeAllocations(ctx)
	c.startPeriodics(bg)
	c.loops.Add(1)
	go c.sweepReservations(bg)
	c.log.Info("conductor started", "workers", c.opts.Workers, "group", c.opts.ConductorGroup)
	return nil
}

func (c *Conductor) hardwareInterfaces() []baremetal.HardwareInterface {
	var out []baremetal.HardwareInterface
	en := c.drivers.Enabled()
	for _, hw := range en.HardwareTypes {
		for _, k := range driver.Kinds() {
			def, _ := c.drivers.DefaultInterface(hw, k)
			for _, name := range en.Interfaces[k] {
				out = append(out, baremetal.HardwareInterface{HardwareType: hw, InterfaceType: string(k), InterfaceName: name, Default: name == def})
			}
		}
	}
	return out
}

// Stop stops accepting work, lets the running operations finish until ctx
// ends (then cancels them: the nodes are left for the next start-up to
// fail or resume), releases the conductor's reservations and unregisters
// it. Intents still queued stay in the database for the next owner. Last,
// it ends every Subscribe and closes every Watch channel, waiting for their
// goroutines to return. Stop leaves the running consoles alone, their
// nodes' console_enabled set for the next start or the new owner: the
// embedder closes its console.Manager after Stop (see "Consoles" in the
// package doc).
func (c *Conductor) Stop(ctx context.Context) error {
	c.mu.Lock()
	if c.state == lifecycleNew {
		// A conductor stopped before it started still owns the Watches
		// and subscriptions made on it; it cannot be started afterwards.
		c.state = lifecycleStopped
		c.mu.Unlock()
		c.hub.close()
		return nil
	}
	if c.state != lifecycleRunning {
		c.mu.Unlock()
		return nil
	}
	c.state = lifecycleStopped
	c.running.Store(false)
	c.cancel()
	close(c.stopCh)
	c.queue.close()
	c.mu.Unlock()
	c.later.stop()

	c.loops.Wait()
	done := make(chan struct{})
	go func() {
		c.workers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		c.workEnd()
		<-done
	}
	c.workEnd()
	c.releasing.Wait()
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var errs []error
	if _, err := c.store.ReleaseReservationsOf(cleanup, c.host); err != nil {
		errs = append(errs, fmt.Errorf("release reservations: %w", err))
	}
	if err := c.store.UnregisterConductor(cleanup, c.host); err != nil {
		errs = append(errs, fmt.Errorf("unregister: %w", err))
	}
	c.announceMembership(cleanup)
	c.hub.close()
	c.log.Info("conductor stopped")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("conductor %s stop: %w", c.host, err)
	}
	return nil
}
