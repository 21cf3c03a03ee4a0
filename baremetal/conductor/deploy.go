package conductor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/configdrive"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// wipeAgent forgets the agent's URL and token, as Ironic's
// wipe_token_and_url does.
func wipeAgent(n *baremetal.Node) {
	for _, k := range []string{driver.InternalAgentURL, driver.InternalAgentToken, driver.InternalAgentVerifyCA, driver.InternalAgentTokenPregenerated} {
		delete(n.DriverInternalInfo, k)
	}
}

func (c *Conductor) fastTrackable(t *task) bool {
	n := t.node
	enabled := c.agent.FastTrack
	if v, ok := n.DriverInfo["fast_track"]; ok {
		switch x := v.(type) {
		case bool:
			enabled = x
		case string:
			enabled = x == "true" || x == "True" || x == "1"
		}
	}
	return enabled && n.LastError == ""
}

func (c *Conductor) doDeploy(ctx context.Context, t *task, in intent) error {
	t.consumeIntent()
	n := t.node
	_ = steps.Wipe(steps.Deploy, ensureMap(n.DriverInternalInfo))
	n.DriverInternalInfo = ensureMap(n.DriverInternalInfo)
	if user, ok := in.Args["deploy_steps"]; ok && user != nil {
		n.DriverInternalInfo[userStepsKey(steps.Deploy)] = user
	}
	if m, ok := n.InstanceInfo["configdrive"].(map[string]any); ok {
		b, _ := json.Marshal(m)
		v, err := configdrive.Parse(b)
		if err == nil {
			var s string
			s, err = configdrive.Build(ctx, configdrive.Node{UUID: n.UUID, Name: n.Name}, *v.Contents)
			if err == nil {
				n.InstanceInfo["configdrive"] = s
			}
		}
		if err != nil {
			return c.stepsFailed(ctx, t, steps.Deploy, fmt.Sprintf("Failed to build the config drive for node %s: %s", n.UUID, describeErr(err)), false)
		}
	}
	if err := c.switchDeployInterface(ctx, t); err != nil {
		return c.stepsFailed(ctx, t, steps.Deploy, fmt.Sprintf("Failed to prepare to deploy: %s", describeErr(err)), false)
	}
	c.dropStaleAgent(ctx, t)
	// Preparing reads the node's ports: a database outage delays it
	// rather than failing the deploy.
	err := c.retryStoreCall(ctx, t, "preparing to deploy", func() error {
		return callIface(ctx, t, driver.KindDeploy, "prepare to deploy", func(d *driver.Driver, dep driver.DeployInterface, v *driver.Task) error {
			if err := dep.Validate(ctx, v); err != nil {
				return err
			}
			return dep.Prepare(ctx, v)
		})
	})
	if err != nil {
		return c.stepsFailed(ctx, t, steps.Deploy, fmt.Sprintf("Failed to prepare to deploy: %s", describeErr(err)), false)
	}
	// This conductor prepared the node's local state (Ironic's
	// do_node_deploy records conductor_affinity), so syncLocalState on
	// another owner re-prepares it only if that is a different conductor.
	if c.record != nil {
		n.ConductorAffinity = c.record.ID
	}
	return c.planAndRun(ctx, t, steps.Deploy)
}

