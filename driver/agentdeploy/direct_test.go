package agentdeploy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/steps"
)

func TestDirectSteps(t *testing.T) {
	d := agentdeploy.New(nil)
	want := map[string]int{"deploy": 100, "write_image": 80, "prepare_instance_boot": 60, "tear_down_agent": 40, "switch_to_tenant_network": 30, "boot_instance": 20}
	got := d.Steps(steps.Deploy)
	if len(got) != len(want) {
		t.Fatalf("%d deploy steps, want %d", len(got), len(want))
	}
	for _, s := range got {
		if s.Interface != "deploy" || want[s.Name] != s.Priority {
			t.Errorf("step %s.%s priority %d, want deploy.%s %d", s.Interface, s.Name, s.Priority, s.Name, want[s.Name])
		}
	}
	if len(d.Steps(steps.Clean)) != 0 {
		t.Errorf("direct declares clean steps; agent clean steps come from the agent")
	}
	if !d.AgentBased() {
		t.Errorf("direct is not agent based")
	}
}

func TestDirectBootsRamdiskUnlessAgentUp(t *testing.T) {
	ctx := context.Background()
	d := agentdeploy.New(nil)
	task := &driver.Task{NodeUUID: "n1", ProvisionState: "deploying"}
	res, err := d.Deploy(ctx, task)
	if err != nil || !res.Wait || !res.RebootRequested {
		t.Fatalf("Deploy without an agent = %+v, %v; want wait for a ramdisk boot", res, err)
	}
	if v, _ := task.DriverInternalInfo[agentdeploy.DeploymentRebootKey].(bool); !v {
		t.Fatalf("deployment_reboot not set")
	}
	up := &driver.Task{NodeUUID: "n1", DriverInternalInfo: map[string]any{"agent_url": "https://10.0.0.5:9999", "agent_secret_token": "t"}}
	if res, err := d.Deploy(ctx, up); err != nil || res.Wait {
		t.Fatalf("Deploy with the agent up (fast track) = %+v, %v; want done", res, err)
	}
	if res, err := d.PrepareSteps(ctx, &driver.Task{NodeUUID: "n1"}, steps.Clean); err != nil || !res.Wait || !res.RebootRequested {
		t.Fatalf("PrepareSteps without an agent = %+v, %v", res, err)
	}
}

func TestDirectValidateAndWriteImage(t *testing.T) {
	ctx := context.Background()
	d := agentdeploy.New(nil)
	err := d.Validate(ctx, &driver.Task{NodeUUID: "n1", ProvisionState: "deploying"})
	var missing *driver.MissingParameterError
	if !errors.As(err, &missing) || missing.Missing[0] != "image_source" {
		t.Fatalf("Validate without image_source = %v", err)
	}
	client, err := agentclient.NewClient(agentclient.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	withClient := agentdeploy.New(client)
	_, err = withClient.ExecuteStep(ctx, &driver.Task{NodeUUID: "n1", InstanceInfo: map[string]any{"image_source": "http://x/img"}}, steps.Deploy,
		steps.Step{Interface: "deploy", Name: "write_image"})
	if !errors.Is(err, agentclient.ErrConnectionFailed) {
		t.Fatalf("write_image without an agent URL = %v, want ErrConnectionFailed (the conductor waits for the agent)", err)
	}
	info := agentdeploy.ImageInfo(&driver.Task{NodeUUID: "n1", InstanceInfo: map[string]any{"image_source": "http://x/img", "image_checksum": "abc"}})
	if info["image_checksum"] != "abc" || info["disk_format"] != "raw" {
		t.Fatalf("image_info = %v", info)
	}
	var nf *driver.StepNotFoundError
	if _, err := d.ExecuteStep(ctx, &driver.Task{}, steps.Deploy, steps.Step{Interface: "deploy", Name: "nope"}); !errors.As(err, &nf) {
		t.Fatalf("unknown step: %v", err)
	}
}

// The baremetal conductor resumes a deploy on a new owner at a step its
// implementation declares safe to re-run.
var _ baremetal.RerunSafeStepper = (*agentdeploy.Direct)(nil)

func TestDirectStepRerunSafe(t *testing.T) {
	d := agentdeploy.New(nil)
	safe := map[string]bool{"deploy": true, "prepare_instance_boot": true, "switch_to_tenant_network": true,
		"boot_instance": true, "tear_down_agent": true, "write_image": false}
	for _, s := range d.Steps(steps.Deploy) {
		want, ok := safe[s.Name]
		if !ok {
			t.Fatalf("step %s has no expectation: decide whether it is safe to re-run", s.Name)
		}
		if got := d.StepRerunSafe(steps.Deploy, s.Name); got != want {
			t.Errorf("StepRerunSafe(deploy, %s) = %v, want %v", s.Name, got, want)
		}
	}
	for _, k := range []steps.Kind{steps.Clean, steps.Service} {
		if d.StepRerunSafe(k, "deploy") {
			t.Errorf("StepRerunSafe(%s, deploy) = true; direct has no %s steps", k, k)
		}
	}
	if d.StepRerunSafe(steps.Deploy, "unknown_step") {
		t.Error("an unknown step is declared safe to re-run")
	}
}
