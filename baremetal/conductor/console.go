package conductor

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
)

// EventConsole is published when a node's console is enabled, disabled,
// restored (start-up, takeover, the end of a deploy) or stopped for a
// tear-down, and when one of those fails (Event.Error). Event.Detail
// says which.
const EventConsole EventType = "console"

// ErrConsoleNotEnabled is returned by ConsoleInfo for a node whose
// console is disabled, as Ironic's NodeConsoleNotEnabled (HTTP 400).
var ErrConsoleNotEnabled = errors.New("conductor: console not enabled")

// ConsoleNotEnabledError names the node whose console is disabled. It
// matches ErrConsoleNotEnabled.
type ConsoleNotEnabledError struct {
	// Node is the node's UUID.
	Node string
}

func (e *ConsoleNotEnabledError) Error() string {
	return fmt.Sprintf("the console is not enabled on node %s", e.Node)
}

// Is reports whether target is ErrConsoleNotEnabled.
func (e *ConsoleNotEnabledError) Is(target error) bool { return target == ErrConsoleNotEnabled }

// ConsoleState is what ConsoleInfo reports: Ironic's
// {"console_enabled": ..., "console_info": ...}.
type ConsoleState struct {
	// Enabled is the node's console_enabled.
	Enabled bool
	// Info says how to reach the running console (type and URL, from the
	// console interface's GetConsole). It is nil while an enabled console
	// is stopped for a tear-down: the next deploy starts it again.
	Info *driver.ConsoleInfo
}

// driver_internal_info keys of the console bookkeeping. They are the
// conductor's own: no driver reads them.
const (
	// consoleHostKey names the conductor whose process runs the node's
	// console; absent while no console runs.
	consoleHostKey = "anvil_console_conductor"
	// consoleInfoKey holds the ConsoleInfo the running console reported
	// when it started, for ConsoleInfo on a conductor that does not run
	// it.
	consoleInfoKey = "anvil_console_info"
	// consoleParkedKey is set while an enabled console is stopped for a
	// tear-down (not to be exposed to the next instance's user); the end
	// of the next deploy starts it again, and start-up and takeover leave
	// it stopped.
	consoleParkedKey = "anvil_console_parked"
	// opConsole is the intent of SetConsoleMode.
	opConsole = "console"
)

// SetConsoleMode enables or disables the console of node ident, as
// Ironic's set_console_mode. Under the node's reservation it checks that
// the node's driver has a console interface and that it validates (both
// errors are returned here: a *driver.UnsupportedError matching
// driver.ErrUnsupported, or the interface's validation error); when the
// console already is in the requested mode nothing changes and nil is
// returned; otherwise last_error is cleared and the intent is stored, and
// the node's owner starts or stops the console (a console is a process of
// the conductor that runs it, so only the owner may run it). The outcome
// lands on the node: console_enabled changes on success; on failure it
// stays and last_error says "Error enabling the console on node <uuid>.
// Reason: ...". Follow it with ConsoleInfo, Watch (EventConsole) or the
// node history (event type "console").
//
// It fails with baremetal.ErrNodeLocked while the node is locked or has
// another accepted operation waiting for a worker (retry later), and
// with ErrNoConductor when no live conductor serves the node.
func (c *Conductor) SetConsoleMode(ctx context.Context, ident string, enabled bool) error {
	if err := c.checkRunning(); err != nil {
		return err
	}
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	if err := c.checkServed(n); err != nil {
		return err
	}
	t, err := c.acquire(ctx, n.UUID)
	if err != nil {
		return err
	}
	handed := false
	defer func() {
		if !handed {
			t.release()
		}
	}()
	n = t.node
	if err := c.validateConsole(ctx, t, "set console mode"); err != nil {
		return err
	}
	if pending, ok := readIntent(n); ok {
		holder := c.host
		if cl := c.cluster; cl != nil {
			if o, err := cl.own.OwnerOf(n); err == nil {
				holder = o
			}
		}
		c.log.Info("console mode refused: another operation waits for a worker", "node", n.UUID, "op", pending.Op)
		return &baremetal.NodeLockedError{Node: n.UUID, Holder: holder}
	}
	if enabled == n.ConsoleEnabled {
		c.log.Info("no console action: the console already is in the requested mode", "node", n.UUID, "enabled", enabled)
		return nil
	}
	n.LastError = ""
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[intentKey] = intent{Op: opConsole, RequestedAt: c.clock.Now(),
		Args: map[string]any{"enabled": enabled}}.encode()
	if err := t.save(ctx); err != nil {
		return err
	}
	handed = true
	c.submit(job{uuid: n.UUID, node: n})
	return nil
}

