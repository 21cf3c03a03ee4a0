package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/configdrive"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/jsonexact"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// Sentinel errors of the verbs, matched with errors.Is; the rich typed
// errors below match them.
var (
	// ErrUpdateInProgress: the node cannot be updated while a transition
	// is in progress.
	ErrUpdateInProgress = errors.New("baremetal: node cannot be updated while a state transition is in progress")
	// ErrDeleteRefused: the node cannot be deleted in its state.
	ErrDeleteRefused = errors.New("baremetal: node cannot be deleted in its state")
	// ErrVerbRefused: the verb is refused for a reason other than the
	// state machine (maintenance, protected, retired, missing input).
	ErrVerbRefused = errors.New("baremetal: verb refused")
)

// VerbError explains why a verb was refused before anything changed. It
// matches ErrVerbRefused, ErrUpdateInProgress or ErrDeleteRefused.
type VerbError struct {
	// Verb is the verb refused ("deploy", "update", "delete", ...).
	Verb string
	// Node is the node's UUID.
	Node string
	// State is the node's provision state.
	State string
	// Reason says what would have been accepted.
	Reason string
	kind   error
}

func (e *VerbError) Error() string {
	return fmt.Sprintf("baremetal: %s of node %s (state %q) refused: %s", e.Verb, e.Node, e.State, e.Reason)
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
		return nil, fmt.Errorf("baremetal: enroll node %s: %w", label, err)
	}
	n.SetInterfaces(ifs)
	if n.ProvisionState != "" && n.ProvisionState != string(statemachine.Enroll) {
		return nil, &baremetal.InvalidFieldError{Kind: "node", Ident: label, Field: "provision_state", Expected: "empty or enroll for a new node"}
	}
	if _, err := statemachine.ParsePowerState(n.PowerState); err != nil {
		return nil, &baremetal.InvalidFieldError{Kind: "node", Ident: label, Field: "power_state",
			Expected: "a known power state, or empty for unknown", Err: err}
	}
	if n.TargetPowerState != "" {
		return nil, &baremetal.InvalidFieldError{Kind: "node", Ident: label, Field: "target_power_state",
			Expected: "empty for a new node (power actions go through SetPowerState)"}
	}
	n.ProvisionState = string(statemachine.Enroll)
	n.TargetProvisionState = ""
	n.Reservation = ""
	if err := c.store.CreateNode(ctx, n); err != nil {
		return nil, err
	}
	c.history(ctx, n.UUID, "node enrolled", "provisioning", fmt.Sprintf("node enrolled with hardware type %s", n.Driver), baremetal.HistoryInfo)
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
	t, err := c.acquire(ctx, ident)
	if err != nil {
		return nil, err
	}
	defer t.release()
	n := t.node
	if !statemachine.NodeUpdatable(statemachine.State(n.ProvisionState), statemachine.State(n.TargetProvisionState)) {
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
	if n.Name != before.Name {
		if err := baremetal.CheckNodeName(n.UUID, n.Name); err != nil {
			return nil, err
		}
	}
	ifs, err := c.drivers.FillDefaults(nodeInterfaces(n))
	if err != nil {
		return nil, fmt.Errorf("baremetal: update node %s: %w", n.UUID, err)
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
func (c *Conductor) Delete(ctx context.Context, ident string) error {
	t, err := c.acquire(ctx, ident)
	if err != nil {
		return err
	}
	n := t.node
	if !statemachine.DeleteAllowed(statemachine.State(n.ProvisionState), !c.opts.RefuseDeletingAvailable) {
		t.release()
		return &VerbError{Verb: "delete", Node: n.UUID, State: n.ProvisionState, kind: ErrDeleteRefused,
			Reason: fmt.Sprintf("allowed in %v", statemachine.DeleteAllowedStates())}
	}
	if n.Associated() {
		t.release()
		return &VerbError{Verb: "delete", Node: n.UUID, State: n.ProvisionState, kind: ErrDeleteRefused, Reason: "an instance is associated"}
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
}

func (c *Conductor) accept(ctx context.Context, ident string, v verb) (err error) {
	defer func() {
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
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	if err := c.checkServed(n); err != nil {
		return err
	}
	if !c.fsm.Allows(statemachine.State(n.ProvisionState), v.event) {
		if n.Reserved() {
			return &baremetal.NodeLockedError{Node: n.UUID, Holder: n.Reservation}
		}
		_, _, err := c.fsm.Process(statemachine.State(n.ProvisionState), v.event)
		return fmt.Errorf("baremetal: %s of node %s: %w", v.name, n.UUID, err)
	}
	// As Ironic's conductor does, the concurrency limit is checked once
	// the transition is known to be valid and before the node is locked,
	// so a refusal leaves the node untouched.
	if err := c.checkActionLimit(ctx, n, v.name, v.limit); err != nil {
		return err
	}
	locked, err := baremetal.AcquireNode(ctx, c.store, n.UUID, c.host, *c.opts.LockPolicy)
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
		v.move.work = true
	}
	if err := t.process(ctx, v.event, v.move); err != nil {
		return err
	}
	if v.noWork {
		return nil
	}
	handed = true
	c.submit(job{uuid: t.node.UUID, kind: jobIntent, node: t.node})
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
	if n.ProvisionState == string(statemachine.Enroll) {
		return c.accept(ctx, ident, verb{name: "manage", event: statemachine.EventManage, op: opVerify})
	}
	return c.accept(ctx, ident, verb{name: "manage", event: statemachine.EventManage, noWork: true})
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
}

// Clean runs a manual clean of the given steps (in their order) on a
// manageable node, which returns to manageable. It is refused with a
// *ConcurrentActionLimitError (ErrConcurrentActionLimit) while
// Options.MaxConcurrentClean nodes are deleting or cleaning.
func (c *Conductor) Clean(ctx context.Context, ident string, cleanSteps []steps.Step, o CleanOptions) error {
	if err := statemachine.VerbClean.Validate(statemachine.VerbInput{Steps: len(cleanSteps)}); err != nil {
		return fmt.Errorf("baremetal: clean of node %s: %w", ident, err)
	}
	raw, err := stepsToJSON(cleanSteps)
	if err != nil {
		return err
	}
	return c.accept(ctx, ident, verb{name: "clean", event: statemachine.EventClean, op: opClean, limit: limitClean,
		args: map[string]any{"clean_steps": raw, "disable_ramdisk": o.DisableRamdisk},
		move: moveOpts{target: statemachine.Manageable},
		check: func(t *task) error {
			return c.validateUserSteps(ctx, t, steps.Clean, cleanSteps, o.DisableRamdisk)
		}})
}

// DeployOptions tune a deploy or a rebuild.
type DeployOptions struct {
	// ConfigDrive is the provision request's configdrive value: a JSON
	// string (a base64 gzipped image or a URL) or an object with
	// meta_data, network_data, user_data and vendor_data.
	ConfigDrive json.RawMessage
	// DeploySteps are user deploy steps merged with the driver's.
	DeploySteps []steps.Step
}

// Deploy deploys an available node (or retries a failed deploy). It is
// refused with a *ConcurrentActionLimitError (ErrConcurrentActionLimit)
// while Options.MaxConcurrentDeploy nodes are deploying: back off and
// retry.
func (c *Conductor) Deploy(ctx context.Context, ident string, o DeployOptions) error {
	return c.deployVerb(ctx, ident, "deploy", statemachine.EventDeploy, o)
}

// Rebuild redeploys an active node (or one in deploy failed or error),
// under the same concurrency limit as Deploy.
func (c *Conductor) Rebuild(ctx context.Context, ident string, o DeployOptions) error {
	return c.deployVerb(ctx, ident, "rebuild", statemachine.EventRebuild, o)
}

func (c *Conductor) deployVerb(ctx context.Context, ident, name string, ev statemachine.Event, o DeployOptions) error {
	// What needs no node is checked before the node is read: the config
	// drive's form (and an image's decoded size) and the user steps
	// against Ironic's request schema.
	cd, err := configdrive.Parse(o.ConfigDrive)
	if err != nil {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "configdrive", Expected: configDriveExpected, Err: err}
	}
	if err := checkDeployStepsSchema(ident, o.DeploySteps); err != nil {
		return err
	}
	raw, err := stepsToJSON(o.DeploySteps)
	if err != nil {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "deploy_steps", Expected: "steps whose arguments are JSON values", Err: err}
	}
	return c.accept(ctx, ident, verb{name: name, event: ev, op: opDeploy, limit: limitDeploy,
		args: map[string]any{"deploy_steps": raw, "rebuild": ev == statemachine.EventRebuild},
		check: func(t *task) error {
			n := t.node
			if n.Maintenance {
				return &VerbError{Verb: name, Node: n.UUID, State: n.ProvisionState, Reason: "the node is in maintenance"}
			}
			if ev == statemachine.EventRebuild && n.Protected {
				return &VerbError{Verb: name, Node: n.UUID, State: n.ProvisionState, Reason: "the node is protected"}
			}
			if err := c.validateDeployRequest(ctx, t, cd, o.DeploySteps); err != nil {
				return err
			}
			if n.InstanceInfo == nil {
				n.InstanceInfo = map[string]any{}
			}
			switch cd.Kind {
			case configdrive.KindImage, configdrive.KindURL:
				n.InstanceInfo["configdrive"] = cd.Image
			case configdrive.KindContents:
				b, err := json.Marshal(cd.Contents)
				if err != nil {
					return &baremetal.InvalidFieldError{Kind: "node", Ident: n.UUID, Field: "configdrive", Expected: configDriveExpected, Err: err}
				}
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					return &baremetal.InvalidFieldError{Kind: "node", Ident: n.UUID, Field: "configdrive", Expected: configDriveExpected, Err: err}
				}
				n.InstanceInfo["configdrive"] = m
			}
			return nil
		}})
}

