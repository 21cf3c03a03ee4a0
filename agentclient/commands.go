package agentclient

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/anvilmetal/anvil/steps"
)

// Full names of the commands Ironic sends to the agent.
const (
	CmdGetCleanSteps      = "clean.get_clean_steps"
	CmdExecuteCleanStep   = "clean.execute_clean_step"
	CmdGetDeploySteps     = "deploy.get_deploy_steps"
	CmdExecuteDeployStep  = "deploy.execute_deploy_step"
	CmdGetServiceSteps    = "service.get_service_steps"
	CmdExecuteServiceStep = "service.execute_service_step"
	CmdInstallBootloader  = "image.install_bootloader"
	CmdGetPartitionUUIDs  = "standby.get_partition_uuids"
	CmdPowerOff           = "standby.power_off"
	CmdRunImage           = "standby.run_image"
	CmdSync               = "standby.sync"
	CmdCollectSystemLogs  = "log.collect_system_logs"
	CmdFinalizeRescue     = "rescue.finalize_rescue"
	CmdLockdown           = "system.lockdown"
)

// CallOptions say how Call runs a command.
type CallOptions struct {
	// Wait asks the agent to answer only when the command has finished
	// (wait=true).
	Wait bool
	// Poll sends the command asynchronously and then polls the command
	// list until it finishes (Ironic's poll=True).
	Poll bool
}

// Call runs any agent command by its full "<extension>.<command>" name. It
// is the generic form of the typed methods.
func (c *Client) Call(ctx context.Context, a Agent, name string, params map[string]any, opts CallOptions) (*CommandResult, error) {
	r, err := c.ExecuteCommand(ctx, a, name, params, opts.Wait && !opts.Poll)
	if err != nil || !opts.Poll || r.Status.Done() {
		return r, err
	}
	return c.WaitForCommand(ctx, a, name)
}

// stepParams builds the parameters Ironic sends with every step command:
// the node (secrets already masked by the caller, except the configdrive
// for deploy steps) and its ports.
func stepParams(node map[string]any, ports []map[string]any) map[string]any {
	if node == nil {
		node = map[string]any{}
	}
	if ports == nil {
		ports = []map[string]any{}
	}
	return map[string]any{"node": node, "ports": ports}
}

// getSteps runs a get_<kind>_steps command and decodes its result.
func (c *Client) getSteps(ctx context.Context, a Agent, kind steps.Kind, node map[string]any, ports []map[string]any) (StepsResult, error) {
	name := string(kind) + ".get_" + string(kind) + "_steps"
	r, err := c.ExecuteCommand(ctx, a, name, stepParams(node, ports), true)
	if err != nil {
		return StepsResult{}, err
	}
	return DecodeStepsResult(kind, r)
}

// DecodeStepsResult decodes the result of a get_<kind>_steps command:
// {"<kind>_steps": {"<Manager>": [steps]}, "hardware_manager_version": {…}}.
// Each returned step carries the interface and name the agent declared.
func DecodeStepsResult(kind steps.Kind, r *CommandResult) (StepsResult, error) {
	var all map[string]json.RawMessage
	if err := r.DecodeResult(&all); err != nil {
		return StepsResult{}, err
	}
	out := StepsResult{Steps: map[string][]steps.Step{}, HardwareManagerVersion: map[string]string{}}
	key := string(kind) + "_steps"
	var byManager map[string][]steps.Step
	if b, ok := all[key]; ok {
		if err := json.Unmarshal(b, &byManager); err != nil {
			return StepsResult{}, fmt.Errorf("%w: %s: %s must map hardware manager names to step lists: %v", ErrAgentAPI, r.Name, key, err)
		}
	}
	for mgr, list := range byManager {
		for i, s := range list {
			if s.Interface == "" || s.Name == "" {
				return StepsResult{}, fmt.Errorf("%w: %s: step %d of %s lacks interface or step name", ErrAgentAPI, r.Name, i, mgr)
			}
		}
		out.Steps[mgr] = list
	}
	var versions map[string]any
	if b, ok := all["hardware_manager_version"]; ok {
		if err := json.Unmarshal(b, &versions); err != nil {
			return StepsResult{}, fmt.Errorf("%w: %s: hardware_manager_version must be an object: %v", ErrAgentAPI, r.Name, err)
		}
	}
	for k, v := range versions {
		switch t := v.(type) {
		case string:
			out.HardwareManagerVersion[k] = t
		case float64:
			out.HardwareManagerVersion[k] = strconv.FormatFloat(t, 'f', -1, 64)
		default:
			return StepsResult{}, fmt.Errorf("%w: %s: hardware_manager_version[%q] is not a string", ErrAgentAPI, r.Name, k)
		}
	}
	return out, nil
}

