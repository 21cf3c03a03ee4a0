package conductor

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// Sentinel errors of the verbs, matched with errors.Is; the rich typed
// errors below match them.
var (
	// ErrUpdateInProgress: the node cannot be updated while a transition
	// is in progress.
	ErrUpdateInProgress = errors.New("conductor: node cannot be updated while a state transition is in progress")
	// ErrDeleteRefused: the node cannot be deleted in its state.
	ErrDeleteRefused = errors.New("conductor: node cannot be deleted in its state")
	// ErrVerbRefused: the verb is refused for a reason other than the
	// state machine (maintenance, protected, retired, missing input).
	ErrVerbRefused = errors.New("conductor: verb refused")
	// ErrNodeProtected: the node is protected and the verb (delete,
	// undeploy, rebuild) would destroy its instance (Ironic's
	// NodeProtected, 403).
	ErrNodeProtected = errors.New("conductor: node is protected")
	// ErrStateForbidsUpdate: the update is refused in the node's
	// provision state (Ironic's InvalidState from update_node: protected
	// set outside active and rescue, retired set in available).
	ErrStateForbidsUpdate = errors.New("conductor: the node's provision state forbids the change")
)

// VerbError explains why a verb was refused before anything changed. It
// matches ErrVerbRefused, ErrUpdateInProgress, ErrDeleteRefused or
// ErrNodeProtected.
type VerbError struct {
	// Verb is the verb refused ("deploy", "update", "delete", ...).
	Verb string
	// Node is the node's UUID.
	Node string
	// State is the node's provision state.
	State statemachine.State
	// Reason says what would have been accepted.
	Reason string
	// Allowed are the provision states the verb is accepted in, when the
	// node's state alone refused it (a delete outside them).
	Allowed []statemachine.State
	kind    error
}

func (e *VerbError) Error() string {
	return fmt.Sprintf("%s of node %s (state %q) refused: %s", e.Verb, e.Node, e.State, e.Reason)
}

// Is reports whether target is the sentinel this error matches.
func (e *VerbError) Is(target error) bool {
	if e.kind != nil {
		return target == e.kind
	}
	return target == ErrVerbRefused
}

func (c *Conductor) checkRunning() error {
	if !c.running.Load() {
		return fmt.Errorf("%w: %s", ErrConductorNotRunning, c.host)
	}
	return nil
}

// Enroll creates n in the enroll state after resolving its interfaces:
// every interface left empty gets the hardware type's default, and the
// defaults are written into the node as Ironic does. It returns the stored
// node. Everything is checked before the node is stored: the name (see
// ValidNodeName), the driver and interfaces, and the provision and power
// states. An error names the node by what the caller gave, its UUID or
// its name, or says it is an unnamed node that was not stored.
func (c *Conductor) Enroll(ctx context.Context, n *baremetal.Node) (*baremetal.Node, error) {
	return c.EnrollWith(ctx, n, EnrollOptions{})
}

// EnrollOptions tune EnrollWith.
type EnrollOptions struct {
	// Available creates the node directly in available, without
	// verification or cleaning, as Ironic's API does for clients older
	// than microversion 1.11.
	Available bool
}

