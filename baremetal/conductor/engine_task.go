package conductor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/jsonmap"
	"github.com/anvilmetal/anvil/statemachine"
)

// intentKey is the driver_internal_info key holding an accepted verb's
// intent until a worker starts executing it.
const intentKey = "anvil_intent"

// intent is the work a verb asked for, persisted on the node row.
type intent struct {
	Op          string         `json:"op"`
	RequestedAt time.Time      `json:"requested_at"`
	Args        map[string]any `json:"args,omitempty"`
}

func (in intent) encode() map[string]any {
	m := map[string]any{"op": in.Op, "requested_at": in.RequestedAt.UTC().Format(time.RFC3339Nano)}
	if in.Args != nil {
		m["args"] = in.Args
	}
	return m
}

func readIntent(n *baremetal.Node) (intent, bool) {
	raw, ok := n.DriverInternalInfo[intentKey].(map[string]any)
	if !ok {
		return intent{}, false
	}
	op, _ := raw["op"].(string)
	if op == "" {
		return intent{}, false
	}
	in := intent{Op: op}
	if s, ok := raw["requested_at"].(string); ok {
		in.RequestedAt, _ = time.Parse(time.RFC3339Nano, s)
	}
	in.Args, _ = raw["args"].(map[string]any)
	return in, true
}

// task is a node held under this conductor's exclusive reservation. Every
// write is a compare-and-swap on the node's version together with the
// reservation, so a conductor that lost the node cannot overwrite the new
// owner's work.
type task struct {
	c     *Conductor
	node  *baremetal.Node
	drv   *driver.Driver
	ports []*baremetal.Port
	// portsLoaded says ports were read from the store.
	portsLoaded bool
	// noPorts leaves ports out of the driver's view, for the power sync,
	// whose power reads need none (Ironic loads ports lazily).
	noPorts bool
	// released is set by the first release: a task releases its
	// reservation once, however many paths (an early release and a
	// deferred one) call release.
	released atomic.Bool
}

func (c *Conductor) newTask(n *baremetal.Node) *task { return &task{c: c, node: n} }

// acquire reserves node ident for an operation, retrying a locked node per
// the lock policy.
func (c *Conductor) acquire(ctx context.Context, ident string) (*task, error) {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return nil, err
	}
	locked, err := baremetal.AcquireNode(ctx, c.locks(), n.UUID, c.host, *c.opts.LockPolicy)
	if err != nil {
		return nil, err
	}
	return c.newTask(locked), nil
}

// release gives the node's reservation back, once: a second call does
// nothing. Releasing again would release, or take the reservation
// book's count of, whatever else of this conductor reserved the node
// since (the store knows only the conductor's name).
func (t *task) release() {
	if t.released.Swap(true) {
		return
	}
	t.c.releaseQuietly(t.node.UUID)
}

func (t *task) uuid() string { return t.node.UUID }

// save writes the node as a fenced compare-and-swap. A write the
// database could not take is retried until it answers (see
// retryUnavailable).
func (t *task) save(ctx context.Context) error {
	err := t.c.retryUnavailable(ctx, t, func() error { return t.c.store.UpdateNode(ctx, t.node, t.c.host) })
	if err != nil {
		return fmt.Errorf("node %s: save: %w", t.node.UUID, err)
	}
	return nil
}

// storeRetryKey marks the contexts of the conductor's own work (jobs and
// periodic tasks), whose state writes wait for the database; a verb's
// write, made for a caller waiting on it, fails at once.
type storeRetryKey struct{}

// withStoreRetry marks ctx as the conductor's own work.
func withStoreRetry(ctx context.Context) context.Context {
	return context.WithValue(ctx, storeRetryKey{}, true)
}