// DecodeStepResult decodes the result of an execute_<kind>_step command:
// {"<kind>_result": …, "<kind>_step": {…}}.
func DecodeStepResult(kind steps.Kind, r *CommandResult) (StepResult, error) {
	var all map[string]json.RawMessage
	if err := r.DecodeResult(&all); err != nil {
		return StepResult{}, err
	}
	var out StepResult
	if b, ok := all[string(kind)+"_step"]; ok && string(b) != "null" {
		if err := json.Unmarshal(b, &out.Step); err != nil {
			return StepResult{}, fmt.Errorf("%w: %s: %s_step: %v", ErrAgentAPI, r.Name, kind, err)
		}
	}
	out.Result = all[string(kind)+"_result"]
	return out, nil
}

// versionParams converts hardware manager versions for the wire.
func versionParams(v map[string]string) map[string]any {
	out := make(map[string]any, len(v))
	for k, s := range v {
		out[k] = s
	}
	return out
}

// executeStep starts an execute_<kind>_step command asynchronously.
func (c *Client) executeStep(ctx context.Context, a Agent, kind steps.Kind, step steps.Step, node map[string]any, ports []map[string]any, version map[string]string) (*CommandResult, error) {
	if step.Interface == "" || step.Name == "" {
		return nil, fmt.Errorf("%w: agentclient: node %s: %s step needs an interface and a name", ErrInvalidArgument, orUnknown(a.NodeUUID), kind)
	}
	p := stepParams(node, ports)
	p["step"] = step
	p[string(kind)+"_version"] = versionParams(version)
	return c.ExecuteCommand(ctx, a, string(kind)+".execute_"+string(kind)+"_step", p, false)
}

// GetCleanSteps asks the agent for its clean steps (clean.get_clean_steps,
// synchronous). node is the node dictionary with secrets masked.
func (c *Client) GetCleanSteps(ctx context.Context, a Agent, node map[string]any, ports []map[string]any) (StepsResult, error) {
	return c.getSteps(ctx, a, steps.Clean, node, ports)
}

// ExecuteCleanStep starts a clean step (clean.execute_clean_step,
// asynchronous); version is the hardware_manager_version recorded when the
// steps were fetched. The result is RUNNING; the outcome is read from the
// command list on a later heartbeat.
func (c *Client) ExecuteCleanStep(ctx context.Context, a Agent, step steps.Step, node map[string]any, ports []map[string]any, version map[string]string) (*CommandResult, error) {
	return c.executeStep(ctx, a, steps.Clean, step, node, ports, version)
}

// GetDeploySteps asks the agent for its deploy steps
// (deploy.get_deploy_steps, synchronous).
func (c *Client) GetDeploySteps(ctx context.Context, a Agent, node map[string]any, ports []map[string]any) (StepsResult, error) {
	return c.getSteps(ctx, a, steps.Deploy, node, ports)
}

// ExecuteDeployStep starts a deploy step (deploy.execute_deploy_step,
// asynchronous). Unlike other commands the node's configdrive is sent
// unmasked, because write_image needs it.
func (c *Client) ExecuteDeployStep(ctx context.Context, a Agent, step steps.Step, node map[string]any, ports []map[string]any, version map[string]string) (*CommandResult, error) {
	return c.executeStep(ctx, a, steps.Deploy, step, node, ports, version)
}

// GetServiceSteps asks the agent for its service steps
// (service.get_service_steps, synchronous). An agent too old to know the
// service extension yields an empty result, as in Ironic.
func (c *Client) GetServiceSteps(ctx context.Context, a Agent, node map[string]any, ports []map[string]any) (StepsResult, error) {
	res, err := c.getSteps(ctx, a, steps.Service, node, ports)
	var ae *APIError
	if errors.As(err, &ae) && !errors.Is(err, ErrAgentBusy) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusBadRequest) {
		return StepsResult{Steps: map[string][]steps.Step{}, HardwareManagerVersion: map[string]string{}}, nil
	}
	return res, err
}

// ExecuteServiceStep starts a service step (service.execute_service_step,
// asynchronous).
func (c *Client) ExecuteServiceStep(ctx context.Context, a Agent, step steps.Step, node map[string]any, ports []map[string]any, version map[string]string) (*CommandResult, error) {
	return c.executeStep(ctx, a, steps.Service, step, node, ports, version)
}