// validateConsole runs the node's console interface's Validate; a node
// without one gets a *driver.UnsupportedError.
func (c *Conductor) validateConsole(ctx context.Context, t *task, op string) error {
	err := callIface(ctx, t, driver.KindConsole, op, func(d *driver.Driver, con driver.ConsoleInterface, v *driver.Task) error {
		return con.Validate(ctx, v)
	})
	if err != nil {
		return fmt.Errorf("%s of node %s: %w", op, t.uuid(), err)
	}
	return nil
}

// ConsoleInfo reports whether the console of node ident is enabled and,
// when it is, how to reach it, as Ironic's get_console_information. It
// takes no reservation. The conductor running the console asks the
// console interface (GetConsole); any other conductor answers with what
// the console reported when it started. It fails with a
// *ConsoleNotEnabledError (ErrConsoleNotEnabled) when the console is
// disabled, and with a *driver.UnsupportedError (driver.ErrUnsupported)
// when the node has no console interface.
//
//	st, err := cond.ConsoleInfo(ctx, "n1")
//	if errors.Is(err, conductor.ErrConsoleNotEnabled) {
//		// enable it first: cond.SetConsoleMode(ctx, "n1", true)
//	}
//	fmt.Println(st.Info.Type, st.Info.URL) // "socat tcp://192.0.2.1:10001"
func (c *Conductor) ConsoleInfo(ctx context.Context, ident string) (ConsoleState, error) {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return ConsoleState{}, err
	}
	t := c.newTask(n)
	t.noPorts = true
	if err := c.validateConsole(ctx, t, "get console information"); err != nil {
		return ConsoleState{}, err
	}
	if !n.ConsoleEnabled {
		return ConsoleState{}, &ConsoleNotEnabledError{Node: n.UUID}
	}
	if parked, _ := n.DriverInternalInfo[consoleParkedKey].(bool); parked {
		return ConsoleState{Enabled: true}, nil
	}
	if host, _ := n.DriverInternalInfo[consoleHostKey].(string); host != "" && host != c.host {
		if info, ok := recordedConsoleInfo(n); ok {
			return ConsoleState{Enabled: true, Info: &info}, nil
		}
	}
	var info driver.ConsoleInfo
	err = callIface(ctx, t, driver.KindConsole, "get console information", func(d *driver.Driver, con driver.ConsoleInterface, v *driver.Task) error {
		var err error
		info, err = con.GetConsole(ctx, v)
		return err
	})
	if err != nil {
		return ConsoleState{}, fmt.Errorf("get console information of node %s: %w", n.UUID, err)
	}
	return ConsoleState{Enabled: true, Info: &info}, nil
}

func recordedConsoleInfo(n *baremetal.Node) (driver.ConsoleInfo, bool) {
	m, ok := n.DriverInternalInfo[consoleInfoKey].(map[string]any)
	if !ok {
		return driver.ConsoleInfo{}, false
	}
	typ, _ := m["type"].(string)
	url, _ := m["url"].(string)
	return driver.ConsoleInfo{Type: typ, URL: url}, true
}

// doConsole runs a SetConsoleMode intent on the owner.
func (c *Conductor) doConsole(ctx context.Context, t *task, in intent) error {
	t.consumeIntent()
	n := t.node
	enabled, _ := in.Args["enabled"].(bool)
	if enabled == n.ConsoleEnabled {
		// Another request got there first.
		return t.save(ctx)
	}
	var err error
	if enabled {
		err = c.startConsole(ctx, t)
	} else {
		err = c.stopConsole(ctx, t)
	}
	if err != nil {
		op := "disabling"
		if enabled {
			op = "enabling"
		}
		msg := fmt.Sprintf("Error %s the console on node %s. Reason: %s", op, n.UUID, describeErr(err))
		n.LastError = msg
		c.consoleEvent(ctx, n, "console "+op+" failed", msg, err)
		if serr := t.save(ctx); serr != nil {
			return errors.Join(err, serr)
		}
		return err
	}
	n.ConsoleEnabled = enabled
	n.LastError = ""
	delete(n.DriverInternalInfo, consoleParkedKey)
	if err := t.save(ctx); err != nil {
		return err
	}
	if enabled {
		c.consoleEvent(ctx, n, "console enabled", fmt.Sprintf("console of node %s enabled on conductor %s", n.UUID, c.host), nil)
	} else {
		c.consoleEvent(ctx, n, "console disabled", fmt.Sprintf("console of node %s disabled", n.UUID), nil)
	}
	return nil
}

