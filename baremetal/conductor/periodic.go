package conductor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
)

// startPeriodics starts the conductor's periodic tasks, each in its own
// goroutine paced by the injected clock; a task never overlaps itself and
// its first run is one interval after start, as in Ironic.
func (c *Conductor) startPeriodics(ctx context.Context) {
	c.every(ctx, c.opts.SyncPowerStateInterval, func(ctx context.Context) { c.syncPowerStates(ctx) })
	c.every(ctx, c.opts.PowerFailureRecoveryInterval, func(ctx context.Context) { c.recoverPowerFailures(ctx) })
	c.every(ctx, c.opts.CheckProvisionStateInterval, func(ctx context.Context) { c.checkTimeouts(ctx) })
	c.every(ctx, c.opts.IntentPollInterval, func(ctx context.Context) { c.pollIntents(ctx) })
	c.startClusterLoops(ctx)
}

// startKeepalive starts the keepalive loop. Launch starts it as soon as
// the conductor is registered, before its start-up recovery: a recovery
// that outlasts the heartbeat timeout (a restarted conductor's
// interrupted nodes on a loaded database) must not make a live
// conductor dead to its peers, which would break the reservations it is
// working under.
func (c *Conductor) startKeepalive(ctx context.Context) {
	c.every(ctx, c.opts.KeepaliveInterval, func(ctx context.Context) {
		if err := c.store.KeepaliveConductor(ctx, c.host, !c.draining()); err != nil {
			c.log.Warn("conductor keepalive failed", "error", err)
		}
	})
}

func (c *Conductor) every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	if interval <= 0 {
		return
	}
	c.loops.Add(1)
	go func() {
		defer c.loops.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.clock.After(interval):
			}
			fn(withStoreRetry(ctx))
		}
	}()
}

// listAll pages through the nodes matching f that this conductor owns.
func (c *Conductor) listAll(ctx context.Context, f baremetal.NodeFilter) ([]*baremetal.Node, error) {
	out, err := c.listGroup(ctx, f)
	if err != nil {
		return out, err
	}
	return c.ownedOnly(out), nil
}

// listGroup pages through the nodes of this conductor's group matching
// f, whoever owns them.
func (c *Conductor) listGroup(ctx context.Context, f baremetal.NodeFilter) ([]*baremetal.Node, error) {
	group := c.opts.ConductorGroup
	f.ConductorGroup = &group
	var out []*baremetal.Node
	page := baremetal.Page{Limit: 1000}
	for {
		batch, err := c.store.ListNodes(ctx, f, page)
		if err != nil {
			return out, err
		}
		out = append(out, batch...)
		if len(batch) < page.Limit {
			return out, nil
		}
		page.Marker = batch[len(batch)-1].UUID
	}
}

// recoverNodes is the start-up pass: unreserved nodes left in an active
// "-ing" state without a pending intent are failed (nothing can resume
// them, reference §5.4); pending intents are queued.
func (c *Conductor) recoverNodes(ctx context.Context) error {
	nodes, err := c.listAll(ctx, baremetal.NodeFilter{Reserved: new(false)})
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if _, ok := readIntent(n); ok {
			c.queue.push(job{uuid: n.UUID})
			continue
		}
		if !statemachine.IsStuckTreatedAsFail(n.ProvisionState) || c.cluster != nil {
			// A cluster's orphan check resumes or fails an interrupted
			// node: nothing to reserve it for here.
			continue
		}
		locked, err := c.reserve(ctx, n.UUID)
		if err != nil {
			continue
		}
		t := c.newTask(locked)
		if _, ok := readIntent(locked); !ok && statemachine.IsStuckTreatedAsFail(locked.ProvisionState) {
			msg := fmt.Sprintf("Conductor %s was restarted while the node was %s; the operation cannot be resumed", c.host, locked.ProvisionState)
			t.fail(ctx, msg, true)
		}
		t.release()
	}
	c.metrics.queuedIntents.Set(float64(c.queue.len()))
	return nil
}