// configDriveExpected is what a deploy's configdrive is refused with.
const configDriveExpected = "a base64 gzipped ISO 9660 image, an http or https URL, or an object with meta_data, network_data, user_data and vendor_data, of at most 64 MiB"

// checkDeployStepsSchema checks user deploy steps as Ironic's API schema
// does (steps.ParseUserSteps: an interface of the deploying table, a
// non-empty step name, a non-negative priority; nil Args stand for {}),
// and the arguments of reserved steps as the conductor will read them.
func checkDeployStepsSchema(ident string, user []steps.Step) error {
	if len(user) == 0 {
		return nil
	}
	type apiStep struct {
		Interface string         `json:"interface"`
		Step      string         `json:"step"`
		Args      map[string]any `json:"args"`
		Priority  int            `json:"priority"`
	}
	api := make([]apiStep, len(user))
	for i, s := range user {
		args := s.Args
		if args == nil {
			args = map[string]any{}
		}
		api[i] = apiStep{Interface: s.Interface, Step: s.Name, Args: args, Priority: s.Priority}
	}
	b, err := json.Marshal(api)
	if err != nil {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "deploy_steps", Expected: "steps whose arguments are JSON values", Err: err}
	}
	if _, err := steps.ParseUserSteps(steps.Deploy, b); err != nil {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "deploy_steps",
			Expected: "steps with an interface of the deploy table, a step name and a priority of 0 or more", Err: err}
	}
	for _, s := range user {
		if err := steps.CheckReservedArgs(steps.Deploy, s); err != nil {
			return &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "deploy_steps", Expected: "arguments of the types the step reads", Err: err}
		}
	}
	return nil
}