// EnrollWith is Enroll with options: with Available the node is stored
// in available instead of enroll, after the same checks.
func (c *Conductor) EnrollWith(ctx context.Context, n *baremetal.Node, o EnrollOptions) (*baremetal.Node, error) {
	if n == nil {
		return nil, &baremetal.InvalidFieldError{Kind: "node", Field: "node", Expected: "a node"}
	}
	n = n.Clone()
	label := newNodeLabel(n)
	if err := baremetal.CheckNodeName(label, n.Name); err != nil {
		return nil, err
	}
	if n.Driver == "" {
		return nil, &baremetal.InvalidFieldError{Kind: "node", Ident: label, Field: "driver", Expected: "a hardware type name"}
	}
	ifs, err := c.drivers.FillDefaults(nodeInterfaces(n))
	if err != nil {
		return nil, fmt.Errorf("enroll node %s: %w", label, err)
	}
	n.SetInterfaces(ifs)
	if n.ProvisionState != "" && n.ProvisionState != statemachine.Enroll {
		return nil, &baremetal.InvalidFieldError{Kind: "node", Ident: label, Field: "provision_state", Expected: "empty or enroll for a new node"}
	}
	if _, err := statemachine.ParsePowerState(string(n.PowerState)); err != nil {
		return nil, &baremetal.InvalidFieldError{Kind: "node", Ident: label, Field: "power_state",
			Expected: "a known power state, or empty for unknown", Err: err}
	}
	if n.TargetPowerState != "" {
		return nil, &baremetal.InvalidFieldError{Kind: "node", Ident: label, Field: "target_power_state",
			Expected: "empty for a new node (power actions go through SetPowerState)"}
	}
	n.ProvisionState = statemachine.Enroll
	if o.Available {
		n.ProvisionState = statemachine.Available
	}
	n.TargetProvisionState = ""
	n.Reservation = ""
	if err := c.store.CreateNode(ctx, n); err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("node enrolled with hardware type %s", n.Driver)
	if o.Available {
		msg += ", directly in available"
	}
	c.history(ctx, n.UUID, "node enrolled", "provisioning", msg, baremetal.HistoryInfo)
	c.publish(Event{Type: EventNodeEnrolled, NodeUUID: n.UUID, NodeName: n.Name, To: n.ProvisionState})
	return n, nil
}

// newNodeLabel names a node that is not stored yet by what its creator
// gave: its UUID, else its name, else a phrase that says it has neither
// and was not stored (a UUID the store would generate is never named,
// since no node has it).
func newNodeLabel(n *baremetal.Node) string {
	if n.UUID != "" {
		return n.UUID
	}
	if n.Name != "" {
		return n.Name
	}
	return "(unnamed, not stored)"
}

// Update applies change to node ident under its reservation and saves it.
// It is refused with ErrUpdateInProgress while a transition is in progress
// (a target is set and the state is not one Ironic allows updates in).
// Interfaces are resolved again, so an invalid interface name is refused,
// and a changed name must follow the rules of ValidNodeName. change must
// not touch the provision or power states.
func (c *Conductor) Update(ctx context.Context, ident string, change func(*baremetal.Node) error) (*baremetal.Node, error) {
	return c.UpdateWith(ctx, ident, UpdateOptions{}, change)
}

// checkProtectedRetired applies Ironic's update_node rules for protected
// and retired to n, changed from before: clearing protected (retired)
// clears its reason; protected can be set only in active or rescue,
// retired not in available (ErrStateForbidsUpdate, verb "protect" or
// "retire"); a reason can be set only while the flag is set
// (*baremetal.InvalidFieldError).
func checkProtectedRetired(before, n *baremetal.Node) error {
	if n.Protected != before.Protected {
		if !n.Protected {
			n.ProtectedReason = ""
		} else if n.ProvisionState != statemachine.Active && n.ProvisionState != statemachine.Rescue {
			return &VerbError{Verb: "protect", Node: n.UUID, State: n.ProvisionState, kind: ErrStateForbidsUpdate,
				Reason: "a node can be made protected in the active and rescue states only"}
		}
	}
	if n.ProtectedReason != before.ProtectedReason && n.ProtectedReason != "" && !n.Protected {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: n.UUID, Field: "protected_reason", Expected: "to be set only when protected is true"}
	}
	if n.Retired != before.Retired {
		if !n.Retired {
			n.RetiredReason = ""
		} else if n.ProvisionState == statemachine.Available {
			return &VerbError{Verb: "retire", Node: n.UUID, State: n.ProvisionState, kind: ErrStateForbidsUpdate,
				Reason: "retired cannot be set in the available state"}
		}
	}
	if n.RetiredReason != before.RetiredReason && n.RetiredReason != "" && !n.Retired {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: n.UUID, Field: "retired_reason", Expected: "to be set only when retired is true"}
	}
	return nil
}

