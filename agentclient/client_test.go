package agentclient_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/steps"
)

const testToken = "Jb7iJ2V1q1sA0Gzh0nU4dXCmz1Y6-5uZC7J0wZq3o5A"

type agentEnv struct {
	srv    *agenttest.Server
	agent  *agenttest.Agent
	client *agentclient.Client
	target agentclient.Agent
}

// newAgentEnv serves a fake agent on a TLS loopback server, optionally
// behind wrap, and returns a client and the target pinned to the server's
// certificate.
func newAgentEnv(t *testing.T, acfg agenttest.AgentConfig, ccfg agentclient.ClientConfig, wrap func(http.Handler) http.Handler) *agentEnv {
	t.Helper()
	srv, err := agenttest.NewServer(agenttest.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if acfg.Token == "" {
		acfg.Token = testToken
	}
	a := agenttest.NewAgent(acfg)
	t.Cleanup(a.Close)
	var h http.Handler = a
	if wrap != nil {
		h = wrap(a)
	}
	u, err := srv.Register(nodeID, h)
	if err != nil {
		t.Fatal(err)
	}
	if ccfg.CommandWaitInterval == 0 {
		ccfg.CommandWaitInterval = 5 * time.Millisecond
	}
	c, err := agentclient.NewClient(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &agentEnv{srv: srv, agent: a, client: c, target: agentclient.Agent{NodeUUID: nodeID, URL: u, Token: testToken, VerifyCA: srv.CertPEM()}}
}

// newConnectionRoundTrip is the longest of three ListCommands calls to
// a fake agent, each on a new client (a new connection and TLS
// handshake): the baseline of timing bounds on this machine now.
func newConnectionRoundTrip(t *testing.T) time.Duration {
	t.Helper()
	e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
	var worst time.Duration
	for range 3 {
		c, err := agentclient.NewClient(agentclient.ClientConfig{})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.ListCommands(context.Background(), e.target)
		worst = max(worst, time.Since(start))
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return worst
}

var maskedNode = map[string]any{"uuid": nodeID, "driver_info": map[string]any{"ipmi_password": "******"}}
var ports = []map[string]any{{"address": nodeMAC}}

func TestClientCleanSteps(t *testing.T) {
	e := newAgentEnv(t, agenttest.AgentConfig{CommandDelay: 20 * time.Millisecond}, agentclient.ClientConfig{}, nil)
	ctx := context.Background()
	found, err := e.client.GetCleanSteps(ctx, e.target, maskedNode, ports)
	if err != nil {
		t.Fatal(err)
	}
	generic := found.Steps["GenericHardwareManager"]
	if len(generic) == 0 || generic[0].Name != "erase_devices_metadata" || generic[0].Priority != 99 || generic[0].Interface != "deploy" {
		t.Fatalf("steps: %+v", found.Steps)
	}
	if found.HardwareManagerVersion["generic_hardware_manager"] != "1.2" {
		t.Fatalf("versions: %v", found.HardwareManagerVersion)
	}
	r, err := e.client.ExecuteCleanStep(ctx, e.target, generic[0], maskedNode, ports, found.HardwareManagerVersion)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != agentclient.StatusRunning || r.Name != "execute_clean_step" {
		t.Fatalf("started: %+v", r)
	}
	done, err := e.client.WaitForCommand(ctx, e.target, agentclient.CmdExecuteCleanStep)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := agentclient.DecodeStepResult(steps.Clean, done)
	if err != nil || sr.Step.Name != "erase_devices_metadata" {
		t.Fatalf("step result %+v %v", sr, err)
	}
	ex := e.agent.Executed()
	if len(ex) != 2 || ex[1].Params["clean_version"].(map[string]any)["generic_hardware_manager"] != "1.2" {
		t.Fatalf("executions: %+v", ex)
	}
	if _, ok := ex[1].Params["node"]; !ok {
		t.Fatal("node not sent")
	}
	if e.agent.StepRuns(steps.Clean, "deploy", "erase_devices_metadata") != 1 {
		t.Fatal("step did not run exactly once")
	}
	// The single-command read with wait=true returns the same result.
	one, err := e.client.GetCommandStatus(ctx, e.target, r.ID, true)
	if err != nil || one.Status != agentclient.StatusSucceeded {
		t.Fatalf("GetCommandStatus: %+v %v", one, err)
	}
	list, err := e.client.ListCommands(ctx, e.target)
	if err != nil || len(list) != 2 || list[0].Name != "get_clean_steps" {
		t.Fatalf("ListCommands: %+v %v", list, err)
	}
	st, err := e.client.Status(ctx, e.target)
	if err != nil || st.Version != "10.0.0" || st.StartedAt == 0 {
		t.Fatalf("Status: %+v %v", st, err)
	}
}

func TestClientDeployAndServiceSteps(t *testing.T) {
	e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
	ctx := context.Background()
	ds, err := e.client.GetDeploySteps(ctx, e.target, maskedNode, ports)
	if err != nil {
		t.Fatal(err)
	}
	var write steps.Step
	for _, s := range ds.Steps["GenericHardwareManager"] {
		if s.Name == "write_image" {
			write = s
		}
	}
	write.Args = map[string]any{"image_info": map[string]any{"id": "img", "urls": []any{"http://127.0.0.1/img"}, "checksum": "0123456789abcdef0123456789abcdef"}, "configdrive": "H4sI"}
	if _, err := e.client.ExecuteDeployStep(ctx, e.target, write, maskedNode, ports, ds.HardwareManagerVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.WaitForCommand(ctx, e.target, agentclient.CmdExecuteDeployStep); err != nil {
		t.Fatal(err)
	}
	// A whole-disk image: IPA's root uuid is the disk identifier.
	parts, err := e.client.GetPartitionUUIDs(ctx, e.target)
	if err != nil || !regexp.MustCompile(`^0x[0-9a-f]{8}$`).MatchString(parts.Root) || parts.EFISystemPartition != "" {
		t.Fatalf("partitions of a whole-disk image: %+v %v", parts, err)
	}
	// A partition image: the partitions' UUIDs.
	write.Args["image_info"].(map[string]any)["image_type"] = "partition"
	if _, err := e.client.ExecuteDeployStep(ctx, e.target, write, maskedNode, ports, ds.HardwareManagerVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.WaitForCommand(ctx, e.target, agentclient.CmdExecuteDeployStep); err != nil {
		t.Fatal(err)
	}
	parts, err = e.client.GetPartitionUUIDs(ctx, e.target)
	if err != nil || parts.Root == "" || parts.EFISystemPartition == "" {
		t.Fatalf("partitions of a partition image: %+v %v", parts, err)
	}
	ss, err := e.client.GetServiceSteps(ctx, e.target, maskedNode, ports)
	if err != nil || len(ss.Steps["GenericHardwareManager"]) == 0 {
		t.Fatalf("service steps: %+v %v", ss, err)
	}
	step := ss.Steps["GenericHardwareManager"][0]
	if step.Name == "apply_configuration" {
		// IPA's apply_configuration(node, ports, raid_config, ...) needs
		// its argument.
		step.Args = map[string]any{"raid_config": map[string]any{"logical_disks": []any{
			map[string]any{"size_gb": "MAX", "raid_level": "1", "controller": "software"}}}}
	}
	if _, err := e.client.ExecuteServiceStep(ctx, e.target, step, maskedNode, ports, ss.HardwareManagerVersion); err != nil {
		t.Fatal(err)
	}
	r, err := e.client.WaitForCommand(ctx, e.target, agentclient.CmdExecuteServiceStep)
	if err != nil || r.Status != agentclient.StatusSucceeded {
		t.Fatalf("service step: %+v %v", r, err)
	}
	if e.agent.StepRuns(steps.Deploy, "deploy", "write_image") != 2 || e.agent.StepRuns(steps.Service, step.Interface, step.Name) != 1 {
		t.Fatalf("executions: %+v", e.agent.Executed())
	}
}

func TestClientServiceStepsOldAgent(t *testing.T) {
	noService := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				b, _ := io.ReadAll(r.Body)
				if bytes.Contains(b, []byte(`"service.`)) {
					w.WriteHeader(http.StatusNotFound)
					_, _ = w.Write([]byte(`{"faultcode":"Client","faultstring":"Not found: Extension with id service not found."}`))
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(b))
			}
			h.ServeHTTP(w, r)
		})
	}
	e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, noService)
	ss, err := e.client.GetServiceSteps(context.Background(), e.target, maskedNode, ports)
	if err != nil || len(ss.Steps) != 0 {
		t.Fatalf("old agent: %+v %v", ss, err)
	}
}