// retryUnavailable runs write, a compare-and-swap of t.node, and, in the
// conductor's own work (withStoreRetry), runs it
// again with a growing pause (up to storeRetryMax) while it fails because
// the database is unavailable, until ctx ends or the conductor stops:
// the node stays held meanwhile, and its state is written as soon as the
// database is back, instead of being lost with the node left in an
// "-ing" state nobody works on. A write whose outcome was lost (its
// commit landed, its answer did not) then meets a version conflict: the
// node is read again, and when the stored row is the one the write meant
// to leave (same version and state as ours would have) the write counts
// as done.
func (c *Conductor) retryUnavailable(ctx context.Context, t *task, write func() error) error {
	if ctx.Value(storeRetryKey{}) == nil {
		// A verb's caller (an API request) is answered at once instead.
		return write()
	}
	pause := c.storeRetryPause
	lost := false
	for attempt := 1; ; attempt++ {
		version := t.node.Version
		err := write()
		if err == nil || !baremetal.IsStoreUnavailable(err) {
			if err != nil && lost && errors.Is(err, baremetal.ErrConflict) && c.landed(ctx, t.node, version) {
				return nil
			}
			if attempt > 1 && err == nil {
				c.log.Info("state written after the database came back", "node", t.node.UUID, "attempts", attempt)
			}
			return err
		}
		lost = true
		c.resv.unavailable()
		if attempt == 1 {
			c.log.Warn("state write failed; retrying until the database answers", "node", t.node.UUID, "error", err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-c.stopCh:
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, storeRetryMax)
	}
}

// retryStoreCall runs call, an action safe to run again (a tear-down of
// a ramdisk boot, say), and, in the conductor's own work
// (withStoreRetry), runs it again with a growing pause (up to
// storeRetryMax) while it fails because the database is unavailable,
// until ctx ends or the conductor stops. The node stays held meanwhile,
// so an outage delays the action instead of failing the node.
func (c *Conductor) retryStoreCall(ctx context.Context, t *task, what string, call func() error) error {
	err := call()
	if err == nil || ctx.Value(storeRetryKey{}) == nil || !baremetal.IsStoreUnavailable(err) {
		return err
	}
	c.log.Warn(what+" failed: the database is unavailable; retrying until it answers", "node", t.node.UUID, "error", err)
	pause := c.storeRetryPause
	for attempt := 2; ; attempt++ {
		c.resv.unavailable()
		select {
		case <-ctx.Done():
			return err
		case <-c.stopCh:
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, storeRetryMax)
		if err = call(); err == nil || !baremetal.IsStoreUnavailable(err) {
			if err == nil {
				c.log.Info(what+" succeeded after the database came back", "node", t.node.UUID, "attempts", attempt)
			}
			return err
		}
	}
}

// landed reports whether the stored node shows that a write of n made
// from version landed although its answer was lost: the stored version
// is the next one, with n's provision state and target, and n is brought
// up to date with it.
func (c *Conductor) landed(ctx context.Context, n *baremetal.Node, version int64) bool {
	cur, err := c.store.GetNode(ctx, n.UUID)
	if err != nil || cur.Version != version+1 || cur.ProvisionState != n.ProvisionState ||
		cur.TargetProvisionState != n.TargetProvisionState || cur.Reservation != c.host {
		return false
	}
	n.Version, n.UpdatedAt, n.ProvisionUpdatedAt = cur.Version, cur.UpdatedAt, cur.ProvisionUpdatedAt
	return true
}

// saveRecording is save that also appends h to the node's history, in
// the same transaction when the store offers baremetal.RecordingNodeStore.
func (t *task) saveRecording(ctx context.Context, h *baremetal.HistoryEntry) error {
	rs, ok := t.c.store.(baremetal.RecordingNodeStore)
	if !ok {
		if err := t.save(ctx); err != nil {
			return err
		}
		t.c.addHistory(ctx, h)
		return nil
	}
	if err := t.c.retryUnavailable(ctx, t, func() error { return rs.UpdateNodeRecording(ctx, t.node, t.c.host, h) }); err != nil {
		return fmt.Errorf("node %s: save: %w", t.node.UUID, err)
	}
	return nil
}

// driver resolves the node's composed driver.
func (t *task) driver() (*driver.Driver, error) {
	if t.drv != nil {
		return t.drv, nil
	}
	d, err := t.c.drivers.Resolve(nodeInterfaces(t.node))
	if err != nil {
		return nil, err
	}
	t.drv = d
	return d, nil
}

func nodeInterfaces(n *baremetal.Node) driver.NodeInterfaces {
	return driver.NodeInterfaces{
		Node:         n.UUID,
		HardwareType: n.Driver,
		Interfaces: map[driver.Kind]string{
			driver.KindBIOS: n.BIOSInterface, driver.KindBoot: n.BootInterface,
			driver.KindConsole: n.ConsoleInterface, driver.KindDeploy: n.DeployInterface,
			driver.KindFirmware: n.FirmwareInterface, driver.KindInspect: n.InspectInterface,
			driver.KindManagement: n.ManagementInterface, driver.KindNetwork: n.NetworkInterface,
			driver.KindPower: n.PowerInterface, driver.KindRAID: n.RAIDInterface,
			driver.KindRescue: n.RescueInterface, driver.KindStorage: n.StorageInterface,
			driver.KindVendor: n.VendorInterface,
		},
		InstanceInfo: n.InstanceInfo,
	}
}

func (t *task) loadPorts(ctx context.Context) ([]*baremetal.Port, error) {
	if t.portsLoaded {
		return t.ports, nil
	}
	ps, err := t.c.store.ListPorts(ctx, t.node.UUID)
	if err != nil {
		return nil, err
	}
	t.ports, t.portsLoaded = ps, true
	return ps, nil
}

// view builds the driver's view of the node, bound to the node's
// composed driver (Ironic's task.driver), through which an interface
// reaches the node's others: a boot interface sets the boot device.
func (t *task) view(ctx context.Context) (*driver.Task, error) {
	d, err := t.driver()
	if err != nil {
		return nil, err
	}
	var ps []*baremetal.Port
	if !t.noPorts {
		// Nothing has run yet: in the conductor's own work a read that
		// meets a database outage waits for the database (holding the
		// node) rather than failing whatever the driver call was for (a
		// deploy step run after a heartbeat, say).
		err = t.c.retryStoreCall(ctx, t, "reading the node's ports", func() error {
			var err error
			ps, err = t.loadPorts(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	n := t.node
	v := &driver.Task{
		NodeUUID: n.UUID, NodeName: n.Name, HardwareType: n.Driver,
		Interfaces: d.Names, ProvisionState: n.ProvisionState,
		PowerState:         n.PowerState,
		DriverInfo:         jsonmap.Clone(n.DriverInfo),
		DriverInternalInfo: jsonmap.Clone(n.DriverInternalInfo),
		InstanceInfo:       jsonmap.Clone(n.InstanceInfo),
		Properties:         jsonmap.Clone(n.Properties),
		TargetRAIDConfig:   jsonmap.Clone(n.TargetRAIDConfig),
	}
	for _, p := range ps {
		v.Ports = append(v.Ports, driver.Port{UUID: p.UUID, Address: p.Address, PXEEnabled: p.PXEEnabled,
			PhysicalNetwork: p.PhysicalNetwork, LocalLinkConnection: jsonmap.Clone(p.LocalLinkConnection), Extra: jsonmap.Clone(p.Extra)})
	}
	v.BindDriver(d)
	return v, nil
}

// absorb copies what a driver changed on v into the node (unsaved) and
// creates or updates the ports it added or changed.
func (t *task) absorb(ctx context.Context, v *driver.Task) error {
	ch := v.Changes()
	if ch.DriverInfo != nil {
		t.node.DriverInfo = ch.DriverInfo
	}
	if ch.DriverInternalInfo != nil {
		t.node.DriverInternalInfo = ch.DriverInternalInfo
	}
	if ch.InstanceInfo != nil {
		t.node.InstanceInfo = ch.InstanceInfo
	}
	if ch.Properties != nil {
		t.node.Properties = ch.Properties
	}
	if !ch.PortsChanged {
		return nil
	}
	existing := map[string]*baremetal.Port{}
	for _, p := range t.ports {
		existing[p.UUID] = p
	}
	for _, dp := range ch.Ports {
		if dp.UUID == "" {
			p := &baremetal.Port{NodeUUID: t.node.UUID, Address: dp.Address, PXEEnabled: dp.PXEEnabled, PhysicalNetwork: dp.PhysicalNetwork,
				LocalLinkConnection: dp.LocalLinkConnection, Extra: dp.Extra}
			if err := t.c.store.CreatePort(ctx, p); err != nil {
				if errors.Is(err, baremetal.ErrDuplicate) {
					continue
				}
				return fmt.Errorf("node %s: create port %s: %w", t.node.UUID, dp.Address, err)
			}
			t.ports = append(t.ports, p)
			continue
		}
		p, ok := existing[dp.UUID]
		if !ok {
			continue
		}
		p.PXEEnabled, p.PhysicalNetwork = dp.PXEEnabled, dp.PhysicalNetwork
		p.LocalLinkConnection, p.Extra = dp.LocalLinkConnection, dp.Extra
		if err := t.c.store.UpdatePort(ctx, p); err != nil {
			return fmt.Errorf("node %s: update port %s: %w", t.node.UUID, p.Address, err)
		}
	}
	return nil
}

// call runs fn against a fresh driver view and absorbs its changes, also
// when fn fails (a driver may record partial progress).
func (t *task) call(ctx context.Context, fn func(*driver.Driver, *driver.Task) error) error {
	d, err := t.driver()
	if err != nil {
		return err
	}
	v, err := t.view(ctx)
	if err != nil {
		return err
	}
	callErr := driverFailure(fn(d, v))
	if err := t.absorb(ctx, v); err != nil {
		if baremetal.IsStoreUnavailable(err) {
			// Said outright, so that joined with the driver's error it
			// still reads as the database's absence.
			err = &baremetal.StoreUnavailableError{Op: "recording the ports of node " + t.node.UUID, Err: err}
		}
		return errors.Join(callErr, err)
	}
	return callErr
}

// driverCallError is what a driver call returned. Its network failures
// (a BMC, an agent out of reach) are not the database's:
// baremetal.IsStoreUnavailable reads it as available, so a step that
// failed to reach its agent is not retried as a database outage, nor
// reported as one ("The database was unavailable"), unless the error is
// a *baremetal.StoreUnavailableError.
type driverCallError struct{ err error }

func driverFailure(err error) error {
	if err == nil {
		return nil
	}
	return &driverCallError{err}
}

func (e *driverCallError) Error() string     { return e.err.Error() }
func (e *driverCallError) Unwrap() error     { return e.err }
func (e *driverCallError) Unavailable() bool { return false }

// callIface runs fn, as call does, with the node's implementation of kind
// as the Go interface T. A node whose driver lacks that interface gets an
// *driver.UnsupportedError naming the node, the kind and op (so callers
// branch on driver.ErrUnsupported), and fn does not run.
func callIface[T any](ctx context.Context, t *task, kind driver.Kind, op string, fn func(*driver.Driver, T, *driver.Task) error) error {
	return t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		x, ok := d.Interface(kind).(T)
		if !ok {
			return &driver.UnsupportedError{Node: t.uuid(), Kind: kind, Impl: d.Names[kind], Operation: op}
		}
		return fn(d, x, v)
	})
}

// moveOpts tune a transition like Ironic's process_event arguments.
type moveOpts struct {
	// target is the explicit target state (manual clean: manageable).
	target statemachine.State
	// work says work follows the transition (a callback in Ironic), so
	// last_error is reset to lastError and a stable state keeps its
	// target.
	work bool
	// lastError is recorded as last_error (set when non-empty, and always
	// when work follows).
	lastError string
	// keepTarget keeps the current target (manual clean and timeouts).
	keepTarget bool
}

// process fires ev on the node, persists the new states and publishes
// the transition.
func (t *task) process(ctx context.Context, ev statemachine.Event, o moveOpts) error {
	n := t.node
	from := n.ProvisionState
	explicit := o.target
	if o.keepTarget && explicit == "" && n.TargetProvisionState != "" &&
		t.c.fsm.IsStable(n.TargetProvisionState) {
		explicit = n.TargetProvisionState
	}
	cur := n.TargetProvisionState
	if cur != "" && !t.c.fsm.IsStable(cur) {
		cur = ""
	}
	next, target, err := t.c.fsm.Apply(statemachine.Move{
		State: from, Target: cur, Event: ev,
		ExplicitTarget: explicit, WorkFollows: o.work,
	})
	if err != nil {
		return fmt.Errorf("node %s: %w", n.UUID, err)
	}
	n.ProvisionState, n.TargetProvisionState = next, target
	if o.work || o.lastError != "" {
		n.LastError = o.lastError
	}
	dropOperationKeys(n)
	h := t.c.transitionHistory(n, from, ev, o.lastError)
	if rs, ok := t.c.store.(baremetal.RecordingNodeStore); ok {
		// The state change and its history line commit together.
		if err := t.c.retryUnavailable(ctx, t, func() error { return rs.UpdateNodeRecording(ctx, n, t.c.host, h) }); err != nil {
			return fmt.Errorf("node %s: save: %w", n.UUID, err)
		}
		h = nil
	} else if err := t.save(ctx); err != nil {
		return err
	}
	t.c.transitioned(ctx, n, from, ev, o.lastError, h)
	return nil
}

// transitionHistory is the history entry recording a transition of n
// from from by ev.
func (c *Conductor) transitionHistory(n *baremetal.Node, from statemachine.State, ev statemachine.Event, errText string) *baremetal.HistoryEntry {
	sev := baremetal.HistoryInfo
	msg := fmt.Sprintf("%s -> %s (event %s, target %s)", from, n.ProvisionState, ev, orNone(string(n.TargetProvisionState)))
	if errText != "" {
		sev = baremetal.HistoryError
		msg += ": " + errText
	}
	// The store masks secrets in history messages itself.
	return &baremetal.HistoryEntry{NodeUUID: n.UUID, Event: truncEvent("provision state " + string(n.ProvisionState)), EventType: "provisioning",
		Message: msg, Severity: sev, Conductor: c.host}
}

// transitioned records a committed transition: the history entry h when
// it was not written with the change (nil when it was), watchers,
// metrics.
func (c *Conductor) transitioned(ctx context.Context, n *baremetal.Node, from statemachine.State, ev statemachine.Event, errText string, h *baremetal.HistoryEntry) {
	c.metrics.transitions.WithLabelValues(string(from), string(n.ProvisionState), string(ev)).Inc()
	e := Event{Time: c.clock.Now(), Type: EventTransition, NodeUUID: n.UUID, NodeName: n.Name,
		From: from, To: n.ProvisionState, Target: n.TargetProvisionState, Trigger: ev, Error: errText, Conductor: c.host}
	if h != nil {
		c.addHistory(ctx, h)
	}
	c.hub.publish(e)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (c *Conductor) history(ctx context.Context, uuid, event, eventType, msg, severity string) {
	// The store masks secrets in history messages itself.
	c.addHistory(ctx, &baremetal.HistoryEntry{NodeUUID: uuid, Event: truncEvent(event), EventType: eventType, Message: msg, Severity: severity, Conductor: c.host})
}

// addHistory appends h to its node's history, logging a failure.
func (c *Conductor) addHistory(ctx context.Context, h *baremetal.HistoryEntry) {
	if err := c.store.AddHistory(context.WithoutCancel(ctx), h); err != nil {
		c.log.Warn("node history not recorded", "node", h.NodeUUID, "error", err)
	}
}

// truncEvent caps a history event at the store's 255 bytes.
func truncEvent(event string) string {
	if len(event) > 255 {
		return event[:255]
	}
	return event
}

func (c *Conductor) publish(e Event) {
	if e.Time.IsZero() {
		e.Time = c.clock.Now()
	}
	e.Conductor = c.host
	c.hub.publish(e)
}

// runJob executes one job on a worker.
func (c *Conductor) runJob(ctx context.Context, j job) {
	ctx = withStoreRetry(ctx)
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("job panicked", "node", j.uuid, "panic", r)
			if j.node != nil {
				c.releaseQuietly(j.uuid)
			}
		}
	}()
	if j.kind == jobHeartbeat {
		c.processHeartbeat(ctx, j.uuid)
		return
	}
	if j.kind == jobCommandDone {
		c.processCommandDone(ctx, j.uuid, j.watched)
		return
	}
	if j.kind == jobTakeover {
		if j.done != nil {
			defer j.done()
		}
		c.takeOverNode(ctx, j.uuid)
		return
	}
	if j.run != nil {
		// The release below also runs when run panics.
		defer c.releaseQuietly(j.uuid)
		j.run(ctx)
		return
	}
	n := j.node
	if n == nil {
		var err error
		n, err = c.reserve(ctx, j.uuid)
		if err != nil {
			if errors.Is(err, baremetal.ErrNodeLocked) {
				c.retryLater(j)
			} else if !errors.Is(err, baremetal.ErrNotFound) {
				c.log.Warn("cannot reserve node for accepted work", "node", j.uuid, "error", err)
				c.retryLater(j)
			}
			return
		}
	}
	if !c.ownsNode(n) {
		c.handOff(n)
		return
	}
	t := c.newTask(n)
	if n == j.node && j.portsLoaded {
		t.ports, t.portsLoaded = j.ports, true
	}
	defer t.release()
	in, ok := readIntent(n)
	if !ok {
		return
	}
	ctx, span := c.startNodeSpan(ctx, n, "job "+in.Op)
	defer span.End()
	c.execute(ctx, t, in)
}

// retryLater queues j again after a short real-time delay (on the
// conductor's laterSet, which Stop ends): the node was locked (by a
// heartbeat being processed, or another conductor), and the intent is
// still in the database.
func (c *Conductor) retryLater(j job) {
	c.later.after(200*time.Millisecond, func() {
		c.queue.push(job{uuid: j.uuid, kind: j.kind, watched: j.watched})
	})
}

// consumeIntent removes the intent from the node; the caller saves it
// with its first write, so a crash before that write leaves the intent
// for the next owner and a crash after it leaves a node Ironic would fail.
func (t *task) consumeIntent() {
	delete(t.node.DriverInternalInfo, intentKey)
}

// fail is the generic error handler: it records lastError and fires
// "fail" (when the state allows it), keeping the target for manual
// cleaning.
func (t *task) fail(ctx context.Context, msg string, keepTarget bool) {
	t.consumeIntent()
	if !t.c.fsm.Allows(t.node.ProvisionState, statemachine.EventFail) {
		t.node.LastError = msg
		if err := t.save(ctx); err != nil {
			t.c.log.Warn("cannot record failure", "node", t.uuid(), "error", err)
		}
		return
	}
	if err := t.process(ctx, statemachine.EventFail, moveOpts{lastError: msg, keepTarget: keepTarget}); err != nil {
		t.c.log.Warn("cannot record failure", "node", t.uuid(), "error", err, "failure", msg)
	}
}

// describeErr renders an error for last_error without secrets. An error
// of a database out of reach says only that: its text names the
// database's user, name, host and port, which API clients never see
// (the log has it).
func describeErr(err error) string {
	if err == nil {
		return ""
	}
	if baremetal.IsStoreUnavailable(err) {
		return storeUnavailableText
	}
	return baremetal.MaskText(strings.TrimSpace(err.Error()))
}

// storeUnavailableText is last_error's account of an operation the
// database's absence interrupted.
const storeUnavailableText = "The database was unavailable; see the conductor's log for the details."