// UpdateOptions tune UpdateWith.
type UpdateOptions struct {
	// ClearInstanceInMaintenance lets a node in maintenance be updated
	// while a transition is in progress, as Ironic allows for the one
	// patch that removes instance_uuid (an operator freeing a stuck
	// node). change must then touch nothing but InstanceUUID; otherwise
	// the update is refused like any other in a transition. change is
	// first run on a copy to see what it touches, so it runs twice and
	// must not depend on running once.
	ClearInstanceInMaintenance bool
	// TraitsInAnyState lets a change of the node's traits alone through
	// whatever the provision state, as Ironic's add_node_traits and
	// remove_node_traits take the lock without a state check. A change
	// touching anything else is refused like any other in a transition;
	// change runs twice, as with ClearInstanceInMaintenance.
	TraitsInAnyState bool
}

// UpdateWith is Update with options.
func (c *Conductor) UpdateWith(ctx context.Context, ident string, o UpdateOptions, change func(*baremetal.Node) error) (*baremetal.Node, error) {
	t, err := c.acquire(ctx, ident)
	if err != nil {
		return nil, err
	}
	defer t.release()
	n := t.node
	exempt := false
	inMaint := o.ClearInstanceInMaintenance && n.Maintenance
	if (inMaint || o.TraitsInAnyState) && !statemachine.NodeUpdatable(n.ProvisionState, n.TargetProvisionState) {
		probe := n.Clone()
		if err := change(probe); err != nil {
			return nil, err
		}
		if inMaint {
			probe.InstanceUUID = n.InstanceUUID
		}
		if o.TraitsInAnyState {
			probe.Traits = n.Traits
		}
		exempt = reflect.DeepEqual(probe, n)
	}
	if !exempt && !statemachine.NodeUpdatable(n.ProvisionState, n.TargetProvisionState) {
		return nil, &VerbError{Verb: "update", Node: n.UUID, State: n.ProvisionState, kind: ErrUpdateInProgress,
			Reason: "a state transition is in progress; updates are allowed when no target is set or in " + fmt.Sprint(statemachine.UpdateAllowedStates())}
	}
	before := n.Clone()
	if err := change(n); err != nil {
		return nil, err
	}
	if n.ProvisionState != before.ProvisionState || n.TargetProvisionState != before.TargetProvisionState ||
		n.PowerState != before.PowerState || n.TargetPowerState != before.TargetPowerState || n.UUID != before.UUID {
		return nil, &VerbError{Verb: "update", Node: n.UUID, State: before.ProvisionState,
			Reason: "provision and power states, and the UUID, change only through verbs"}
	}
	if err := checkProtectedRetired(before, n); err != nil {
		return nil, err
	}
	if n.Name != before.Name {
		if err := baremetal.CheckNodeName(n.UUID, n.Name); err != nil {
			return nil, err
		}
	}
	ifs, err := c.drivers.FillDefaults(nodeInterfaces(n))
	if err != nil {
		return nil, fmt.Errorf("update node %s: %w", n.UUID, err)
	}
	n.SetInterfaces(ifs)
	if n.Driver != before.Driver || !reflect.DeepEqual(n.DriverInfo, before.DriverInfo) {
		// A new BMC address, credentials or hardware type is a deliberate
		// change of machine: forget the identity the driver recorded so
		// the next contact records the new one instead of refusing it.
		delete(n.DriverInternalInfo, driver.IdentityKey)
	}
	if err := t.save(ctx); err != nil {
		return nil, err
	}
	return n.Clone(), nil
}