// validateDeployRequest is Ironic's validation in do_node_deploy, before
// the request is accepted: the config drive contents fit in 64 MiB, the
// user deploy steps and the deploy templates matching the instance traits
// are valid for the node's driver (in-band steps are checked again once
// the agent has reported them, as for Clean and Service), and the deploy
// interface's Validate accepts the node as it is about to be deployed
// (direct needs instance_info.image_source). It writes nothing.
func (c *Conductor) validateDeployRequest(ctx context.Context, t *task, cd configdrive.Value, user []steps.Step) error {
	n := t.node
	if cd.Kind == configdrive.KindContents {
		if err := configdrive.CheckSize(configdrive.Node{UUID: n.UUID, Name: n.Name}, *cd.Contents); err != nil {
			return &baremetal.InvalidFieldError{Kind: "node", Ident: n.UUID, Field: "configdrive", Expected: configDriveExpected, Err: err}
		}
	}
	src, err := c.stepSource(ctx, t, steps.Deploy)
	if err != nil {
		return err
	}
	if _, err := c.planner().Deploy(steps.DeployRequest{Source: src, UserSteps: user,
		Templates: c.templates(), InstanceTraits: instanceTraits(n), SkipMissing: c.agentBased(t)}); err != nil {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: n.UUID, Field: "deploy_steps",
			Expected: "steps the node's interfaces provide, with the arguments they declare", Err: err}
	}
	d, err := t.driver()
	if err != nil {
		return err
	}
	dep := d.Deploy()
	if dep == nil {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: n.UUID, Field: "deploy_interface", Expected: "a deploy interface"}
	}
	v, err := t.view(ctx)
	if err != nil {
		return err
	}
	// The view is what the interface will see once deploying; it is
	// discarded, so Validate cannot change the node.
	v.ProvisionState = string(statemachine.Deploying)
	if err := dep.Validate(ctx, v); err != nil {
		var mp *driver.MissingParameterError
		if errors.As(err, &mp) {
			field := mp.Field
			if len(mp.Missing) == 1 {
				field += "." + mp.Missing[0]
			}
			return &baremetal.InvalidFieldError{Kind: "node", Ident: n.UUID, Field: field,
				Expected: "the parameters the " + mp.Impl + " deploy interface requires: " + fmt.Sprint(mp.Missing), Err: err}
		}
		return &baremetal.InvalidFieldError{Kind: "node", Ident: n.UUID, Field: "instance_info",
			Expected: "what the deploy interface's validation accepts", Err: err}
	}
	return nil
}

