package agentdeploy

import (
	"context"
	"fmt"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/steps"
)

// Name is the implementation name of the direct deploy interface.
const Name = "direct"

// The deploy steps of the direct interface with their priorities
// (reference §3.8).
const (
	StepDeploy                = "deploy"
	StepWriteImage            = "write_image"
	StepPrepareInstanceBoot   = "prepare_instance_boot"
	StepTearDownAgent         = "tear_down_agent"
	StepSwitchToTenantNetwork = "switch_to_tenant_network"
	StepBootInstance          = "boot_instance"
)

// Driver internal info keys the direct interface reads and writes.
const (
	// DeploymentRebootKey is set while the node boots into the ramdisk
	// for the deploy (Ironic's deployment_reboot).
	DeploymentRebootKey = "deployment_reboot"
	// ImageWrittenKey records that write_image finished on the agent.
	ImageWrittenKey = "anvil_image_written"
)

// Direct is Ironic's "direct" deploy interface: the ramdisk agent writes
// the image itself (deploy.write_image in-band), and the interface's own
// deploy steps bracket it. The cross-interface work Ironic's deploy
// interface does (booting the ramdisk, powering the node, switching
// networks) is carried out by the conductor, which recognises an
// agent-based deploy interface through AgentBased and the steps' names.
//
// Direct is stateless: everything it needs comes in the Task (agent URL and
// token in driver_internal_info, image and config drive in instance_info).
type Direct struct {
	client *agentclient.Client
}

// New returns the direct deploy interface talking to agents through
// client.
func New(client *agentclient.Client) *Direct { return &Direct{client: client} }

// AgentBased reports that this interface runs steps in-band through the
// agent.
func (*Direct) AgentBased() bool { return true }

// Properties returns the driver_info properties direct reads (none
// required; the boot interface reads the ramdisk's location).
func (*Direct) Properties() []driver.Property {
	return []driver.Property{
		{Name: "fast_track", Description: "Whether fast track is enabled for the node (\"true\"/\"false\"); default from the conductor. Optional."},
	}
}

// Validate requires instance_info.image_source when the node is being
// deployed.
func (*Direct) Validate(ctx context.Context, t *driver.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.ProvisionState == "deploying" {
		if _, ok := t.InstanceString("image_source"); !ok {
			return &driver.MissingParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: Name, Field: "instance_info", Missing: []string{"image_source"}}
		}
	}
	return nil
}

// Prepare clears the record of a previous deployment.
func (*Direct) Prepare(_ context.Context, t *driver.Task) error {
	t.DeleteDriverInternalInfo(ImageWrittenKey)
	return nil
}

// Deploy is the core deploy step: the node must boot into the ramdisk, so
// it asks the conductor to reboot it (RebootRequested) and to wait for the
// agent (Wait), unless the agent is already up (fast track).
func (d *Direct) Deploy(_ context.Context, t *driver.Task) (driver.StepResult, error) {
	if url, ok := t.InternalString("agent_url"); ok && url != "" {
		if _, tok := t.InternalString("agent_secret_token"); tok {
			return driver.StepResult{}, nil
		}
	}
	t.SetDriverInternalInfo(DeploymentRebootKey, true)
	return driver.StepResult{Wait: true, RebootRequested: true}, nil
}

// TearDown removes the deployment; the conductor powers the node off.
func (*Direct) TearDown(_ context.Context, t *driver.Task) error {
	t.DeleteDriverInternalInfo(ImageWrittenKey)
	return nil
}

// CleanUp forgets what Prepare set up.
func (*Direct) CleanUp(_ context.Context, t *driver.Task) error {
	t.DeleteDriverInternalInfo(DeploymentRebootKey)
	return nil
}

// TakeOver has nothing to re-establish: direct keeps no local state.
func (*Direct) TakeOver(context.Context, *driver.Task) error { return nil }

// PrepareSteps asks the conductor to boot the ramdisk and wait for the
// agent before clean or service steps, unless the agent is already up.
func (*Direct) PrepareSteps(_ context.Context, t *driver.Task, _ steps.Kind) (driver.StepResult, error) {
	if url, ok := t.InternalString("agent_url"); ok && url != "" {
		if _, tok := t.InternalString("agent_secret_token"); tok {
			return driver.StepResult{}, nil
		}
	}
	return driver.StepResult{Wait: true, RebootRequested: true}, nil
}

// TearDownSteps has nothing of its own to tear down; the conductor powers
// the node off and cleans up the ramdisk boot.
func (*Direct) TearDownSteps(context.Context, *driver.Task, steps.Kind) error { return nil }

// Steps returns the direct interface's deploy steps.
func (*Direct) Steps(kind steps.Kind) []steps.Step {
	if kind != steps.Deploy {
		return nil
	}
	mk := func(name string, prio int) steps.Step {
		return steps.MustDeclare(steps.Deploy, string(driver.KindDeploy), name, prio)
	}
	return []steps.Step{
		mk(StepDeploy, 100), mk(StepWriteImage, 80), mk(StepPrepareInstanceBoot, 60),
		mk(StepTearDownAgent, 40), mk(StepSwitchToTenantNetwork, 30), mk(StepBootInstance, 20),
	}
}