// Delete removes node ident, only in the states Ironic allows (enroll,
// manageable, adopt failed, and available unless RefuseDeletingAvailable).
// An enabled console is stopped and disabled first; a console that does
// not stop is logged and recorded in the history, and the node is deleted
// anyway, as in Ironic. Delete is refused (ErrDeleteRefused) while the
// console runs on another live conductor, which alone can stop it.
func (c *Conductor) Delete(ctx context.Context, ident string) error {
	t, err := c.acquire(ctx, ident)
	if err != nil {
		return err
	}
	n := t.node
	// As in Ironic, a node in maintenance is deleted whatever its state
	// and instance: that is how a hopelessly broken node (a dead BMC, a
	// failed deployment) is removed.
	if !n.Maintenance && n.Associated() {
		t.release()
		return &VerbError{Verb: "delete", Node: n.UUID, State: n.ProvisionState, kind: ErrDeleteRefused,
			Reason: "an instance is associated; undeploy it first, or set the node into maintenance mode"}
	}
	if n.Protected {
		t.release()
		return &VerbError{Verb: "delete", Node: n.UUID, State: n.ProvisionState, kind: ErrNodeProtected,
			Reason: "the node is protected; unset protected first"}
	}
	if !n.Maintenance && !statemachine.DeleteAllowed(n.ProvisionState, !c.opts.RefuseDeletingAvailable) {
		t.release()
		allowed := statemachine.DeleteAllowedStates()
		if !c.opts.RefuseDeletingAvailable {
			allowed = append(allowed, statemachine.Available)
		}
		return &VerbError{Verb: "delete", Node: n.UUID, State: n.ProvisionState, kind: ErrDeleteRefused, Allowed: allowed,
			Reason: fmt.Sprintf("valid provision states to perform deletion are %v, or set the node into maintenance mode", allowed)}
	}
	if n.ConsoleEnabled {
		if host, elsewhere := c.consoleRunsElsewhere(n); elsewhere {
			t.release()
			return &VerbError{Verb: "delete", Node: n.UUID, State: n.ProvisionState, kind: ErrDeleteRefused,
				Reason: fmt.Sprintf("its console runs on conductor %s, which alone can stop it; retry once the console has moved (at its next console sync) or call Delete there", host)}
		}
		c.stopConsoleForDelete(ctx, t)
		if err := t.save(ctx); err != nil {
			t.release()
			return err
		}
	}
	t.release()
	if err := c.store.DeleteNode(ctx, n.UUID); err != nil {
		return err
	}
	c.publish(Event{Type: EventNodeDeleted, NodeUUID: n.UUID, NodeName: n.Name})
	return nil
}

// verb is one accepted-verb request, the common path of every provision
// verb: validate against the state machine, take the reservation,
// re-check, persist the new state with the intent, hand over to a worker.
type verb struct {
	name  string
	event statemachine.Event
	op    string
	args  map[string]any
	move  moveOpts
	// check runs under the reservation before anything is written; it
	// may change the node (the write includes its changes).
	check func(t *task) error
	// noWork says no worker follows (unhold into a wait state).
	noWork bool
	// limit is the concurrency limit the verb is subject to, checked
	// before the reservation is taken (zero for most verbs: none).
	limit actionLimit
	// read is the node as the verb already read it (unlocked, like
	// accept's own read), which accept then uses instead of reading it
	// again; nil: accept reads it.
	read *baremetal.Node
}

func (c *Conductor) accept(ctx context.Context, ident string, v verb) (err error) {
	var span trace.Span
	defer func() {
		if span != nil {
			endSpan(span, err)
		}
		outcome := "accepted"
		switch {
		case err == nil:
		case errors.Is(err, baremetal.ErrNodeLocked):
			outcome = "locked"
		case errors.Is(err, statemachine.ErrInvalidTransition), errors.Is(err, ErrVerbRefused), errors.Is(err, ErrConcurrentActionLimit),
			errors.Is(err, baremetal.ErrInvalidInput):
			outcome = "refused"
		default:
			outcome = "error"
		}
		c.metrics.verbs.WithLabelValues(v.name, outcome).Inc()
	}()
	if err := c.checkRunning(); err != nil {
		return err
	}
	n := v.read
	if n == nil {
		if n, err = c.store.GetNode(ctx, ident); err != nil {
			return err
		}
	}
	if err := c.checkServed(n); err != nil {
		return err
	}
	if !c.fsm.Allows(n.ProvisionState, v.event) {
		if n.Reserved() {
			return &baremetal.NodeLockedError{Node: n.UUID, Holder: n.Reservation}
		}
		_, _, err := c.fsm.Process(n.ProvisionState, v.event)
		return fmt.Errorf("%s of node %s: %w", v.name, n.UUID, err)
	}
	// As Ironic's conductor does, the concurrency limit is checked once
	// the transition is known to be valid and before the node is locked,
	// so a refusal leaves the node untouched.
	if err := c.checkActionLimit(ctx, n, v.name, v.limit); err != nil {
		return err
	}
	if !v.noWork {
		// The operation's trace starts here.
		ctx, span = c.startOperation(ctx, v.name, n)
	}
	locked, err := baremetal.AcquireNode(ctx, c.locks(), n.UUID, c.host, *c.opts.LockPolicy)
	if err != nil {
		return err
	}
	t := c.newTask(locked)
	handed := false
	defer func() {
		if !handed {
			t.release()
		}
	}()
	if v.check != nil {
		if err := v.check(t); err != nil {
			return err
		}
	}
	if !v.noWork {
		if t.node.DriverInternalInfo == nil {
			t.node.DriverInternalInfo = map[string]any{}
		}
		t.node.DriverInternalInfo[intentKey] = intent{Op: v.op, RequestedAt: c.clock.Now(), Args: v.args}.encode()
		delete(t.node.DriverInternalInfo, traceKey)
		recordTrace(ctx, t.node)
		v.move.work = true
	}
	if err := t.process(ctx, v.event, v.move); err != nil {
		return err
	}
	if v.noWork {
		return nil
	}
	handed = true
	c.submit(job{uuid: t.node.UUID, kind: jobIntent, node: t.node, ports: t.ports, portsLoaded: t.portsLoaded})
	return nil
}

