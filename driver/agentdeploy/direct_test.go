package agentdeploy_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal/conductor"
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
	up := &driver.Task{NodeUUID: "n1", DriverInternalInfo: map[string]any{driver.InternalAgentURL: "https://10.0.0.5:9999", driver.InternalAgentToken: "t"}}
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
	var nf *driver.StepNotFoundError
	if _, err := d.ExecuteStep(ctx, &driver.Task{}, steps.Deploy, steps.Step{Interface: "deploy", Name: "nope"}); !errors.As(err, &nf) {
		t.Fatalf("unknown step: %v", err)
	}
}

// The baremetal conductor resumes a deploy on a new owner at a step its
// implementation declares safe to re-run.
var _ conductor.RerunSafeStepper = (*agentdeploy.Direct)(nil)

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

// TestImageInfo builds image_info from instance_info as Ironic's agent
// deploy does, and checks every accepted result against the fake IPA's
// copy of IPA 2023.1's _validate_image_info. Anvil used to send
// instance_info keys under their own names (image_checksum, image_url)
// and no urls when image_url was set: real IPA refused every write_image.
func TestImageInfo(t *testing.T) {
	const md5 = "0123456789abcdef0123456789abcdef"
	base := func(extra map[string]any) map[string]any {
		ii := map[string]any{"image_source": "http://img.test/images/jammy.raw"}
		for k, v := range extra {
			ii[k] = v
		}
		return ii
	}
	whole := func(extra map[string]any) map[string]any {
		out := map[string]any{"id": "jammy.raw", "urls": []any{"http://img.test/images/jammy.raw"}, "disk_format": nil,
			"container_format": nil, "stream_raw_images": true, "node_uuid": "n1", "image_type": "whole-disk"}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		ii, di     map[string]any
		dii, props map[string]any
		want       map[string]any
		missing    string // a *MissingParameterError naming this
		invalid    string // a *InvalidParameterError on this key
	}{
		{name: "checksum only", ii: base(map[string]any{"image_checksum": md5}), want: whole(map[string]any{"checksum": md5})},
		{name: "image_url wins over image_source", ii: base(map[string]any{"image_url": "https://cdn.test/jammy.raw", "image_checksum": md5}),
			want: whole(map[string]any{"urls": []any{"https://cdn.test/jammy.raw"}, "checksum": md5})},
		{name: "os hash pair and formats", ii: base(map[string]any{"image_os_hash_algo": "sha256", "image_os_hash_value": "ab12",
			"image_disk_format": "raw", "image_container_format": "bare"}),
			want: whole(map[string]any{"os_hash_algo": "sha256", "os_hash_value": "ab12", "disk_format": "raw", "container_format": "bare"})},
		{name: "both checksums", ii: base(map[string]any{"image_checksum": md5, "image_os_hash_algo": "sha512", "image_os_hash_value": "cd"}),
			want: whole(map[string]any{"checksum": md5, "os_hash_algo": "sha512", "os_hash_value": "cd"})},
		{name: "proxies", ii: base(map[string]any{"image_checksum": md5}),
			di:   map[string]any{"image_http_proxy": "http://proxy.test:3128", "image_https_proxy": "http://proxy.test:3129", "image_no_proxy": "10.0.0.0/8"},
			want: whole(map[string]any{"checksum": md5, "proxies": map[string]any{"http": "http://proxy.test:3128", "https": "http://proxy.test:3129"}, "no_proxy": "10.0.0.0/8"})},
		{name: "explicit http download source", ii: base(map[string]any{"image_checksum": md5, "image_download_source": "http"}), want: whole(map[string]any{"checksum": md5})},
		{name: "partition image from kernel and ramdisk", ii: base(map[string]any{"image_checksum": md5, "kernel": "http://img.test/vmlinuz",
			"ramdisk": "http://img.test/initrd", "root_gb": float64(10), "swap_mb": float64(512), "capabilities": map[string]any{"disk_label": "gpt"}}),
			props: map[string]any{"capabilities": "boot_mode:bios"},
			want: whole(map[string]any{"checksum": md5, "image_type": "partition", "kernel": "http://img.test/vmlinuz", "ramdisk": "http://img.test/initrd",
				"root_gb": int64(10), "root_mb": int64(10240), "swap_mb": int64(512), "ephemeral_mb": int64(0), "ephemeral_format": nil,
				"preserve_ephemeral": nil, "image_mtu": nil, "deploy_boot_mode": "bios", "boot_option": "local", "disk_label": "gpt"})},
		{name: "recorded whole-disk flag", ii: base(map[string]any{"image_checksum": md5, "kernel": "k", "ramdisk": "r"}),
			dii: map[string]any{"is_whole_disk_image": true}, want: whole(map[string]any{"checksum": md5})},
		{name: "no image_source", ii: map[string]any{"image_checksum": md5}, missing: "image_source"},
		{name: "no checksum", ii: base(nil), missing: "image_checksum (or image_os_hash_algo and image_os_hash_value)"},
		{name: "empty checksum", ii: base(map[string]any{"image_checksum": ""}), invalid: "image_checksum"},
		{name: "hash algo without value", ii: base(map[string]any{"image_os_hash_algo": "sha256"}), invalid: "image_os_hash_value"},
		{name: "unknown hash algo", ii: base(map[string]any{"image_os_hash_algo": "crc32", "image_os_hash_value": "ab"}), invalid: "image_os_hash_algo"},
		{name: "file URL", ii: map[string]any{"image_source": "file:///etc/passwd", "image_checksum": md5}, invalid: "image_source"},
		{name: "image_url not a string", ii: base(map[string]any{"image_url": 5, "image_checksum": md5}), invalid: "image_url"},
		{name: "local download source", ii: base(map[string]any{"image_checksum": md5}), di: map[string]any{"image_download_source": "local"}, invalid: "image_download_source"},
		{name: "swift download source", ii: base(map[string]any{"image_checksum": md5, "image_download_source": "swift"}), invalid: "image_download_source"},
		{name: "partition image without root_gb", ii: base(map[string]any{"image_checksum": md5, "image_type": "partition"}), missing: "root_gb"},
		{name: "partition image with a fractional root_gb", ii: base(map[string]any{"image_checksum": md5, "image_type": "partition", "root_gb": 1.5}), invalid: "root_gb"},
		{name: "unknown image_type", ii: base(map[string]any{"image_checksum": md5, "image_type": "iso"}), invalid: "image_type"},
	} {
		task := &driver.Task{NodeUUID: "n1", ProvisionState: "deploying", InstanceInfo: tc.ii, DriverInfo: tc.di, DriverInternalInfo: tc.dii, Properties: tc.props}
		got, err := agentdeploy.ImageInfo(task)
		verr := agentdeploy.New(nil).Validate(context.Background(), task)
		var me *driver.MissingParameterError
		var ie *driver.InvalidParameterError
		switch {
		case tc.missing != "":
			if !errors.As(err, &me) || me.Node != "n1" || me.Field != "instance_info" || me.Missing[0] != tc.missing {
				t.Errorf("%s: err = %v, want missing instance_info %s", tc.name, err, tc.missing)
			}
		case tc.invalid != "":
			if !errors.As(err, &ie) || ie.Node != "n1" || ie.Key != tc.invalid {
				t.Errorf("%s: err = %v, want invalid %s", tc.name, err, tc.invalid)
			}
		default:
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s:\n got %#v\nwant %#v", tc.name, got, tc.want)
			}
			if ierr := agenttest.ValidateImageInfo(got); ierr != nil {
				t.Errorf("%s: the fake IPA refuses image_info %v: %v", tc.name, got, ierr)
			}
		}
		if (err == nil) != (verr == nil) {
			t.Errorf("%s: Validate = %v, ImageInfo = %v: a deploy must fail in Validate exactly when write_image would", tc.name, verr, err)
		}
	}
}