// InstallBootloader installs the bootloader on the written disk
// (image.install_bootloader), polling until it finishes. An agent that
// rejects target_boot_mode as an unknown parameter (its command_error
// names the parameter) gets the call again
// without it, as Ironic does for old agents.
func (c *Client) InstallBootloader(ctx context.Context, a Agent, args InstallBootloaderArgs) (*CommandResult, error) {
	p := map[string]any{
		"root_uuid":            nullable(args.RootUUID), // none for a whole-disk image
		"efi_system_part_uuid": nullable(args.EFISystemPartUUID),
		"prep_boot_part_uuid":  nullable(args.PRePBootPartUUID),
	}
	if args.TargetBootMode != "" {
		p["target_boot_mode"] = args.TargetBootMode
	}
	r, err := c.Call(ctx, a, CmdInstallBootloader, p, CallOptions{Poll: true})
	if err != nil && args.TargetBootMode != "" && !(args.SoftwareRAID && args.TargetBootMode == "uefi") && r != nil && r.Error != nil && strings.Contains(r.Error.String(), "target_boot_mode") {
		delete(p, "target_boot_mode")
		return c.Call(ctx, a, CmdInstallBootloader, p, CallOptions{Poll: true})
	}
	return r, err
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// GetPartitionUUIDs returns the partition UUIDs of the image the agent
// wrote (standby.get_partition_uuids, synchronous).
func (c *Client) GetPartitionUUIDs(ctx context.Context, a Agent) (PartitionUUIDs, error) {
	r, err := c.ExecuteCommand(ctx, a, CmdGetPartitionUUIDs, map[string]any{}, true)
	if err != nil {
		return PartitionUUIDs{}, err
	}
	var all map[string]any
	if err := r.DecodeResult(&all); err != nil {
		return PartitionUUIDs{}, err
	}
	get := func(k string) string { s, _ := all[k].(string); return s }
	if all == nil {
		all = map[string]any{}
	}
	return PartitionUUIDs{
		Root:               get("root uuid"),
		EFISystemPartition: get("efi system partition uuid"),
		PReP:               get("PReP Boot partition uuid"),
		All:                all,
	}, nil
}

// PowerOff asks the agent to power the machine off (standby.power_off,
// asynchronous). The agent disappears once it is done.
func (c *Client) PowerOff(ctx context.Context, a Agent) (*CommandResult, error) {
	return c.ExecuteCommand(ctx, a, CmdPowerOff, map[string]any{}, false)
}

// Reboot asks the agent to reboot the machine into the written image
// (standby.run_image, asynchronous).
func (c *Client) Reboot(ctx context.Context, a Agent) (*CommandResult, error) {
	return c.ExecuteCommand(ctx, a, CmdRunImage, map[string]any{}, false)
}

// Sync flushes the machine's disks (standby.sync, synchronous), done
// before an out-of-band power off.
func (c *Client) Sync(ctx context.Context, a Agent) (*CommandResult, error) {
	return c.ExecuteCommand(ctx, a, CmdSync, map[string]any{}, true)
}

// CollectSystemLogs fetches the ramdisk's logs (log.collect_system_logs,
// synchronous) and returns the decoded archive (gzip-compressed tar).
func (c *Client) CollectSystemLogs(ctx context.Context, a Agent) ([]byte, error) {
	r, err := c.ExecuteCommand(ctx, a, CmdCollectSystemLogs, map[string]any{}, true)
	if err != nil {
		return nil, err
	}
	var res struct {
		SystemLogs string `json:"system_logs"`
	}
	if err := r.DecodeResult(&res); err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(res.SystemLogs)
	if err != nil {
		return nil, fmt.Errorf("%w: node %s: system_logs is not base64: %v", ErrAgentAPI, orUnknown(a.NodeUUID), err)
	}
	return b, nil
}

// FinalizeRescue sets the rescue password and finishes the rescue
// (rescue.finalize_rescue with hashed=true, which IPA runs
// synchronously: the answer is SUCCEEDED or FAILED, and the agent then
// stops serving its API). hashedPassword is the password's crypt hash
// (instance_info.hashed_rescue_password, "$5$..." or "$6$..."), which
// IPA writes to /etc/ipa-rescue-config/ipa-rescue-password for the
// ramdisk to set as the rescue user's; it is a secret.
func (c *Client) FinalizeRescue(ctx context.Context, a Agent, hashedPassword string) (*CommandResult, error) {
	return c.ExecuteCommand(ctx, a, CmdFinalizeRescue, map[string]any{"rescue_password": hashedPassword, "hashed": true}, false)
}

// Lockdown asks the agent to lock the machine down instead of powering it
// off (system.lockdown, asynchronous); the agent stops answering after it.
func (c *Client) Lockdown(ctx context.Context, a Agent) (*CommandResult, error) {
	return c.ExecuteCommand(ctx, a, CmdLockdown, map[string]any{}, false)
}