// Manage moves a node to manageable: from enroll through verification
// (power credentials checked and the power state read), from available,
// clean failed, inspect failed and adopt failed at once.
func (c *Conductor) Manage(ctx context.Context, ident string) error {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	if n.ProvisionState == statemachine.Enroll {
		return c.accept(ctx, ident, verb{name: "manage", event: statemachine.EventManage, op: opVerify, read: n})
	}
	return c.accept(ctx, ident, verb{name: "manage", event: statemachine.EventManage, noWork: true, read: n})
}

// Inspect runs hardware inspection on a manageable (or inspect failed)
// node through its inspect interface.
func (c *Conductor) Inspect(ctx context.Context, ident string) error {
	return c.accept(ctx, ident, verb{name: "inspect", event: statemachine.EventInspect, op: opInspect,
		check: func(t *task) error {
			t.node.InspectionStartedAt = c.clock.Now().UTC()
			t.node.InspectionFinishedAt = time.Time{}
			return nil
		}})
}

// Provide makes a manageable node available through automated cleaning.
// It is refused with a *ConcurrentActionLimitError (ErrConcurrentActionLimit)
// while Options.MaxConcurrentClean nodes are deleting or cleaning.
func (c *Conductor) Provide(ctx context.Context, ident string) error {
	return c.accept(ctx, ident, verb{name: "provide", event: statemachine.EventProvide, op: opClean, limit: limitClean,
		check: func(t *task) error {
			if t.node.Retired {
				return &VerbError{Verb: "provide", Node: t.node.UUID, State: t.node.ProvisionState, Reason: "the node is retired"}
			}
			return nil
		}})
}

// CleanOptions tune a manual clean.
type CleanOptions struct {
	// DisableRamdisk runs the steps without booting the agent; every step
	// must then not require the ramdisk.
	DisableRamdisk bool
	// Runbook names a stored runbook (UUID or name) whose steps run, in
	// their order, instead of the given steps, which must then be empty
	// (API 1.92). As in Ironic (1.112) the node must have one of the
	// runbook's traits, and the runbook's disable_ramdisk applies.
	Runbook string
	// RunbookByName applies the rule of Ironic's API before 1.112
	// instead: the node must have a trait equal to the runbook's name.
	RunbookByName bool
}

