package agentdeploy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/imagecache"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/steps"
)

// prepare_instance_boot asks the agent for image.install_bootloader as
// Ironic's configure_local_boot does: a partition image always (with the
// root and, in UEFI mode, the EFI System Partition UUIDs the agent
// recorded while writing it), a whole-disk image in UEFI mode (no root
// UUID: IPA makes the boot entries with efibootmgr), a whole-disk image
// in BIOS mode only on a software RAID (the holder disks get GRUB; the
// root UUID is instance_info image_rootfs_uuid, else the disk
// identifier the agent recorded), never on a plain disk or a hardware
// RAID volume.
func TestPrepareInstanceBootInstallsBootloader(t *testing.T) {
	l := newImageLab(t, imagecache.Options{})
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandWaitInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	sum := sha256.Sum256(l.img)
	for _, tc := range []struct {
		name      string
		def       netboot.Mode
		ii, props map[string]any
		// want: whether install_bootloader runs; mode its
		// target_boot_mode; root and efi whether those UUIDs are sent.
		want            bool
		mode            string
		root, efi, prep bool
		// raid is the node's target_raid_config; rootfs the root_uuid
		// sent when it is not the agent's.
		raid   string
		rootfs string
	}{
		{name: "whole disk, BIOS by default", def: netboot.BIOS},
		{name: "whole disk, UEFI by default", want: true, mode: "uefi"},
		{name: "whole disk, UEFI by capability", def: netboot.BIOS, props: map[string]any{"capabilities": "boot_mode:uefi"}, want: true, mode: "uefi"},
		{name: "whole disk, BIOS by instance_info", ii: map[string]any{"deploy_boot_mode": "bios"}},
		{name: "partition, BIOS", def: netboot.BIOS, ii: map[string]any{"image_type": "partition", "root_gb": 1}, want: true, mode: "bios", root: true},
		{name: "partition, UEFI", ii: map[string]any{"image_type": "partition", "root_gb": 1}, want: true, mode: "uefi", root: true, efi: true},
		{name: "whole disk, BIOS, software RAID", def: netboot.BIOS, raid: softwareRAID1, want: true, mode: "bios", root: true},
		{name: "whole disk, BIOS, software RAID, image_rootfs_uuid", def: netboot.BIOS, raid: softwareRAID1,
			ii: map[string]any{"image_rootfs_uuid": "6f2d1c3e-8b4a-4f0e-9d7c-2a1b3c4d5e6f"}, want: true, mode: "bios", rootfs: "6f2d1c3e-8b4a-4f0e-9d7c-2a1b3c4d5e6f"},
		{name: "whole disk, UEFI, software RAID", raid: softwareRAID1, want: true, mode: "uefi", root: true},
		{name: "whole disk, BIOS, hardware RAID", def: netboot.BIOS, raid: `{"logical_disks": [{"size_gb": "MAX", "raid_level": "1", "controller": "RAID.Integrated.1-1"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := agentdeploy.NewWithOptions(client, agentdeploy.Options{DefaultBootMode: tc.def})
			ii := map[string]any{"image_source": l.origin.URL + "/disk.img", "image_os_hash_algo": "sha256", "image_os_hash_value": hex.EncodeToString(sum[:])}
			for k, v := range tc.ii {
				ii[k] = v
			}
			task := l.task(ii, nil)
			hw := map[string]any{}
			for k, v := range l.agent.HardwareManagerVersion() {
				hw[k] = v
			}
			task.DriverInternalInfo[steps.HardwareManagerVersionKey] = hw
			for k, v := range tc.props {
				task.Properties[k] = v
			}
			if tc.raid != "" {
				if err := json.Unmarshal([]byte(tc.raid), &task.TargetRAIDConfig); err != nil {
					t.Fatal(err)
				}
			}
			before := l.agent.CommandRuns(agentclient.CmdInstallBootloader)
			l.writeImage(t, d, task)
			// write_image runs asynchronously: the next step comes once it
			// finished, as the conductor moves on its heartbeat.
			if _, err := client.WaitForCommand(context.Background(), agentclient.Agent{NodeUUID: task.NodeUUID, URL: l.agentURL, Token: "tok"}, "deploy.execute_deploy_step"); err != nil {
				t.Fatal(err)
			}
			if _, err := d.ExecuteStep(context.Background(), task, steps.Deploy, steps.Step{Interface: "deploy", Name: agentdeploy.StepPrepareInstanceBoot}); err != nil {
				t.Fatal(err)
			}
			runs := l.agent.CommandRuns(agentclient.CmdInstallBootloader) - before
			if !tc.want {
				if runs != 0 {
					t.Fatalf("install_bootloader ran %d times, want none", runs)
				}
				return
			}
			if runs != 1 {
				t.Fatalf("install_bootloader ran %d times, want once", runs)
			}
			ex := l.agent.Executed()
			var p map[string]any
			var parts map[string]any
			for _, e := range ex {
				switch e.Command {
				case agentclient.CmdInstallBootloader:
					p = e.Params
				}
			}
			if tc.root {
				pr, err := client.GetPartitionUUIDs(context.Background(), agentclient.Agent{NodeUUID: task.NodeUUID, URL: l.agentURL, Token: "tok"})
				if err != nil {
					t.Fatal(err)
				}
				parts = map[string]any{"root": pr.Root, "efi": pr.EFISystemPartition}
			}
			if p["target_boot_mode"] != tc.mode {
				t.Errorf("target_boot_mode %v, want %s", p["target_boot_mode"], tc.mode)
			}
			switch {
			case tc.root && (p["root_uuid"] == nil || p["root_uuid"] != parts["root"]):
				t.Errorf("root_uuid %v, want the agent's root partition %v", p["root_uuid"], parts["root"])
			case tc.rootfs != "" && p["root_uuid"] != tc.rootfs:
				t.Errorf("root_uuid %v, want instance_info's image_rootfs_uuid %s", p["root_uuid"], tc.rootfs)
			case !tc.root && tc.rootfs == "" && p["root_uuid"] != nil:
				t.Errorf("root_uuid %v for a whole-disk image, want null", p["root_uuid"])
			}
			switch {
			case tc.efi && (p["efi_system_part_uuid"] == nil || p["efi_system_part_uuid"] != parts["efi"]):
				t.Errorf("efi_system_part_uuid %v, want the agent's %v", p["efi_system_part_uuid"], parts["efi"])
			case !tc.efi && p["efi_system_part_uuid"] != nil:
				t.Errorf("efi_system_part_uuid %v, want null", p["efi_system_part_uuid"])
			}
			if got, _ := task.DriverInternalInfo["root_uuid_or_disk_id"].(string); tc.root && got != parts["root"] {
				t.Errorf("driver_internal_info root_uuid_or_disk_id %q, want %v", got, parts["root"])
			}
		})
	}
}

// A failing install_bootloader fails the step with the agent's error;
// an invalid boot mode is refused before the agent is asked.
func TestPrepareInstanceBootBootloaderErrors(t *testing.T) {
	l := newImageLab(t, imagecache.Options{})
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandWaitInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	d := agentdeploy.NewWithOptions(client, agentdeploy.Options{})
	task := l.task(map[string]any{"image_source": l.origin.URL + "/disk.img", "deploy_boot_mode": "legacy"}, nil)
	_, err = d.ExecuteStep(context.Background(), task, steps.Deploy, steps.Step{Interface: "deploy", Name: agentdeploy.StepPrepareInstanceBoot})
	var inv *driver.InvalidParameterError
	if !errorsAs(err, &inv) || inv.Key != "deploy_boot_mode" {
		t.Fatalf("deploy_boot_mode legacy: %v, want an InvalidParameterError naming it", err)
	}
	if n := l.agent.CommandRuns(agentclient.CmdInstallBootloader); n != 0 {
		t.Fatalf("install_bootloader ran %d times for an invalid boot mode", n)
	}
	l.agent.SetBehavior(agentclient.CmdInstallBootloader, agenttestFail("No EFI partition could be detected"))
	task = l.task(map[string]any{"image_source": l.origin.URL + "/disk.img"}, nil)
	_, err = d.ExecuteStep(context.Background(), task, steps.Deploy, steps.Step{Interface: "deploy", Name: agentdeploy.StepPrepareInstanceBoot})
	if err == nil || !contains(err.Error(), "No EFI partition") || !contains(err.Error(), "node-1") {
		t.Fatalf("failing install_bootloader: %v, want the agent's error naming the node", err)
	}
}

// softwareRAID1 is the target_raid_config of Ironic's software RAID
// documentation: one RAID-1 volume over every disk.
const softwareRAID1 = `{"logical_disks": [{"size_gb": "MAX", "raid_level": "1", "controller": "software"}]}`

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func agenttestFail(msg string) agenttest.Behavior {
	return agenttest.Behavior{Fail: &agentclient.AgentError{Type: "CommandExecutionError", Code: 500, Message: "Command execution failed", Details: msg}}
}