// Undeploy tears an active (or failed, or rescued) node down; it then goes
// through automated cleaning back to available. It is refused with a
// *ConcurrentActionLimitError (ErrConcurrentActionLimit) while
// Options.MaxConcurrentClean nodes are deleting or cleaning.
func (c *Conductor) Undeploy(ctx context.Context, ident string) error {
	return c.accept(ctx, ident, verb{name: "undeploy", event: statemachine.EventDelete, op: opTearDown, limit: limitClean,
		check: func(t *task) error {
			if t.node.Protected {
				return &VerbError{Verb: "undeploy", Node: t.node.UUID, State: t.node.ProvisionState, Reason: "the node is protected"}
			}
			return nil
		}})
}

// Rescue boots an active node into the rescue ramdisk with the given
// password for the rescue user.
func (c *Conductor) Rescue(ctx context.Context, ident, password string) error {
	if err := statemachine.VerbRescue.Validate(statemachine.VerbInput{RescuePassword: password}); err != nil {
		return fmt.Errorf("baremetal: rescue of node %s: %w", ident, err)
	}
	return c.accept(ctx, ident, verb{name: "rescue", event: statemachine.EventRescue, op: opRescue,
		check: func(t *task) error {
			if t.node.InstanceInfo == nil {
				t.node.InstanceInfo = map[string]any{}
			}
			t.node.InstanceInfo["rescue_password"] = password
			return nil
		}})
}

// Unrescue returns a rescued node to active.
func (c *Conductor) Unrescue(ctx context.Context, ident string) error {
	return c.accept(ctx, ident, verb{name: "unrescue", event: statemachine.EventUnrescue, op: opUnrescue})
}

// ServiceOptions tune a service request.
type ServiceOptions struct {
	// DisableRamdisk runs the steps without booting the agent.
	DisableRamdisk bool
}