// Clean runs a manual clean of the given steps (in their order) on a
// manageable node, which returns to manageable. It is refused with a
// *ConcurrentActionLimitError (ErrConcurrentActionLimit) while
// Options.MaxConcurrentClean nodes are deleting or cleaning.
func (c *Conductor) Clean(ctx context.Context, ident string, cleanSteps []steps.Step, o CleanOptions) error {
	rb, err := c.runbookSteps(ctx, ident, "clean", cleanSteps, o.Runbook, o.RunbookByName)
	if err != nil {
		return err
	}
	if rb != nil {
		cleanSteps, o.DisableRamdisk = rb.steps, rb.disableRamdisk
	}
	if err := statemachine.VerbClean.Validate(statemachine.VerbInput{Steps: len(cleanSteps)}); err != nil {
		return fmt.Errorf("clean of node %s: %w", ident, err)
	}
	raw, err := stepsToJSON(cleanSteps)
	if err != nil {
		return err
	}
	return c.accept(ctx, ident, verb{name: "clean", event: statemachine.EventClean, op: opClean, limit: limitClean,
		args: map[string]any{"clean_steps": raw, "disable_ramdisk": o.DisableRamdisk},
		move: moveOpts{target: statemachine.Manageable},
		// The steps are validated by the worker, as Ironic's
		// do_node_clean does after the API's 202: steps no interface
		// offers fail the clean (clean failed, last_error).
		check: rb.check})
}

// ServiceOptions tune a service request.
type ServiceOptions struct {
	// DisableRamdisk runs the steps without booting the agent.
	DisableRamdisk bool
	// Runbook names a stored runbook whose steps run instead of the
	// given ones, as CleanOptions.Runbook.
	Runbook string
	// RunbookByName is CleanOptions.RunbookByName.
	RunbookByName bool
}

// Service runs service steps on an active node, which returns to active.
func (c *Conductor) Service(ctx context.Context, ident string, serviceSteps []steps.Step, o ServiceOptions) error {
	rb, err := c.runbookSteps(ctx, ident, "service", serviceSteps, o.Runbook, o.RunbookByName)
	if err != nil {
		return err
	}
	if rb != nil {
		serviceSteps, o.DisableRamdisk = rb.steps, rb.disableRamdisk
	}
	if err := statemachine.VerbService.Validate(statemachine.VerbInput{Steps: len(serviceSteps)}); err != nil {
		return fmt.Errorf("service of node %s: %w", ident, err)
	}
	raw, err := stepsToJSON(serviceSteps)
	if err != nil {
		return err
	}
	return c.accept(ctx, ident, verb{name: "service", event: statemachine.EventService, op: opService,
		args: map[string]any{"service_steps": raw, "disable_ramdisk": o.DisableRamdisk},
		check: func(t *task) error {
			if err := rb.check(t); err != nil {
				return err
			}
			return c.validateUserSteps(ctx, t, steps.Service, serviceSteps, o.DisableRamdisk)
		}})
}

// Adopt takes over an already deployed machine: manageable (or adopt
// failed) to active without deploying.
func (c *Conductor) Adopt(ctx context.Context, ident string) error {
	return c.accept(ctx, ident, verb{name: "adopt", event: statemachine.EventAdopt, op: opAdopt})
}

