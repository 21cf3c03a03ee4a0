package pxe_test

import (
	"errors"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/netboot"
)

// TestBootModeDecisionTable is the rule of BootMode, one row per case.
func TestBootModeDecisionTable(t *testing.T) {
	tests := []struct {
		name       string
		instance   map[string]any
		properties map[string]any
		internal   map[string]any
		def        netboot.Mode
		want       netboot.Mode
		source     string
		bad        string // the field of an invalid value
	}{
		{name: "nothing set: default uefi", def: netboot.UEFI, want: netboot.UEFI, source: "default"},
		{name: "nothing set: default bios", def: netboot.BIOS, want: netboot.BIOS, source: "default"},
		{name: "instance deploy_boot_mode first", instance: map[string]any{"deploy_boot_mode": "bios"},
			properties: map[string]any{"capabilities": "boot_mode:uefi"}, internal: map[string]any{"deploy_boot_mode": "uefi"},
			def: netboot.UEFI, want: netboot.BIOS, source: "instance_info.deploy_boot_mode"},
		{name: "instance capabilities before properties", instance: map[string]any{"capabilities": map[string]any{"boot_mode": "bios"}},
			properties: map[string]any{"capabilities": "boot_mode:uefi"}, def: netboot.UEFI, want: netboot.BIOS, source: "instance_info.capabilities"},
		{name: "properties capabilities string", properties: map[string]any{"capabilities": "cpu_vt:true, boot_mode:BIOS ,disk_label:gpt"},
			internal: map[string]any{"deploy_boot_mode": "uefi"}, def: netboot.UEFI, want: netboot.BIOS, source: "properties.capabilities"},
		{name: "properties capabilities map", properties: map[string]any{"capabilities": map[string]any{"boot_mode": "bios"}},
			def: netboot.UEFI, want: netboot.BIOS, source: "properties.capabilities"},
		{name: "driver_internal_info after capabilities", internal: map[string]any{"deploy_boot_mode": "bios"},
			def: netboot.UEFI, want: netboot.BIOS, source: "driver_internal_info.deploy_boot_mode"},
		{name: "capabilities without boot_mode fall through", properties: map[string]any{"capabilities": "cpu_vt:true"},
			def: netboot.BIOS, want: netboot.BIOS, source: "default"},
		{name: "secure boot means uefi", instance: map[string]any{"deploy_boot_mode": "bios"},
			properties: map[string]any{"capabilities": "secure_boot:true"}, def: netboot.BIOS, want: netboot.UEFI, source: "secure_boot"},
		{name: "invalid instance value", instance: map[string]any{"deploy_boot_mode": "legacy"}, def: netboot.UEFI, bad: "instance_info"},
		{name: "invalid capability", properties: map[string]any{"capabilities": "boot_mode:efi"}, def: netboot.UEFI, bad: "properties"},
		{name: "the first source decides, even when invalid", instance: map[string]any{"deploy_boot_mode": "x"},
			properties: map[string]any{"capabilities": "boot_mode:uefi"}, def: netboot.UEFI, bad: "instance_info"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task := &driver.Task{NodeUUID: nodeUUID, InstanceInfo: tc.instance, Properties: tc.properties, DriverInternalInfo: tc.internal}
			got, source, err := pxe.BootMode(task, pxe.NameIPXE, tc.def)
			if tc.bad != "" {
				var inv *driver.InvalidParameterError
				if !errors.As(err, &inv) || inv.Field != tc.bad || inv.Node != nodeUUID {
					t.Fatalf("BootMode = %v, want an invalid %s value", err, tc.bad)
				}
				return
			}
			if err != nil || got != tc.want || source != tc.source {
				t.Fatalf("BootMode = %q from %q (%v), want %q from %q", got, source, err, tc.want, tc.source)
			}
		})
	}
}