func (c *Conductor) doTearDown(ctx context.Context, t *task) error {
	t.consumeIntent()
	n := t.node
	// An enabled console is stopped, not disabled: it is not exposed to
	// the next instance's user until the next deploy starts it again.
	if err := c.parkConsole(ctx, t); err != nil {
		msg := fmt.Sprintf("Failed to tear down. Error: %s", describeErr(err))
		t.fail(ctx, msg, false)
		return err
	}
	if url, _ := n.DriverInternalInfo[driver.InternalAgentURL].(string); url != "" && n.PowerState == driver.PowerOn && !n.DisablePowerOff {
		// An agent still runs (a failed deploy): shut it down in
		// Ironic's order before the node is torn down and rebooted.
		if err := c.retryStoreCall(ctx, t, "shutting the agent down", func() error { return c.powerOffAgent(ctx, t) }); err != nil {
			msg := fmt.Sprintf("Failed to tear down. Error: %s", describeErr(err))
			t.fail(ctx, msg, false)
			return err
		}
	}
	if (c.agentBased(t) || c.ramdiskDeploy(t)) && !n.DisablePowerOff && n.PowerState != driver.PowerOff {
		// Ironic's agent deploy tear_down powers the instance off first:
		// cleaning then boots the ramdisk afresh. Left running, an
		// instance without an agent would pass for a fast-track agent
		// soon after an inspection, and cleaning would wait for its
		// heartbeat.
		if err := c.retryStoreCall(ctx, t, "powering the instance off", func() error { return c.powerAction(ctx, t, driver.PowerOff, 0) }); err != nil {
			msg := fmt.Sprintf("Failed to tear down. Error: %s", describeErr(err))
			t.fail(ctx, msg, false)
			return err
		}
	}
	// The tear-down reads the node's ports: a database outage delays it
	// (the node stays held) rather than failing the node.
	err := c.retryStoreCall(ctx, t, "tearing the instance down", func() error {
		return callIface(ctx, t, driver.KindDeploy, "tear down", func(d *driver.Driver, dep driver.DeployInterface, v *driver.Task) error {
			if err := dep.TearDown(ctx, v); err != nil {
				return err
			}
			if b := d.Boot(); b != nil {
				if err := b.CleanUpInstance(ctx, v); err != nil {
					return err
				}
			}
			return dep.CleanUp(ctx, v)
		})
	})
	if err == nil && n.DisablePowerOff && (c.agentBased(t) || c.ramdiskDeploy(t)) {
		// The node could not be powered off above: it is rebooted once
		// the instance's boot is cleaned up, so that it no longer runs
		// the instance (Ironic's AgentBaseMixin.clean_up).
		err = c.powerAction(ctx, t, driver.Reboot, 0)
	}
	if err != nil {
		msg := fmt.Sprintf("Failed to tear down. Error: %s", describeErr(err))
		t.fail(ctx, msg, false)
		return err
	}
	_ = t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		if p := d.Power(); p != nil {
			if ps, err := p.GetPowerState(ctx, v); err == nil {
				n.PowerState = ps
			}
		}
		return nil
	})
	c.restoreDeployInterface(t)
	n.InstanceInfo = map[string]any{}
	c.dropAllocation(ctx, n)
	n.InstanceUUID = ""
	wipeAgent(n)
	_ = steps.Wipe(steps.Deploy, n.DriverInternalInfo)
	n.DeployStep = map[string]any{}
	if err := t.process(ctx, statemachine.EventClean, moveOpts{work: true}); err != nil {
		return err
	}
	return c.startSteps(ctx, t, steps.Clean, nil, false)
}

// assistDeployStep does the cross-interface part of the direct deploy
// interface's steps, as Ironic's agent deploy does through task.driver.
func (c *Conductor) assistDeployStep(ctx context.Context, t *task, step string) error {
	switch step {
	case "prepare_instance_boot":
		// It reads the node's ports: a database outage delays it rather
		// than failing the step.
		return c.retryStoreCall(ctx, t, "preparing the instance's boot", func() error {
			return t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
				if b := d.Boot(); b != nil {
					if err := b.PrepareInstance(ctx, v); err != nil {
						return err
					}
				}
				if m := d.Management(); m != nil {
					return m.SetBootDevice(ctx, v, driver.BootDisk, true)
				}
				return nil
			})
		})
	case "tear_down_agent":
		if t.node.DisablePowerOff {
			// The node cannot be powered off: the agent is locked down
			// instead and the node keeps running until boot_instance
			// reboots it (Ironic's tear_down_agent).
			if err := c.lockdownAgent(ctx, t, true); err != nil {
				return err
			}
		} else if err := c.powerOffAgent(ctx, t); err != nil {
			return err
		}
		return t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			if b := d.Boot(); b != nil {
				return b.CleanUpRamdisk(ctx, v)
			}
			return nil
		})
	case "switch_to_tenant_network":
		return t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
			if nw := d.Network(); nw != nil {
				if err := nw.RemoveNetwork(ctx, v, driver.NetworkProvisioning); err != nil {
					return err
				}
				return nw.AddNetwork(ctx, v, driver.NetworkTenant)
			}
			return nil
		})
	case "boot_instance":
		if t.node.DisablePowerOff {
			// Never powered off: reset into the instance.
			return c.powerAction(ctx, t, driver.Reboot, 0)
		}
		return c.powerAction(ctx, t, driver.PowerOn, 0)
	}
	return nil
}