// startConsole starts the node's console here and records (unsaved)
// that this conductor runs it and what it reported.
func (c *Conductor) startConsole(ctx context.Context, t *task) error {
	if host, elsewhere := c.consoleRunsElsewhere(t.node); elsewhere {
		return &consoleElsewhereError{node: t.uuid(), host: host}
	}
	var info driver.ConsoleInfo
	err := callIface(ctx, t, driver.KindConsole, "start console", func(d *driver.Driver, con driver.ConsoleInterface, v *driver.Task) error {
		if err := con.StartConsole(ctx, v); err != nil {
			return err
		}
		got, err := con.GetConsole(ctx, v)
		if err != nil {
			// The console runs; only its address is unknown to the
			// other conductors until the next start.
			c.log.Warn("console started but its information could not be read", "node", t.uuid(), "error", err)
			return nil
		}
		info = got
		return nil
	})
	n := t.node
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	if err != nil {
		delete(n.DriverInternalInfo, consoleHostKey)
		delete(n.DriverInternalInfo, consoleInfoKey)
		return err
	}
	n.DriverInternalInfo[consoleHostKey] = c.host
	n.DriverInternalInfo[consoleInfoKey] = map[string]any{"type": info.Type, "url": info.URL}
	delete(n.DriverInternalInfo, consoleParkedKey)
	return nil
}

// stopConsole stops the node's console here and forgets (unsaved) where
// it ran.
func (c *Conductor) stopConsole(ctx context.Context, t *task) error {
	if host, elsewhere := c.consoleRunsElsewhere(t.node); elsewhere {
		return &consoleElsewhereError{node: t.uuid(), host: host}
	}
	err := callIface(ctx, t, driver.KindConsole, "stop console", func(d *driver.Driver, con driver.ConsoleInterface, v *driver.Task) error {
		return con.StopConsole(ctx, v)
	})
	if err != nil {
		return err
	}
	n := t.node
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	delete(n.DriverInternalInfo, consoleHostKey)
	delete(n.DriverInternalInfo, consoleInfoKey)
	return nil
}

// consoleElsewhereError says a console cannot be started or stopped here
// because another live conductor's process runs it (the node's previous
// owner, which stops it at its next console sync).
type consoleElsewhereError struct{ node, host string }

func (e *consoleElsewhereError) Error() string {
	return fmt.Sprintf("the console of node %s still runs on conductor %s, which stops it at its next console sync; retry later", e.node, e.host)
}

// consoleEvent records a console event in the node's history (event type
// "console") and publishes it; err marks a failure.
func (c *Conductor) consoleEvent(ctx context.Context, n *baremetal.Node, event, msg string, err error) {
	sev := baremetal.HistoryInfo
	e := Event{Type: EventConsole, NodeUUID: n.UUID, NodeName: n.Name, To: n.ProvisionState, Detail: event}
	if err != nil {
		sev = baremetal.HistoryError
		e.Error = describeErr(err)
	}
	c.history(ctx, n.UUID, event, "console", msg, sev)
	c.publish(e)
}

// consoleRunsElsewhere reports the live conductor other than this one
// whose process runs n's console, if any: such a console is stopped by
// that conductor (syncConsoles) before another may start it, so that two
// processes never hold one BMC's serial-over-LAN session.
func (c *Conductor) consoleRunsElsewhere(n *baremetal.Node) (string, bool) {
	host, _ := n.DriverInternalInfo[consoleHostKey].(string)
	if host == "" || host == c.host || c.cluster == nil {
		return "", false
	}
	return host, slices.Contains(c.cluster.own.Alive(), host)
}

// restorableConsole says n's console is enabled and should run on its
// owner: not parked by a tear-down, and not running on another live
// conductor.
func (c *Conductor) restorableConsole(n *baremetal.Node) bool {
	if !n.ConsoleEnabled {
		return false
	}
	if parked, _ := n.DriverInternalInfo[consoleParkedKey].(bool); parked {
		return false
	}
	_, elsewhere := c.consoleRunsElsewhere(n)
	return !elsewhere
}