// pollIntents finds accepted intents this process was not told about.
func (c *Conductor) pollIntents(ctx context.Context) {
	nodes, err := c.listAll(ctx, baremetal.NodeFilter{Reserved: new(false)})
	if err != nil {
		c.log.Warn("intent poll failed", "error", err)
		return
	}
	for _, n := range nodes {
		if _, ok := readIntent(n); ok {
			c.queue.push(job{uuid: n.UUID})
		}
	}
	c.metrics.queuedIntents.Set(float64(c.queue.len()))
}

// checkTimeouts runs the callback timeout checks once: nodes waiting in
// wait call-back, clean wait, rescue wait or service wait for longer than
// their timeout since provision_updated_at, and in inspect wait since
// inspection_started_at, are failed, with the network boot's stages in
// last_error when it had some; and, first, nodes in those states whose
// network boot stalled (checkBootStalls). It is a periodic task (tests
// call it through export_test.go).
func (c *Conductor) checkTimeouts(ctx context.Context) {
	now := c.clock.Now()
	checks := []waitCheck{
		{statemachine.DeployWait, c.opts.DeployCallbackTimeout, "Timeout reached while waiting for callback for node %s"},
		{statemachine.CleanWait, c.opts.CleanCallbackTimeout, "Timeout reached while cleaning the node %s. Please check if the ramdisk responsible for the cleaning is running on the node."},
		{statemachine.RescueWait, c.opts.RescueCallbackTimeout, "Timeout reached while waiting for rescue ramdisk callback for node %s"},
		{statemachine.ServiceWait, c.opts.ServiceCallbackTimeout, "Timeout reached while servicing the node %s. Please check if the ramdisk responsible for the servicing is running on the node."},
		{statemachine.InspectWait, c.opts.InspectWaitTimeout, "Timeout reached while inspecting the node %s"},
	}
	// A stalled network boot fails before its callback timeout.
	c.checkBootStalls(ctx, now, checks)
	for _, chk := range checks {
		if chk.timeout <= 0 {
			continue
		}
		f := baremetal.NodeFilter{ProvisionStates: []statemachine.State{chk.state}, Reserved: new(false), Maintenance: new(false)}
		if chk.state != statemachine.InspectWait {
			f.ProvisionUpdatedBefore = now.Add(-chk.timeout)
		}
		nodes, err := c.listAll(ctx, f)
		if err != nil {
			c.log.Warn("timeout check failed", "state", chk.state, "error", err)
			continue
		}
		if chk.state == statemachine.InspectWait {
			var old []*baremetal.Node
			for _, n := range nodes {
				if !n.InspectionStartedAt.IsZero() && n.InspectionStartedAt.Before(now.Add(-chk.timeout)) {
					old = append(old, n)
				}
			}
			nodes = old
		}
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].ProvisionUpdatedAt.Before(nodes[j].ProvisionUpdatedAt) })
		for _, n := range nodes {
			c.timeoutNode(ctx, n.UUID, chk.state, now.Add(-chk.timeout), fmt.Sprintf(chk.msg, n.UUID)+c.bootSummary(ctx, n))
		}
	}
}

// timeoutNode fails node uuid waiting in state for its callback with
// msg, unless a heartbeat of its agent received after heardSince waits
// for a worker of this conductor: the callback came, only its processing
// is late (every worker busy), and failing the node would blame the
// agent for the conductor's backlog. Processing the heartbeat renews the
// wait; the next check sees the node again.
func (c *Conductor) timeoutNode(ctx context.Context, uuid string, state statemachine.State, heardSince time.Time, msg string) {
	if c.heartbeatPending(uuid, state, heardSince) {
		c.log.Info("callback timeout check: a heartbeat of the node's agent waits for a worker; not failing it", "node", uuid, "state", state)
		return
	}
	// Periodic tasks skip a locked node silently, as Ironic's do; the next
	// run sees it again.
	locked, err := c.reserve(ctx, uuid)
	if err != nil {
		return
	}
	t := c.newTask(locked)
	defer t.release()
	n := t.node
	if n.ProvisionState != state || n.Maintenance {
		return
	}
	if c.heartbeatPending(uuid, state, heardSince) {
		// It came while this check waited for the node's lock.
		c.log.Info("callback timeout check: a heartbeat of the node's agent came meanwhile; not failing it", "node", uuid, "state", state)
		return
	}
	if in, ok := readIntent(n); ok && in.Op == opContinueInspection {
		// The ramdisk's data arrived in time; its processing is queued.
		return
	}
	kind, hasSteps := stepKindOf(state)
	if hasSteps {
		if prog, err := readNodeProgress(n, kind); err == nil && prog.Current != nil {
			msg += fmt.Sprintf(" (failed step %s)", prog.Current.Key())
		}
		_ = c.stepsFailed(ctx, t, kind, msg, kind == "clean" && len(n.CleanStep) > 0)
		return
	}
	if state == statemachine.RescueWait {
		// Ironic's cleanup_rescuewait_timeout: power off, the rescue
		// cleaned up, the agent forgotten; the node fails below.
		c.rescueFailed(ctx, t, msg, false)
		msg = n.LastError
	}
	if state == statemachine.InspectWait {
		// As on an abort: the inspection ramdisk's boot is torn down and
		// the node powered off, so a late ramdisk neither keeps running
		// nor finds its boot configuration again.
		if err := c.endInspectionBoot(ctx, t, true); err != nil {
			msg += fmt.Sprintf("; tearing down the inspection boot failed: %s", describeErr(err))
		}
		wipeAgent(n)
	}
	t.fail(ctx, msg, true)
}