func TestClientOtherCommands(t *testing.T) {
	ctx := context.Background()
	t.Run("install_bootloader polls", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{CommandDelay: 30 * time.Millisecond}, agentclient.ClientConfig{}, nil)
		r, err := e.client.InstallBootloader(ctx, e.target, agentclient.InstallBootloaderArgs{RootUUID: "r", EFISystemPartUUID: "e", TargetBootMode: "uefi"})
		if err != nil || r.Status != agentclient.StatusSucceeded {
			t.Fatalf("%+v %v", r, err)
		}
		p := e.agent.Executed()[0].Params
		if p["root_uuid"] != "r" || p["efi_system_part_uuid"] != "e" || p["prep_boot_part_uuid"] != nil || p["target_boot_mode"] != "uefi" {
			t.Fatalf("params %v", p)
		}
	})
	t.Run("install_bootloader on an old agent", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{RejectTargetBootMode: true}, agentclient.ClientConfig{}, nil)
		r, err := e.client.InstallBootloader(ctx, e.target, agentclient.InstallBootloaderArgs{RootUUID: "r", TargetBootMode: "bios"})
		if err != nil || r.Status != agentclient.StatusSucceeded {
			t.Fatalf("%+v %v", r, err)
		}
		ex := e.agent.Executed()
		if len(ex) != 2 || ex[0].Status != agentclient.StatusFailed {
			t.Fatalf("executions %+v", ex)
		}
		if _, ok := ex[1].Params["target_boot_mode"]; ok {
			t.Fatal("retry still sent target_boot_mode")
		}
	})
	// Software RAID in UEFI mode: an agent that cannot take the boot mode
	// would lay the holders out for BIOS; the error stands, as Ironic
	// raises it. In BIOS mode the retry happens as for any image.
	t.Run("install_bootloader for software RAID on an old agent", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{RejectTargetBootMode: true}, agentclient.ClientConfig{}, nil)
		_, err := e.client.InstallBootloader(ctx, e.target, agentclient.InstallBootloaderArgs{RootUUID: "r", TargetBootMode: "uefi", SoftwareRAID: true})
		if err == nil || !strings.Contains(err.Error(), "target_boot_mode") {
			t.Fatalf("%v, want the agent's refusal of target_boot_mode", err)
		}
		if ex := e.agent.Executed(); len(ex) != 1 {
			t.Fatalf("executions %+v, want the one refused, no retry", ex)
		}
		r, err := e.client.InstallBootloader(ctx, e.target, agentclient.InstallBootloaderArgs{RootUUID: "r", TargetBootMode: "bios", SoftwareRAID: true})
		if err != nil || r.Status != agentclient.StatusSucceeded {
			t.Fatalf("BIOS: %+v %v, want the retry without target_boot_mode", r, err)
		}
		if ex := e.agent.Executed(); len(ex) != 3 {
			t.Fatalf("executions %+v, want the BIOS call retried", ex)
		}
	})
	t.Run("sync", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
		r, err := e.client.Sync(ctx, e.target)
		if err != nil || r.Status != agentclient.StatusSucceeded || e.agent.CommandRuns(agentclient.CmdSync) != 1 {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("collect_system_logs", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
		if _, err := e.client.Sync(ctx, e.target); err != nil {
			t.Fatal(err)
		}
		b, err := e.client.CollectSystemLogs(ctx, e.target)
		if err != nil {
			t.Fatal(err)
		}
		gz, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(gz)
		found := false
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Name == "journal" {
				data, _ := io.ReadAll(tr)
				found = strings.Contains(string(data), "standby.sync SUCCEEDED")
			}
		}
		if !found {
			t.Fatal("journal lacks the sync command")
		}
	})
	for _, tc := range []struct {
		name string
		call func(*agentclient.Client, agentclient.Agent) (*agentclient.CommandResult, error)
		cmd  string
		// status is the command's status in the answer: RUNNING for
		// IPA's asynchronous commands, SUCCEEDED for finalize_rescue,
		// which IPA runs synchronously.
		status agentclient.CommandStatus
	}{
		{"power_off", func(c *agentclient.Client, a agentclient.Agent) (*agentclient.CommandResult, error) {
			return c.PowerOff(ctx, a)
		}, agentclient.CmdPowerOff, agentclient.StatusRunning},
		{"run_image", func(c *agentclient.Client, a agentclient.Agent) (*agentclient.CommandResult, error) {
			return c.Reboot(ctx, a)
		}, agentclient.CmdRunImage, agentclient.StatusRunning},
		{"lockdown", func(c *agentclient.Client, a agentclient.Agent) (*agentclient.CommandResult, error) {
			return c.Lockdown(ctx, a)
		}, agentclient.CmdLockdown, agentclient.StatusRunning},
		{"finalize_rescue", func(c *agentclient.Client, a agentclient.Agent) (*agentclient.CommandResult, error) {
			return c.FinalizeRescue(ctx, a, "$6$salt$hash")
		}, agentclient.CmdFinalizeRescue, agentclient.StatusSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{MaxCommandAttempts: 1}, nil)
			r, err := tc.call(e.client, e.target)
			if err != nil || r.Status != tc.status {
				t.Fatalf("%+v %v; want status %s", r, err, tc.status)
			}
			select {
			case <-e.agent.Gone():
			case <-time.After(5 * time.Second):
				t.Fatal("agent did not go away")
			}
			ex := e.agent.Executed()
			if len(ex) != 1 || ex[0].Command != tc.cmd {
				t.Fatalf("executions %+v", ex)
			}
			if tc.cmd == agentclient.CmdFinalizeRescue && (ex[0].Params["rescue_password"] != "$6$salt$hash" || ex[0].Params["hashed"] != true) {
				t.Fatalf("params %v", ex[0].Params)
			}
			// The agent is gone: the connection drops.
			if _, err := e.client.ListCommands(ctx, e.target); !errors.Is(err, agentclient.ErrConnectionFailed) {
				t.Fatalf("after %s: %v", tc.name, err)
			}
		})
	}
	t.Run("generic call", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
		e.agent.SetBehavior("standby.get_partition_uuids", agenttest.Behavior{Delay: 20 * time.Millisecond})
		r, err := e.client.Call(ctx, e.target, "standby.get_partition_uuids", nil, agentclient.CallOptions{Wait: true})
		if err != nil || r.Status != agentclient.StatusSucceeded {
			t.Fatalf("%+v %v", r, err)
		}
		e.agent.SetBehavior(agentclient.CmdInstallBootloader, agenttest.Behavior{Delay: 30 * time.Millisecond, Result: map[string]any{"installed": true}})
		r, err = e.client.Call(ctx, e.target, agentclient.CmdInstallBootloader, map[string]any{"root_uuid": "r"}, agentclient.CallOptions{Poll: true})
		if err != nil || r.Status != agentclient.StatusSucceeded || string(r.Result) != `{"installed":true}` {
			t.Fatalf("poll: %+v %v", r, err)
		}
	})
}