// bootRamdiskInstance boots the instance of a ramdisk deploy, as
// Ironic's RamdiskDeploy.deploy: power off (unless disable_power_off),
// tenant network, the boot interface's instance boot, power on (a reboot
// with disable_power_off).
func (c *Conductor) bootRamdiskInstance(ctx context.Context, t *task) error {
	n := t.node
	if !n.DisablePowerOff && n.PowerState != driver.PowerOff {
		if err := c.powerAction(ctx, t, driver.PowerOff, 0); err != nil {
			return err
		}
	}
	err := t.call(ctx, func(d *driver.Driver, v *driver.Task) error {
		if nw := d.Network(); nw != nil {
			if err := nw.RemoveNetwork(ctx, v, driver.NetworkProvisioning); err != nil {
				return err
			}
			if err := nw.AddNetwork(ctx, v, driver.NetworkTenant); err != nil {
				return err
			}
		}
		if b := d.Boot(); b != nil {
			return b.PrepareInstance(ctx, v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n.DisablePowerOff {
		return c.powerAction(ctx, t, driver.Reboot, 0)
	}
	return c.powerAction(ctx, t, driver.PowerOn, 0)
}

// DeployOptions tune a deploy or a rebuild.
type DeployOptions struct {
	// ConfigDrive is the provision request's configdrive value: a JSON
	// string (a base64 gzipped image or a URL) or an object with
	// meta_data, network_data, user_data and vendor_data.
	ConfigDrive json.RawMessage
	// ConfigDriveText is the alternative to ConfigDrive for a string
	// config drive too large to hold twice (configdrive.ParseText): the
	// string's text, already decoded from JSON, read from its start. The
	// image is checked as it streams and read whole only once it
	// passes, into the node's instance_info; Deploy and Rebuild are done
	// with it when they return. Set at most one of the two.
	ConfigDriveText io.ReadSeeker
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
	cd, err := parseConfigDrive(o)
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
				return &VerbError{Verb: name, Node: n.UUID, State: n.ProvisionState, kind: ErrNodeProtected, Reason: "the node is protected"}
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

// parseConfigDrive parses the config drive of o, from ConfigDrive or
// ConfigDriveText.
func parseConfigDrive(o DeployOptions) (configdrive.Value, error) {
	if o.ConfigDriveText == nil {
		return configdrive.Parse(o.ConfigDrive)
	}
	if t := bytes.TrimSpace(o.ConfigDrive); len(t) > 0 && string(t) != "null" {
		return configdrive.Value{}, errors.New("both ConfigDrive and ConfigDriveText are set")
	}
	return configdrive.ParseText(o.ConfigDriveText)
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
	// Autodetect picks the real deploy interface now, before the
	// request is validated against it (Ironic's do_node_deploy).
	if err := c.switchDeployInterface(ctx, t); err != nil {
		return err
	}
	if cd.Kind == configdrive.KindContents {
		if err := configdrive.CheckSize(configdrive.Node{UUID: n.UUID, Name: n.Name}, *cd.Contents); err != nil {
			return &baremetal.InvalidFieldError{Kind: "node", Ident: n.UUID, Field: "configdrive", Expected: configDriveExpected, Err: err}
		}
	}
	src, err := c.stepSource(ctx, t, steps.Deploy)
	if err != nil {
		return err
	}
	tpls, err := c.templates(ctx, n)
	if err != nil {
		return err
	}
	if _, err := c.planner().Deploy(steps.DeployRequest{Source: src, UserSteps: user,
		Templates: tpls, InstanceTraits: instanceTraits(n), SkipMissing: c.agentBased(t)}); err != nil {
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
	v.ProvisionState = statemachine.Deploying
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
				return &VerbError{Verb: "undeploy", Node: t.node.UUID, State: t.node.ProvisionState, kind: ErrNodeProtected, Reason: "the node is protected"}
			}
			return nil
		}})
}