// syncPowerStates runs power state synchronisation once (reference §6.1):
// every node of this conductor's group not in maintenance, not reserved,
// not in a sync-excluded state and without a power action in flight has
// its hardware power state read, in parallel; a mismatch forces the
// hardware back to the recorded state (or records the hardware's state
// with KeepHardwarePowerState); more than PowerStateSyncMaxRetries
// consecutive failures put the node in maintenance with fault "power
// failure". It is a periodic task (tests call it through export_test.go).
func (c *Conductor) syncPowerStates(ctx context.Context) {
	start := c.clock.Now()
	defer func() {
		took := c.clock.Now().Sub(start)
		c.metrics.powerSyncRun.Observe(took.Seconds())
		if iv := c.opts.SyncPowerStateInterval; iv > 0 && took > 3*iv {
			// Ironic's warning: the fleet outgrew the interval or the
			// sync's workers.
			c.log.Warn("power sync: a run took more than three sync intervals", "took", took, "interval", iv)
		}
	}()
	nodes, err := c.listAll(ctx, baremetal.NodeFilter{Maintenance: new(false), Reserved: new(false)})
	if err != nil {
		c.log.Warn("power sync: cannot list nodes", "error", err)
		return
	}
	c.powerMu.Lock()
	sort.SliceStable(nodes, func(i, j int) bool {
		return c.powerFailures[nodes[i].UUID] > c.powerFailures[nodes[j].UUID]
	})
	c.powerMu.Unlock()
	work := make(chan *baremetal.Node)
	var wg sync.WaitGroup
	for i := 0; i < c.opts.PeriodicMaxWorkers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				c.syncPowerState(ctx, n)
			}
		}()
	}
	for _, n := range nodes {
		if statemachine.PowerSyncExcluded(n.ProvisionState) || n.TargetPowerState != "" || n.Reserved() {
			continue
		}
		select {
		case work <- n:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
}

func (c *Conductor) syncPowerState(ctx context.Context, shared *baremetal.Node) {
	t := c.newTask(shared.Clone())
	t.noPorts = true
	c.powerMu.Lock()
	count := c.powerFailures[shared.UUID] + 1
	c.powerMu.Unlock()
	setCount := func(v int) {
		c.powerMu.Lock()
		if v == 0 {
			delete(c.powerFailures, shared.UUID)
		} else {
			c.powerFailures[shared.UUID] = v
		}
		c.powerMu.Unlock()
	}
	var hw driver.PowerState
	err := callIface(ctx, t, driver.KindPower, "power state sync", func(_ *driver.Driver, p driver.PowerInterface, v *driver.Task) error {
		if shared.PowerState == "" {
			if err := p.Validate(ctx, v); err != nil {
				return errSkipSync
			}
		}
		var err error
		hw, err = p.GetPowerState(ctx, v)
		if err == nil && hw == driver.PowerError {
			err = fmt.Errorf("the power interface reported an error state")
		}
		return err
	})
	if errors.Is(err, errSkipSync) {
		setCount(0)
		return
	}
	if err != nil {
		if count > c.opts.PowerStateSyncMaxRetries {
			c.powerMaintenance(ctx, shared.UUID, fmt.Sprintf("During sync_power_state, max retries exceeded for node %s, node state None does not match expected state '%s'. Updating DB state to 'None' Switching node to maintenance mode. Error: %s", shared.UUID, shared.PowerState, describeErr(err)), "")
		} else {
			c.metrics.powerSync.WithLabelValues("failure").Inc()
		}
		setCount(count)
		return
	}
	c.cacheHealth(ctx, t)
	if hw == shared.PowerState {
		c.metrics.powerSync.WithLabelValues("match").Inc()
		setCount(0)
		return
	}
	// Mismatch: take the exclusive lock without retry and re-check.
	locked, err := c.reserve(ctx, shared.UUID)
	if err != nil {
		return
	}
	lt := c.newTask(locked)
	defer lt.release()
	n := lt.node
	if n.Maintenance || n.TargetPowerState != "" || statemachine.PowerSyncExcluded(n.ProvisionState) {
		return
	}
	if hw == n.PowerState {
		// The listing was stale: the node's power changed (and was
		// recorded) after the run listed it, and the BMC agrees with the
		// record. A run over a large fleet reaches its last nodes
		// minutes after listing them; Ironic reads each node afresh.
		c.metrics.powerSync.WithLabelValues("match").Inc()
		setCount(0)
		return
	}
	if n.PowerState == "" {
		n.PowerState = hw
		if err := lt.save(ctx); err == nil {
			c.metrics.powerSync.WithLabelValues("recorded").Inc()
			c.publish(Event{Type: EventPower, NodeUUID: n.UUID, NodeName: n.Name, To: n.ProvisionState, PowerState: n.PowerState})
		}
		setCount(0)
		return
	}
	if count > c.opts.PowerStateSyncMaxRetries {
		lt.release()
		c.powerMaintenance(ctx, n.UUID, fmt.Sprintf("During sync_power_state, max retries exceeded for node %s, node state %s does not match expected state '%s'. Updating DB state to '%s' Switching node to maintenance mode.", n.UUID, hw, n.PowerState, hw), hw)
		setCount(count)
		return
	}
	setCount(count)
	if !c.opts.KeepHardwarePowerState && !n.DisablePowerOff {
		want := n.PowerState
		c.history(ctx, n.UUID, "power state corrected", "power",
			fmt.Sprintf("power state of node %s was %s, expected %s: forcing it back", n.UUID, hw, want), baremetal.HistoryWarning)
		if err := c.powerAction(ctx, lt, want, 0); err != nil {
			c.log.Warn("power sync: cannot force power state", "node", n.UUID, "error", err)
			return
		}
		if err := lt.save(ctx); err == nil {
			c.metrics.powerSync.WithLabelValues("forced").Inc()
		}
		return
	}
	n.PowerState = hw
	if err := lt.save(ctx); err == nil {
		c.metrics.powerSync.WithLabelValues("recorded").Inc()
		c.publish(Event{Type: EventPower, NodeUUID: n.UUID, NodeName: n.Name, To: n.ProvisionState, PowerState: n.PowerState})
	}
}

// cacheHealth reads the node's hardware health during a power state
// sync, as Ironic's node_cache_health does: only when health monitoring
// is on and the management interface reads health (driver.HealthReader);
// a read that fails, or a value that is not one of Ironic's health
// states, is logged and changes nothing. A changed health is saved under
// the node's lock (a node locked meanwhile keeps its old value until the
// next sync) and recorded in its history (event type "monitoring").
func (c *Conductor) cacheHealth(ctx context.Context, t *task) {
	if c.opts.DisableHealthMonitoring {
		return
	}
	shared := t.node
	var h driver.Health
	supported := false
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		hr, ok := driver.As[driver.HealthReader](d.Management())
		if !ok {
			return nil
		}
		supported = true
		var err error
		h, err = hr.Health(ctx, v)
		return err
	})
	if !supported {
		return
	}
	if err != nil {
		c.log.Warn("power sync: cannot read the node's health", "node", shared.UUID, "error", describeErr(err))
		return
	}
	switch h {
	case driver.HealthOK, driver.HealthWarning, driver.HealthCritical, driver.HealthUnknown:
	default:
		c.log.Warn("power sync: the management interface reports an invalid health, ignored", "node", shared.UUID, "health", string(h))
		return
	}
	if string(h) == shared.Health {
		return
	}
	// Through c.reserve, as every reservation of this conductor: its
	// release is counted off the reservation book, and an uncounted
	// hold would take the count of the next holder, whose reservation
	// the phantom sweep could then release under it.
	locked, err := c.reserve(ctx, shared.UUID)
	if err != nil {
		return
	}
	lt := c.newTask(locked)
	defer lt.release()
	n := lt.node
	old := n.Health
	if old == string(h) {
		return
	}
	n.Health = string(h)
	if err := lt.save(ctx); err != nil {
		c.log.Warn("power sync: cannot save the node's health", "node", n.UUID, "error", err)
		return
	}
	shared.Health = n.Health
	none := func(s string) string {
		if s == "" {
			return "None"
		}
		return s
	}
	sev := baremetal.HistoryInfo
	if h == driver.HealthWarning || h == driver.HealthCritical {
		sev = baremetal.HistoryWarning
		c.log.Warn("node health indicates a problem", "node", n.UUID, "health", n.Health)
	}
	c.history(ctx, n.UUID, "health changed", "monitoring",
		fmt.Sprintf("Node health status changed: health='%s' (previously '%s')", none(n.Health), none(old)), sev)
}