// ExecuteStep runs one of the direct interface's deploy steps.
// write_image proxies to the agent's in-band step of the same name and
// waits for it; the others finish at once (the conductor does their
// cross-interface part).
func (d *Direct) ExecuteStep(ctx context.Context, t *driver.Task, kind steps.Kind, s steps.Step) (driver.StepResult, error) {
	if kind != steps.Deploy {
		return driver.StepResult{}, &driver.StepNotFoundError{Kind: driver.KindDeploy, Impl: Name, StepKind: string(kind), Step: s.Name}
	}
	switch s.Name {
	case StepDeploy:
		return d.Deploy(ctx, t)
	case StepWriteImage:
		return d.writeImage(ctx, t)
	case StepPrepareInstanceBoot, StepSwitchToTenantNetwork, StepBootInstance:
		return driver.StepResult{}, nil
	case StepTearDownAgent:
		t.DeleteDriverInternalInfo(DeploymentRebootKey)
		return driver.StepResult{}, nil
	}
	return driver.StepResult{}, &driver.StepNotFoundError{Kind: driver.KindDeploy, Impl: Name, StepKind: string(kind), Step: s.Name}
}

// StepRerunSafe reports which of the direct interface's deploy steps may
// run again on a new conductor after the one running them died (the
// baremetal conductor's RerunSafeStepper): deploy (boot into the ramdisk),
// prepare_instance_boot, switch_to_tenant_network, boot_instance and
// tear_down_agent converge however often they run, since their work is a
// power action, a boot device or a network binding set to the same value.
// write_image is not: the agent may still be writing the image, and a
// second write would race the first.
func (*Direct) StepRerunSafe(kind steps.Kind, step string) bool {
	if kind != steps.Deploy {
		return false
	}
	switch step {
	case StepDeploy, StepPrepareInstanceBoot, StepSwitchToTenantNetwork, StepBootInstance, StepTearDownAgent:
		return true
	}
	return false
}

// StepHandsOffToAgent reports the direct interface's steps whose only
// work is to hand a command to the agent (the baremetal conductor's
// AgentHandoffStepper): write_image, which sends the agent
// deploy.execute_deploy_step. A new owner re-runs it after a takeover
// when the agent never received it.
func (*Direct) StepHandsOffToAgent(kind steps.Kind, step string) bool {
	return kind == steps.Deploy && step == StepWriteImage
}

// ImageInfo builds the image_info argument of the agent's write_image
// step from instance_info.
func ImageInfo(t *driver.Task) map[string]any {
	info := map[string]any{"id": t.NodeUUID}
	for _, k := range []string{"image_source", "image_url", "image_checksum", "image_os_hash_algo", "image_os_hash_value",
		"image_disk_format", "image_container_format", "root_gb", "swap_mb", "ephemeral_mb"} {
		if v, ok := t.InstanceInfo[k]; ok {
			info[k] = v
		}
	}
	if src, ok := t.InstanceString("image_source"); ok {
		if _, has := info["image_url"]; !has {
			info["urls"] = []any{src}
		}
	}
	if _, ok := info["image_disk_format"]; !ok {
		info["disk_format"] = "raw"
	}
	info["stream_raw_images"] = true
	return info
}

func (d *Direct) writeImage(ctx context.Context, t *driver.Task) (driver.StepResult, error) {
	if d.client == nil {
		return driver.StepResult{}, fmt.Errorf("deploy/direct: node %s: no agent client", t.NodeUUID)
	}
	url, _ := t.InternalString("agent_url")
	tok, _ := t.InternalString("agent_secret_token")
	ca, _ := t.InternalString("agent_verify_ca")
	if url == "" {
		return driver.StepResult{}, fmt.Errorf("deploy/direct: node %s: %w: no agent URL recorded", t.NodeUUID, agentclient.ErrConnectionFailed)
	}
	args := map[string]any{"image_info": ImageInfo(t)}
	if cd, ok := t.InstanceInfo["configdrive"]; ok {
		args["configdrive"] = cd
	}
	step := steps.Step{Interface: string(driver.KindDeploy), Name: StepWriteImage, Args: args, Priority: 80}
	node := map[string]any{"uuid": t.NodeUUID, "instance_info": map[string]any{"configdrive": t.InstanceInfo["configdrive"]}}
	version := map[string]string{}
	if raw, ok := t.DriverInternalInfo[steps.HardwareManagerVersionKey].(map[string]any); ok {
		for k, v := range raw {
			version[k] = fmt.Sprint(v)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := d.client.ExecuteDeployStep(cctx, agentclient.Agent{NodeUUID: t.NodeUUID, URL: url, Token: tok, VerifyCA: ca}, step, node, nil, version); err != nil {
		return driver.StepResult{}, fmt.Errorf("deploy/direct: write_image on node %s: %w", t.NodeUUID, err)
	}
	return driver.StepResult{Wait: true}, nil
}

var (
	_ driver.DeployInterface = (*Direct)(nil)
	_ driver.StepPreparer    = (*Direct)(nil)
	_ driver.StepProvider    = (*Direct)(nil)
	_ driver.StepRunner      = (*Direct)(nil)
)