// Abort stops the operation of a node waiting for the agent or parked by a
// hold (reference §1.5): clean wait/hold, wait call-back, deploy hold,
// rescue wait, inspect wait, service wait/hold, service failed. A running
// step that is not abortable is allowed to finish first.
func (c *Conductor) Abort(ctx context.Context, ident string) error {
	if err := c.checkRunning(); err != nil {
		return err
	}
	t, err := c.acquire(ctx, ident)
	if err != nil {
		return err
	}
	handed := false
	defer func() {
		if !handed {
			t.release()
		}
	}()
	n := t.node
	state := n.ProvisionState
	if !c.fsm.Allows(state, statemachine.EventAbort) || state == statemachine.CleanFailed {
		_, _, err := c.fsm.Process(state, statemachine.EventAbort)
		if err == nil {
			err = &VerbError{Verb: "abort", Node: n.UUID, State: n.ProvisionState, Reason: "nothing to abort"}
		}
		c.metrics.verbs.WithLabelValues("abort", "refused").Inc()
		return fmt.Errorf("abort of node %s: %w", n.UUID, err)
	}
	c.metrics.verbs.WithLabelValues("abort", "accepted").Inc()
	kind, hasSteps := stepKindOf(state)
	if hasSteps && state != statemachine.ServiceFailed {
		prog, err := readNodeProgress(n, kind)
		// A reserved step (hold, wait) runs nothing, so it never delays an
		// abort.
		if err == nil && prog.Current != nil && !prog.Current.Abortable && !prog.Current.IsReserved() && state != statemachine.DeployHold {
			a := c.planner().Decide(prog, steps.Outcome{Kind: steps.AbortRequested, Node: n.UUID})
			if a.Kind == steps.AbortAfterStep {
				if err := writeNodeProgress(n, a.Progress); err != nil {
					return err
				}
				c.history(ctx, n.UUID, "abort requested", "provisioning", a.Message, baremetal.HistoryWarning)
				return t.save(ctx)
			}
		}
	}
	switch state {
	case statemachine.ServiceWait, statemachine.ServiceHold:
		// Ironic fails the service first, then aborts back to active.
		if err := t.process(ctx, statemachine.EventFail, moveOpts{lastError: "Service was aborted by request"}); err != nil {
			return err
		}
	case statemachine.DeployWait, statemachine.DeployHold:
		delete(n.DriverInternalInfo, driver.InternalAgentURL)
	case statemachine.RescueWait:
		t.forgetRescuePassword()
	}
	if prev, ok := readIntent(n); ok && prev.Op == opContinueInspection {
		c.history(ctx, n.UUID, "inspection data dropped", "inspection",
			fmt.Sprintf("inspection data received at %v dropped: inspection aborted before it was processed", prev.Args["received_at"]), baremetal.HistoryWarning)
	}
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[intentKey] = intent{Op: opAbort, RequestedAt: c.clock.Now(), Args: map[string]any{"from": string(state)}}.encode()
	msg := abortMessage(state, n)
	if err := t.process(ctx, statemachine.EventAbort, moveOpts{work: true, lastError: msg, keepTarget: true}); err != nil {
		return err
	}
	handed = true
	c.submit(job{uuid: n.UUID, node: n})
	return nil
}

func abortMessage(state statemachine.State, n *baremetal.Node) string {
	switch state {
	case statemachine.CleanWait, statemachine.CleanHold:
		step := "none"
		if n.CleanStep != nil {
			step = fmt.Sprintf("%v.%v", n.CleanStep["interface"], n.CleanStep["step"])
		}
		return fmt.Sprintf("Cleaning aborted by request (step %s was running)", step)
	case statemachine.DeployWait, statemachine.DeployHold:
		return "Deploy aborted by request"
	case statemachine.RescueWait:
		return "Rescue aborted by request"
	case statemachine.InspectWait:
		return "Inspection aborted by request"
	case statemachine.ServiceWait, statemachine.ServiceHold, statemachine.ServiceFailed:
		return ""
	}
	return "Aborted by request"
}

// Unhold releases a node parked by a hold step: clean hold and deploy hold
// go back to waiting for the agent's next heartbeat; service hold resumes
// at once.
func (c *Conductor) Unhold(ctx context.Context, ident string) error {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	if n.ProvisionState == statemachine.ServiceHold {
		return c.accept(ctx, ident, verb{name: "unhold", event: statemachine.EventUnhold, op: opContinueService,
			move: moveOpts{keepTarget: true}})
	}
	return c.accept(ctx, ident, verb{name: "unhold", event: statemachine.EventUnhold, noWork: true,
		move: moveOpts{keepTarget: true}})
}

// SetMaintenance turns maintenance on (with a reason) or off. Turning it
// off also clears the fault.
func (c *Conductor) SetMaintenance(ctx context.Context, ident string, on bool, reason string) error {
	t, err := c.acquire(ctx, ident)
	if err != nil {
		return err
	}
	defer t.release()
	n := t.node
	n.Maintenance = on
	if on {
		n.MaintenanceReason = reason
	} else {
		n.MaintenanceReason, n.Fault = "", ""
	}
	if err := t.save(ctx); err != nil {
		return err
	}
	c.history(ctx, n.UUID, "maintenance", "maintenance", fmt.Sprintf("maintenance set to %t: %s", on, reason), baremetal.HistoryInfo)
	c.publish(Event{Type: EventMaintenance, NodeUUID: n.UUID, NodeName: n.Name, To: n.ProvisionState})
	return nil
}