// restoreConsoles is Ironic's _start_consoles at start-up: the consoles of
// the nodes this conductor owns whose console is enabled are started
// again (their processes died with the previous run). A console that
// does not start is disabled, with last_error saying why. A node locked
// past the lock policy is skipped (logged); the takeover pass of a
// cluster tries it again.
func (c *Conductor) restoreConsoles(ctx context.Context) {
	nodes, err := c.listAll(ctx, baremetal.NodeFilter{ConsoleEnabled: new(true)})
	if err != nil {
		c.log.Warn("console restore: cannot list nodes", "error", err)
		return
	}
	for _, n := range nodes {
		if !c.restorableConsole(n) {
			continue
		}
		locked, err := baremetal.AcquireNode(ctx, c.locks(), n.UUID, c.host, *c.opts.LockPolicy)
		if err != nil {
			c.log.Warn("console restore: node locked or gone; its console is not started", "node", n.UUID, "error", err)
			continue
		}
		t := c.newTask(locked)
		if c.restorableConsole(locked) && c.ownsNode(locked) {
			c.restartConsole(ctx, t, "console restored",
				fmt.Sprintf("Failed to start console of node %s while starting conductor %s, so console_enabled is set to false: %%s", locked.UUID, c.host))
		}
		t.release()
	}
}

// restartConsole starts an enabled console on a node held under t (start-up,
// takeover, the end of a deploy) and saves the node. On failure the
// console is disabled and last_error is failFormat with the error.
func (c *Conductor) restartConsole(ctx context.Context, t *task, event, failFormat string) bool {
	n := t.node
	err := c.startConsole(ctx, t)
	if err != nil {
		msg := fmt.Sprintf(failFormat, describeErr(err))
		c.log.Error("console not started", "node", n.UUID, "event", event, "error", err)
		n.ConsoleEnabled = false
		n.LastError = msg
		delete(n.DriverInternalInfo, consoleParkedKey)
		if serr := t.save(ctx); serr != nil {
			c.log.Warn("cannot record the console failure", "node", n.UUID, "error", serr)
		}
		c.consoleEvent(ctx, n, event+" failed", msg, err)
		return false
	}
	if err := t.save(ctx); err != nil {
		c.log.Warn("cannot record the restarted console", "node", n.UUID, "error", err)
		return false
	}
	c.consoleEvent(ctx, n, event, fmt.Sprintf("console of node %s started on conductor %s", n.UUID, c.host), nil)
	return true
}

// takeOverConsole starts, on a node held under t that this conductor
// took over, the enabled console its previous owner ran (Ironic's
// _do_takeover), unless that owner still runs it (it stops it first, see
// syncConsoles). It saves the node.
func (c *Conductor) takeOverConsole(ctx context.Context, t *task) {
	n := t.node
	if !c.restorableConsole(n) {
		return
	}
	if host, _ := n.DriverInternalInfo[consoleHostKey].(string); host == c.host {
		return
	}
	c.restartConsole(ctx, t, "console taken over",
		fmt.Sprintf("Failed to start console while taking over the node %s: %%s.", n.UUID))
}

// syncConsoles moves consoles to their nodes' owners, run with the
// cluster's local state sync and orphan check: this conductor stops the
// consoles it runs for nodes it no longer owns, or whose new owner parked
// them for a tear-down (console_enabled stays true), and starts the
// enabled consoles of the nodes it owns that no live conductor runs. At
// most PeriodicMaxWorkers nodes are handled per run.
func (c *Conductor) syncConsoles(ctx context.Context) {
	if c.cluster == nil {
		return
	}
	// Unreserved nodes of the group with an enabled console, owned by
	// this conductor or not.
	nodes, err := c.listGroup(ctx, baremetal.NodeFilter{Reserved: new(false), ConsoleEnabled: new(true)})
	if err != nil {
		c.log.Warn("console sync: cannot list nodes", "error", err)
		return
	}
	done := 0
	for _, n := range nodes {
		if done >= c.opts.PeriodicMaxWorkers {
			return
		}
		host, _ := n.DriverInternalInfo[consoleHostKey].(string)
		owned := c.ownsNode(n)
		parked, _ := n.DriverInternalInfo[consoleParkedKey].(bool)
		release := host == c.host && (!owned || parked)
		takeover := owned && host != c.host && c.restorableConsole(n)
		if !release && !takeover {
			continue
		}
		locked, err := c.reserve(ctx, n.UUID)
		if err != nil {
			continue
		}
		done++
		t := c.newTask(locked)
		host, _ = locked.DriverInternalInfo[consoleHostKey].(string)
		parked, _ = locked.DriverInternalInfo[consoleParkedKey].(bool)
		switch owned = c.ownsNode(locked); {
		case !locked.ConsoleEnabled:
		case host == c.host && (!owned || parked):
			c.handOverConsole(ctx, t)
		case owned && host != c.host && c.restorableConsole(locked):
			c.takeOverConsole(ctx, t)
		}
		t.release()
	}
}