func TestClientAgentErrors(t *testing.T) {
	ctx := context.Background()
	step := steps.Step{Interface: "deploy", Name: "erase_devices", Priority: 10}
	version := map[string]string{"generic_hardware_manager": "1.2"}

	t.Run("busy", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{CommandDelay: time.Second}, agentclient.ClientConfig{}, nil)
		if _, err := e.client.ExecuteCleanStep(ctx, e.target, step, maskedNode, ports, version); err != nil {
			t.Fatal(err)
		}
		_, err := e.client.ExecuteCleanStep(ctx, e.target, step, maskedNode, ports, version)
		var ae *agentclient.APIError
		if !errors.Is(err, agentclient.ErrAgentBusy) || errors.Is(err, agentclient.ErrAgentAPI) || !errors.As(err, &ae) || ae.Status != 409 || !strings.Contains(ae.Fault, "Agent is busy: executing command execute_clean_step") {
			t.Fatalf("%v", err)
		}
		if e.agent.StepRuns(steps.Clean, "deploy", "erase_devices") != 1 {
			t.Fatal("busy agent ran the step twice")
		}
	})
	t.Run("wrong token", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
		bad := e.target
		bad.Token = "not-the-token-at-all-not-the-token-at-all-x"
		_, err := e.client.Sync(ctx, bad)
		var ae *agentclient.APIError
		if !errors.As(err, &ae) || ae.Status != 401 || !errors.Is(err, agentclient.ErrAgentAPI) {
			t.Fatalf("%v", err)
		}
		if _, err := e.client.ListCommands(ctx, bad); !errors.As(err, &ae) || ae.Status != 401 {
			t.Fatalf("list: %v", err)
		}
		if strings.Contains(err.Error(), bad.Token) {
			t.Fatal("token in error")
		}
		if len(e.agent.Executed()) != 0 {
			t.Fatal("a command with a wrong token ran")
		}
	})
	t.Run("unknown extension, command and id", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
		var ae *agentclient.APIError
		if _, err := e.client.Call(ctx, e.target, "nosuch.thing", nil, agentclient.CallOptions{}); !errors.As(err, &ae) || ae.Status != 404 {
			t.Fatalf("extension: %v", err)
		}
		if _, err := e.client.Call(ctx, e.target, "standby.nosuch", nil, agentclient.CallOptions{}); !errors.As(err, &ae) || ae.Status != 400 {
			t.Fatalf("command: %v", err)
		}
		if _, err := e.client.GetCommandStatus(ctx, e.target, "0b7e3a52-0000-4000-8000-000000000000", false); !errors.As(err, &ae) || ae.Status != 404 {
			t.Fatalf("id: %v", err)
		}
	})
	t.Run("bad step parameter", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
		var ae *agentclient.APIError
		_, err := e.client.Call(ctx, e.target, agentclient.CmdExecuteCleanStep, map[string]any{"step": "erase", "node": map[string]any{}, "ports": []any{}}, agentclient.CallOptions{})
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Fault, "Invalid command parameters") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("unknown parameter of a synchronous command", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
		r, err := e.client.Call(ctx, e.target, agentclient.CmdSync, map[string]any{"bogus": 1}, agentclient.CallOptions{Wait: true})
		if !errors.Is(err, agentclient.ErrAgentAPI) || r == nil || r.Error.Type != "TypeError" {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("step failed", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
		e.agent.SetStepBehavior(steps.Clean, "deploy", "erase_devices", agenttest.Behavior{
			Fail: &agentclient.AgentError{Type: "BlockDeviceEraseError", Code: 500, Message: "Error erasing block device", Details: "/dev/sda: shred failed"},
		})
		if _, err := e.client.ExecuteCleanStep(ctx, e.target, step, maskedNode, ports, version); err != nil {
			t.Fatal(err)
		}
		_, err := e.client.WaitForCommand(ctx, e.target, agentclient.CmdExecuteCleanStep)
		var ce *agentclient.CommandError
		if !errors.Is(err, agentclient.ErrCommandFailed) || !errors.As(err, &ce) || ce.Agent.Details != "/dev/sda: shred failed" || ce.Node != nodeID {
			t.Fatalf("%v", err)
		}
	})
	t.Run("unknown step fails", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
		if _, err := e.client.ExecuteCleanStep(ctx, e.target, steps.Step{Interface: "deploy", Name: "nope"}, maskedNode, ports, version); err != nil {
			t.Fatal(err)
		}
		_, err := e.client.WaitForCommand(ctx, e.target, agentclient.CmdExecuteCleanStep)
		var ce *agentclient.CommandError
		if !errors.As(err, &ce) || ce.Agent.Type != "HardwareManagerMethodNotFound" {
			t.Fatalf("%v", err)
		}
	})
	t.Run("synchronous command failed", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
		e.agent.SetBehavior(agentclient.CmdSync, agenttest.Behavior{Fail: &agentclient.AgentError{Type: "CommandExecutionError", Code: 500, Message: "Command execution failed", Details: "sync: I/O error"}, Times: 1})
		r, err := e.client.Sync(ctx, e.target)
		if !errors.Is(err, agentclient.ErrCommandFailed) || r.Status != agentclient.StatusFailed {
			t.Fatalf("%+v %v", r, err)
		}
		if _, err := e.client.Sync(ctx, e.target); err != nil {
			t.Fatalf("Times: 1 did not expire: %v", err)
		}
	})
	t.Run("version mismatch", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
		e.agent.SetHardwareManagerVersion("GenericHardwareManager", "1.3")
		if _, err := e.client.ExecuteCleanStep(ctx, e.target, step, maskedNode, ports, version); err != nil {
			t.Fatal(err)
		}
		r, err := e.client.WaitForCommand(ctx, e.target, agentclient.CmdExecuteCleanStep)
		if !errors.Is(err, agentclient.ErrVersionMismatch) || errors.Is(err, agentclient.ErrCommandFailed) || r.Status != agentclient.StatusCleanVersionMismatch {
			t.Fatalf("%+v %v", r, err)
		}
		// Ironic also accepts the VERSION_MISMATCH alias.
		alias := &agentclient.CommandResult{ID: "x", Name: "execute_deploy_step", Status: agentclient.StatusVersionMismatch}
		if err := alias.Err(nodeID, agentclient.CmdExecuteDeployStep); !errors.Is(err, agentclient.ErrVersionMismatch) {
			t.Fatalf("alias: %v", err)
		}
	})
	t.Run("poll timeout", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{CommandDelay: 5 * time.Second}, agentclient.ClientConfig{CommandWaitAttempts: 3}, nil)
		_, err := e.client.InstallBootloader(ctx, e.target, agentclient.InstallBootloaderArgs{RootUUID: "r"})
		var pe *agentclient.PollTimeoutError
		if !errors.Is(err, agentclient.ErrCommandTimeout) || !errors.As(err, &pe) || pe.Attempts != 3 {
			t.Fatalf("%v", err)
		}
	})
	t.Run("agent answers garbage", func(t *testing.T) {
		garbage := func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"id": 5`)) })
		}
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, garbage)
		if _, err := e.client.Sync(ctx, e.target); !errors.Is(err, agentclient.ErrAgentAPI) {
			t.Fatalf("%v", err)
		}
		if _, err := e.client.ListCommands(ctx, e.target); !errors.Is(err, agentclient.ErrAgentAPI) {
			t.Fatalf("%v", err)
		}
	})
}

// dropAfter serves requests with h and then drops the connection of every
// POST, so the agent ran the command but the client never hears back.
func dropAfter(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		hj := w.(http.Hijacker)
		conn, _, _ := hj.Hijack()
		_ = conn.Close()
	})
}

func TestClientConnectionFailures(t *testing.T) {
	ctx := context.Background()
	step := steps.Step{Interface: "deploy", Name: "erase_devices", Priority: 10}
	version := map[string]string{"generic_hardware_manager": "1.2"}

	t.Run("same command already running after a lost answer", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{CommandDelay: 300 * time.Millisecond}, agentclient.ClientConfig{}, dropAfter)
		r, err := e.client.ExecuteCleanStep(ctx, e.target, step, maskedNode, ports, version)
		if err != nil || r.Status != agentclient.StatusRunning || r.Name != "execute_clean_step" {
			t.Fatalf("%+v %v", r, err)
		}
		if n := e.agent.StepRuns(steps.Clean, "deploy", "erase_devices"); n != 1 {
			t.Fatalf("step ran %d times", n)
		}
	})
	t.Run("a different running command is not mistaken for ours", func(t *testing.T) {
		e := newAgentEnv(t, agenttest.AgentConfig{CommandDelay: 2 * time.Second}, agentclient.ClientConfig{}, dropAfter)
		other := steps.Step{Interface: "deploy", Name: "erase_devices_metadata", Priority: 99}
		// Start another step directly (the wrapper only drops answers).
		direct, _ := agentclient.NewClient(agentclient.ClientConfig{MaxCommandAttempts: 1})
		defer direct.Close()
		_, _ = direct.ExecuteCleanStep(ctx, e.target, other, maskedNode, ports, version)
		_, err := e.client.ExecuteCleanStep(ctx, e.target, step, maskedNode, ports, version)
		if !errors.Is(err, agentclient.ErrConnectionFailed) {
			t.Fatalf("%v", err)
		}
		if e.agent.StepRuns(steps.Clean, "deploy", "erase_devices") != 0 || e.agent.StepRuns(steps.Clean, "deploy", "erase_devices_metadata") != 1 {
			t.Fatalf("executions %+v", e.agent.Executed())
		}
	})
	t.Run("retries then gives up", func(t *testing.T) {
		var posts atomic.Int32
		refuse := func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					posts.Add(1)
					conn, _, _ := w.(http.Hijacker).Hijack()
					_ = conn.Close()
					return
				}
				h.ServeHTTP(w, r)
			})
		}
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, refuse)
		_, err := e.client.ExecuteCleanStep(ctx, e.target, step, maskedNode, ports, version)
		var ce *agentclient.ConnectionError
		if !errors.Is(err, agentclient.ErrConnectionFailed) || !errors.As(err, &ce) || ce.Attempts != 3 {
			t.Fatalf("%v", err)
		}
		if posts.Load() != 3 || len(e.agent.Executed()) != 0 {
			t.Fatalf("posts %d, executions %d", posts.Load(), len(e.agent.Executed()))
		}
		if strings.Contains(err.Error(), testToken) {
			t.Fatal("token in error")
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		_ = ln.Close()
		c, _ := agentclient.NewClient(agentclient.ClientConfig{})
		defer c.Close()
		a := agentclient.Agent{NodeUUID: nodeID, URL: "https://" + addr, Token: testToken}
		_, err := c.PowerOff(ctx, a)
		var ce *agentclient.ConnectionError
		if !errors.As(err, &ce) || ce.Attempts != 3 || strings.Contains(err.Error(), testToken) {
			t.Fatalf("%v", err)
		}
		if _, err := c.Status(ctx, a); !errors.Is(err, agentclient.ErrConnectionFailed) {
			t.Fatalf("status: %v", err)
		}
	})
	t.Run("command timeout finds the running command", func(t *testing.T) {
		// The command timeout must cut the sync's POST, which the agent
		// holds for the delay, yet let the GET that finds the running
		// command through, on a new connection (the timed-out one is
		// closed). Both are relative to that GET's time measured now:
		// with a fixed 200 ms timeout a loaded machine timed the GET
		// out too, and the client's retried POST found the agent busy.
		rt := newConnectionRoundTrip(t)
		timeout := max(200*time.Millisecond, 20*rt)
		delay := 10 * timeout
		e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{CommandTimeout: timeout}, nil)
		e.agent.SetBehavior(agentclient.CmdSync, agenttest.Behavior{Delay: delay})
		start := time.Now()
		r, err := e.client.Sync(ctx, e.target)
		if err != nil || r.Status != agentclient.StatusRunning {
			t.Fatalf("%+v %v (command timeout %v, a new connection's GET took %v)", r, err, timeout, rt)
		}
		if took := time.Since(start); took >= delay {
			t.Fatalf("command_timeout %v not applied: the call took %v, the agent's answer %v", timeout, took, delay)
		}
		if e.agent.CommandRuns(agentclient.CmdSync) != 1 {
			t.Fatal("sync sent twice")
		}
	})
}

func pemOf(cert *x509.Certificate) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))
}

func TestClientTLS(t *testing.T) {
	ctx := context.Background()
	e := newAgentEnv(t, agenttest.AgentConfig{}, agentclient.ClientConfig{}, nil)
	// Pinned certificate: works (the other tests use it too).
	if _, err := e.client.Status(ctx, e.target); err != nil {
		t.Fatal(err)
	}
	// A different pinned certificate: refused.
	_, other, _ := agenttest.SelfSignedCert(time.Now())
	wrong := e.target
	wrong.VerifyCA = other
	if _, err := e.client.Status(ctx, wrong); !errors.Is(err, agentclient.ErrConnectionFailed) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("wrong pin: %v", err)
	}
	// No pin and no configured CA: the system pool does not know it.
	unpinned := e.target
	unpinned.VerifyCA = ""
	if _, err := e.client.Status(ctx, unpinned); !errors.Is(err, agentclient.ErrConnectionFailed) {
		t.Fatalf("unpinned: %v", err)
	}
	// No pin but the configured CA knows it.
	block, _ := pem.Decode([]byte(e.srv.CertPEM()))
	cert, _ := x509.ParseCertificate(block.Bytes)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	withCA, _ := agentclient.NewClient(agentclient.ClientConfig{RootCAs: pool})
	defer withCA.Close()
	if _, err := withCA.Status(ctx, unpinned); err != nil {
		t.Fatalf("configured CA: %v", err)
	}
	// Malformed pin.
	bad := e.target
	bad.VerifyCA = "not pem"
	if _, err := e.client.Status(ctx, bad); !errors.Is(err, agentclient.ErrInvalidArgument) {
		t.Fatalf("bad pin: %v", err)
	}

	// A TLS 1.2-only agent is refused by default (TLS 1.3 minimum) and
	// accepted when the minimum is lowered.
	old := httptest.NewUnstartedServer(agenttest.NewAgent(agenttest.AgentConfig{Token: testToken}))
	old.TLS = &tls.Config{MaxVersion: tls.VersionTLS12}
	old.StartTLS()
	defer old.Close()
	a12 := agentclient.Agent{NodeUUID: nodeID, URL: old.URL, Token: testToken, VerifyCA: pemOf(old.Certificate())}
	if _, err := e.client.Status(ctx, a12); !errors.Is(err, agentclient.ErrConnectionFailed) {
		t.Fatalf("TLS 1.2 accepted by default: %v", err)
	}
	c12, _ := agentclient.NewClient(agentclient.ClientConfig{MinTLSVersion: tls.VersionTLS12})
	defer c12.Close()
	if _, err := c12.Status(ctx, a12); err != nil {
		t.Fatalf("TLS 1.2 with lowered minimum: %v", err)
	}
}

func TestClientInvalidArguments(t *testing.T) {
	ctx := context.Background()
	c, err := agentclient.NewClient(agentclient.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, a := range []agentclient.Agent{{URL: ""}, {URL: "ftp://x"}, {URL: "10.0.0.1:9999"}} {
		if _, err := c.Sync(ctx, a); !errors.Is(err, agentclient.ErrInvalidArgument) {
			t.Errorf("URL %q: %v", a.URL, err)
		}
	}
	a := agentclient.Agent{URL: "https://127.0.0.1:1"}
	if _, err := c.Call(ctx, a, "nodot", nil, agentclient.CallOptions{}); !errors.Is(err, agentclient.ErrInvalidArgument) {
		t.Errorf("command name: %v", err)
	}
	if _, err := c.ExecuteCleanStep(ctx, a, steps.Step{}, nil, nil, nil); !errors.Is(err, agentclient.ErrInvalidArgument) {
		t.Errorf("empty step: %v", err)
	}
	if _, err := c.GetCommandStatus(ctx, a, "a/b", false); !errors.Is(err, agentclient.ErrInvalidArgument) {
		t.Errorf("command id: %v", err)
	}
	if _, err := agentclient.NewClient(agentclient.ClientConfig{MinTLSVersion: tls.VersionTLS10}); !errors.Is(err, agentclient.ErrInvalidArgument) {
		t.Errorf("TLS 1.0: %v", err)
	}
	if _, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: -1}); !errors.Is(err, agentclient.ErrInvalidArgument) {
		t.Errorf("negative timeout: %v", err)
	}
}