// Service runs service steps on an active node, which returns to active.
func (c *Conductor) Service(ctx context.Context, ident string, serviceSteps []steps.Step, o ServiceOptions) error {
	if err := statemachine.VerbService.Validate(statemachine.VerbInput{Steps: len(serviceSteps)}); err != nil {
		return fmt.Errorf("baremetal: service of node %s: %w", ident, err)
	}
	raw, err := stepsToJSON(serviceSteps)
	if err != nil {
		return err
	}
	return c.accept(ctx, ident, verb{name: "service", event: statemachine.EventService, op: opService,
		args: map[string]any{"service_steps": raw, "disable_ramdisk": o.DisableRamdisk},
		check: func(t *task) error {
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
	state := statemachine.State(n.ProvisionState)
	if !c.fsm.Allows(state, statemachine.EventAbort) || state == statemachine.CleanFailed {
		_, _, err := c.fsm.Process(state, statemachine.EventAbort)
		if err == nil {
			err = &VerbError{Verb: "abort", Node: n.UUID, State: n.ProvisionState, Reason: "nothing to abort"}
		}
		c.metrics.verbs.WithLabelValues("abort", "refused").Inc()
		return fmt.Errorf("baremetal: abort of node %s: %w", n.UUID, err)
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
		delete(n.DriverInternalInfo, "agent_url")
	case statemachine.RescueWait:
		delete(n.InstanceInfo, "rescue_password")
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
	if n.ProvisionState == string(statemachine.ServiceHold) {
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

// SetPowerState asks for a power action: power on, power off, rebooting,
// soft power off or soft rebooting. target_power_state is set while it
// runs; timeout 0 means PowerStateChangeTimeout.
func (c *Conductor) SetPowerState(ctx context.Context, ident string, target statemachine.PowerState, timeout time.Duration) error {
	if !statemachine.IsPowerTarget(target) {
		return fmt.Errorf("baremetal: power action on node %s: %w", ident, &statemachine.PowerStateError{Value: string(target), Accepted: statemachine.PowerTargets()})
	}
	if err := c.checkRunning(); err != nil {
		return err
	}
	t, err := c.acquire(ctx, ident)
	if err != nil {
		return err
	}
	n := t.node
	if (target == statemachine.PowerOff || target == statemachine.PowerSoftOff) && n.DisablePowerOff {
		t.release()
		return &VerbError{Verb: "power off", Node: n.UUID, State: n.ProvisionState, Reason: "disable_power_off is set"}
	}
	n.TargetPowerState = string(target)
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	n.DriverInternalInfo[intentKey] = intent{Op: opPower, RequestedAt: c.clock.Now(),
		Args: map[string]any{"target": string(target), "timeout": timeout.String()}}.encode()
	if err := t.save(ctx); err != nil {
		t.release()
		return err
	}
	c.submit(job{uuid: n.UUID, node: n})
	return nil
}

func ensureMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func stepsToJSON(list []steps.Step) ([]any, error) {
	if len(list) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(list)
	if err != nil {
		return nil, fmt.Errorf("baremetal: steps: %w", err)
	}
	var out []any
	// Step arguments keep their numbers exactly (9007199254740993, 1.0).
	if err := jsonexact.Decode(b, &out); err != nil {
		return nil, fmt.Errorf("baremetal: steps: %w", err)
	}
	return out, nil
}

func stepsFromJSON(v any) ([]steps.Step, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out []steps.Step
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// validateUserSteps checks user clean or service steps against the node's
// driver steps (agent steps are validated again once the agent reports);
// a refusal is an *InvalidFieldError on clean_steps or service_steps that
// wraps the planner's error.
func (c *Conductor) validateUserSteps(ctx context.Context, t *task, kind steps.Kind, user []steps.Step, disableRamdisk bool) error {
	src, err := c.stepSource(ctx, t, kind)
	if err != nil {
		return err
	}
	req := steps.ManualRequest{Source: src, Steps: user, DisableRamdisk: disableRamdisk, SkipMissing: c.agentBased(t)}
	if kind == steps.Clean {
		_, err = c.planner().ManualClean(req)
	} else {
		_, err = c.planner().Service(req)
	}
	if err != nil {
		return &baremetal.InvalidFieldError{Kind: "node", Ident: t.uuid(), Field: string(kind) + "_steps",
			Expected: "steps the node's interfaces provide, with the arguments they declare", Err: err}
	}
	return nil
}

// planFailedMessage is the last_error of a clean, deploy or service whose
// steps could not be planned, in Ironic's words (cleaning.py,
// deployments.py and servicing.py of Ironic master): "Cannot clean node
// <uuid>: <why>", "Cannot get deploy steps; failed to deploy: <why>" and
// "Cannot service node <uuid>: <why>".
func planFailedMessage(kind steps.Kind, uuid, why string) string {
	switch kind {
	case steps.Clean:
		return fmt.Sprintf("Cannot clean node %s: %s", uuid, why)
	case steps.Deploy:
		return "Cannot get deploy steps; failed to deploy: " + why
	}
	return fmt.Sprintf("Cannot service node %s: %s", uuid, why)
}