// handOverConsole stops the console this conductor runs for a node it no
// longer owns (or whose owner parked it), so that the owner can start it;
// console_enabled stays.
func (c *Conductor) handOverConsole(ctx context.Context, t *task) {
	n := t.node
	if err := c.stopConsole(ctx, t); err != nil {
		c.log.Warn("console sync: cannot stop the console of a node this conductor no longer owns", "node", n.UUID, "error", err)
		c.consoleEvent(ctx, n, "console hand-over failed",
			fmt.Sprintf("conductor %s could not stop the console of node %s for its new owner: %s", c.host, n.UUID, describeErr(err)), err)
		return
	}
	if err := t.save(ctx); err != nil {
		c.log.Warn("console sync: cannot record the stopped console", "node", n.UUID, "error", err)
		return
	}
	c.consoleEvent(ctx, n, "console handed over", fmt.Sprintf("conductor %s stopped the console of node %s for its new owner", c.host, n.UUID), nil)
}

// parkConsole stops an enabled console for a tear-down, keeping
// console_enabled (Ironic does not expose the console to the next
// instance's user; the next deploy starts it again). The node is not
// saved.
func (c *Conductor) parkConsole(ctx context.Context, t *task) error {
	n := t.node
	if !n.ConsoleEnabled {
		return nil
	}
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	if host, elsewhere := c.consoleRunsElsewhere(n); elsewhere {
		// The previous owner still runs it: it stops a parked console at
		// its next console sync.
		n.DriverInternalInfo[consoleParkedKey] = true
		c.consoleEvent(ctx, n, "console stopped", fmt.Sprintf("console of node %s parked for the tear-down; conductor %s, which runs it, stops it at its next console sync", n.UUID, host), nil)
		return nil
	}
	if err := c.stopConsole(ctx, t); err != nil {
		c.consoleEvent(ctx, n, "console stop failed", fmt.Sprintf("Failed to stop console while tearing down the node %s: %s", n.UUID, describeErr(err)), err)
		return err
	}
	n.DriverInternalInfo[consoleParkedKey] = true
	c.consoleEvent(ctx, n, "console stopped", fmt.Sprintf("console of node %s stopped for the tear-down; it starts again at the next deploy", n.UUID), nil)
	return nil
}

// startConsoleInDeploy starts an enabled console at the end of a deploy
// (Ironic's _start_console_in_deploy); on failure the console is
// disabled and last_error says why, and the deploy goes on. It saves
// the node.
func (c *Conductor) startConsoleInDeploy(ctx context.Context, t *task) {
	n := t.node
	if !n.ConsoleEnabled {
		return
	}
	c.restartConsole(ctx, t, "console started",
		fmt.Sprintf("Failed to start console while deploying the node %s: %%s.", n.UUID))
}

// stopConsoleForDelete stops the console of a node about to be deleted
// (a failure is logged, as in Ironic) and disables it. The node is not
// saved.
func (c *Conductor) stopConsoleForDelete(ctx context.Context, t *task) {
	n := t.node
	if !n.ConsoleEnabled {
		return
	}
	if err := c.stopConsole(ctx, t); err != nil {
		c.log.Error("failed to stop the console of a node being deleted", "node", n.UUID, "error", err)
		c.consoleEvent(ctx, n, "console stop failed", fmt.Sprintf("Failed to stop console while deleting the node %s: %s", n.UUID, describeErr(err)), err)
	} else {
		c.consoleEvent(ctx, n, "console disabled", fmt.Sprintf("console of node %s stopped: the node is deleted", n.UUID), nil)
	}
	n.ConsoleEnabled = false
}