var errSkipSync = errors.New("power validation failed with no recorded power state")

func (c *Conductor) powerMaintenance(ctx context.Context, uuid, msg string, hw driver.PowerState) {
	n, err := c.reserve(ctx, uuid)
	if err != nil {
		return
	}
	t := c.newTask(n)
	defer t.release()
	n.PowerState = hw
	if !n.Maintenance {
		n.Maintenance, n.MaintenanceReason, n.Fault = true, msg, "power failure"
	}
	if err := t.save(ctx); err != nil {
		return
	}
	c.metrics.powerSync.WithLabelValues("maintenance").Inc()
	c.history(ctx, uuid, "power failure", "power", msg, baremetal.HistoryError)
	c.publish(Event{Type: EventMaintenance, NodeUUID: uuid, NodeName: n.Name, To: n.ProvisionState, PowerState: n.PowerState, Error: msg})
}

// recoverPowerFailures runs the power failure recovery once: nodes in
// maintenance with fault "power failure" whose BMC answers again leave
// maintenance with their real power state recorded. It is a periodic
// task (tests call it through export_test.go).
func (c *Conductor) recoverPowerFailures(ctx context.Context) {
	nodes, err := c.listAll(ctx, baremetal.NodeFilter{Maintenance: new(true), Reserved: new(false)})
	if err != nil {
		return
	}
	for _, shared := range nodes {
		if shared.Fault != "power failure" || shared.ProvisionState == statemachine.Enroll || shared.TargetPowerState != "" {
			continue
		}
		n, err := c.reserve(ctx, shared.UUID)
		if err != nil {
			continue
		}
		t := c.newTask(n)
		var hw driver.PowerState
		err = callIface(ctx, t, driver.KindPower, "power failure recovery", func(_ *driver.Driver, p driver.PowerInterface, v *driver.Task) error {
			if err := p.Validate(ctx, v); err != nil {
				return err
			}
			var err error
			hw, err = p.GetPowerState(ctx, v)
			if err == nil && hw == driver.PowerError {
				err = fmt.Errorf("error power state")
			}
			return err
		})
		if err == nil {
			n.PowerState = hw
			n.Maintenance, n.MaintenanceReason, n.Fault = false, "", ""
			if t.save(ctx) == nil {
				c.metrics.powerSync.WithLabelValues("recovered").Inc()
				c.powerMu.Lock()
				delete(c.powerFailures, n.UUID)
				c.powerMu.Unlock()
				c.history(ctx, n.UUID, "power failure recovered", "power", "power failure recovered; maintenance cleared", baremetal.HistoryInfo)
				c.publish(Event{Type: EventMaintenance, NodeUUID: n.UUID, NodeName: n.Name, To: n.ProvisionState, PowerState: n.PowerState})
			}
		}
		t.release()
	}
}
