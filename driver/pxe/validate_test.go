package pxe_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/netboot/netboottest"
	"github.com/anvilmetal/anvil/statemachine"
)

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name   string
		impl   string
		opts   pxe.Options
		adjust func(*driver.Task)
		// sentinel, and the error's Field and Key (or the missing key)
		is         error
		field, key string
		text       string // a part of the message
	}{
		{name: "no deploy kernel", adjust: func(t *driver.Task) { delete(t.DriverInfo, "deploy_kernel") },
			is: driver.ErrMissingParameter, field: "driver_info", key: "deploy_kernel"},
		{name: "both deploy images missing are named together", adjust: func(t *driver.Task) {
			delete(t.DriverInfo, "deploy_kernel")
			delete(t.DriverInfo, "deploy_ramdisk")
		}, is: driver.ErrMissingParameter, field: "driver_info", key: "deploy_ramdisk", text: "deploy_kernel, deploy_ramdisk"},
		{name: "conductor defaults stand in", opts: pxe.Options{DeployKernel: "/srv/ipa.kernel", DeployRamdisk: "https://images.example/ipa.initramfs"},
			adjust: func(t *driver.Task) { t.DriverInfo = map[string]any{} }},
		{name: "relative path", adjust: func(t *driver.Task) { t.DriverInfo["deploy_ramdisk"] = "images/ipa.initramfs" },
			is: driver.ErrInvalidParameter, field: "driver_info", key: "deploy_ramdisk", text: "absolute local path"},
		{name: "ftp URL", adjust: func(t *driver.Task) { t.DriverInfo["deploy_kernel"] = "ftp://192.0.2.1/ipa.kernel" },
			is: driver.ErrInvalidParameter, field: "driver_info", key: "deploy_kernel"},
		{name: "URL with a quote", adjust: func(t *driver.Task) { t.DriverInfo["deploy_kernel"] = "http://192.0.2.1/a\"b" },
			is: driver.ErrInvalidParameter, field: "driver_info", key: "deploy_kernel"},
		{name: "path with dot-dot", adjust: func(t *driver.Task) { t.DriverInfo["deploy_kernel"] = "/srv/../etc/shadow" },
			is: driver.ErrInvalidParameter, field: "driver_info", key: "deploy_kernel"},
		{name: "no ports", adjust: func(t *driver.Task) { t.Ports = nil },
			is: driver.ErrMissingParameter, text: "Node " + nodeUUID + " does not have any port associated with it"},
		{name: "no pxe-enabled port", adjust: func(t *driver.Task) { t.Ports = []driver.Port{{UUID: "p2", Address: "52:54:00:aa:bb:02"}} },
			is: driver.ErrMissingParameter, text: "does not have any port associated with it"},
		{name: "bad MAC", adjust: func(t *driver.Task) {
			t.Ports = append(t.Ports, driver.Port{UUID: "p9", Address: "52:54:00:zz", PXEEnabled: true})
		},
			is: driver.ErrInvalidParameter, field: "ports", key: "p9", text: "MAC address"},
		{name: "infiniband address is not a MAC", adjust: func(t *driver.Task) {
			t.Ports = []driver.Port{{UUID: "p9", Address: "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01", PXEEnabled: true}}
		}, is: driver.ErrInvalidParameter, field: "ports", key: "p9"},
		{name: "bad boot mode", adjust: func(t *driver.Task) { t.InstanceInfo = map[string]any{"deploy_boot_mode": "legacy"} },
			is: driver.ErrInvalidParameter, field: "instance_info", key: "deploy_boot_mode"},
		{name: "http needs uefi", impl: pxe.NameHTTP, adjust: func(t *driver.Task) { t.Properties = map[string]any{"capabilities": "boot_mode:bios"} },
			is: driver.ErrInvalidParameter, field: "properties", key: "capabilities", text: "UEFI"},
		{name: "http-ipxe needs uefi by default too", impl: pxe.NameHTTPIPXE, opts: pxe.Options{DefaultBootMode: netboot.BIOS},
			is: driver.ErrInvalidParameter, field: "options", key: "default_boot_mode"},
		{name: "ipxe refuses secure boot, naming iPXE", adjust: func(t *driver.Task) { t.Properties = map[string]any{"capabilities": "boot_mode:uefi,secure_boot:true"} },
			is: driver.ErrInvalidParameter, field: "properties", key: "capabilities", text: "iPXE (snponly.efi or ipxe.efi), is unsigned"},
		{name: "http-ipxe refuses secure boot from instance_info", impl: pxe.NameHTTPIPXE,
			adjust: func(t *driver.Task) {
				t.InstanceInfo = map[string]any{"capabilities": map[string]any{"secure_boot": "True"}}
			},
			is: driver.ErrInvalidParameter, field: "instance_info", key: "capabilities", text: "unsigned"},
		{name: "http refuses secure boot, naming its GRUB", impl: pxe.NameHTTP,
			adjust: func(t *driver.Task) { t.Properties = map[string]any{"capabilities": "boot_mode:uefi,secure_boot:true"} },
			is:     driver.ErrInvalidParameter, field: "properties", key: "capabilities", text: "grubhttpx64.efi"},
		{name: "pxe is not refused for secure boot (Options.GRUB can be Debian's signed one)", impl: pxe.NamePXE,
			adjust: func(t *driver.Task) { t.Properties = map[string]any{"capabilities": "secure_boot:true"} }},
		{name: "ipxe without secure boot", adjust: func(t *driver.Task) {
			t.Properties = map[string]any{"capabilities": "boot_mode:uefi,secure_boot:false"}
		}},
		{name: "newline in kernel_append_params", adjust: func(t *driver.Task) { t.DriverInfo["kernel_append_params"] = "quiet\nkernel /evil" },
			is: driver.ErrInvalidParameter, field: "driver_info", key: "kernel_append_params", text: "control character"},
		{name: "semicolon in kernel_append_params", adjust: func(t *driver.Task) { t.DriverInfo["kernel_append_params"] = "quiet;chain http://evil/" },
			is: driver.ErrInvalidParameter, field: "driver_info", key: "kernel_append_params"},
		{name: "quote in instance kernel_append_params", adjust: func(t *driver.Task) { t.InstanceInfo = map[string]any{"kernel_append_params": `a="b c"`} },
			is: driver.ErrInvalidParameter, field: "instance_info", key: "kernel_append_params"},
		{name: "iPXE variable in kernel_append_params", adjust: func(t *driver.Task) { t.DriverInfo["kernel_append_params"] = "x=${net0/ip}" },
			is: driver.ErrInvalidParameter, field: "driver_info", key: "kernel_append_params"},
		{name: "token in kernel_append_params", adjust: func(t *driver.Task) { t.DriverInfo["kernel_append_params"] = "ipa-agent-token=abc" },
			is: driver.ErrInvalidParameter, field: "driver_info", key: "kernel_append_params", text: "secret"},
		{name: "pxe loads images from the boot server only", impl: pxe.NamePXE,
			adjust: func(t *driver.Task) { t.DriverInfo["deploy_kernel"] = "http://192.0.2.1:8080/ipa.kernel" },
			is:     driver.ErrInvalidParameter, field: "driver_info", key: "deploy_kernel", text: "use ipxe or http-ipxe"},
		{name: "http loads images from the boot server only", impl: pxe.NameHTTP,
			adjust: func(t *driver.Task) { t.DriverInfo["deploy_ramdisk"] = "https://images.example/ipa.initramfs" },
			is:     driver.ErrInvalidParameter, field: "driver_info", key: "deploy_ramdisk", text: "absolute local path"},
		{name: "ipxe fetches URLs itself",
			adjust: func(t *driver.Task) { t.DriverInfo["deploy_kernel"] = "https://images.example/ipa.kernel" }},
		{name: "http-ipxe fetches URLs itself", impl: pxe.NameHTTPIPXE,
			adjust: func(t *driver.Task) {
				t.DriverInfo["deploy_kernel"] = "https://images.example/ipa.kernel"
				t.Properties = map[string]any{"capabilities": "boot_mode:uefi"}
			}},
		{name: "bad persistence", adjust: func(t *driver.Task) { t.DriverInfo["force_persistent_boot_device"] = "sometimes" },
			is: driver.ErrInvalidParameter, field: "driver_info", key: "force_persistent_boot_device"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			impl := tc.impl
			if impl == "" {
				impl = pxe.NameIPXE
			}
			b := pick(pxe.New(netboottest.NewStore(), tc.opts), impl)
			task := newTask(statemachine.Manageable)
			if tc.adjust != nil {
				tc.adjust(task)
			}
			err := b.Validate(context.Background(), task)
			if tc.is == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.is) {
				t.Fatalf("Validate = %v, want %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), nodeUUID) {
				t.Errorf("error %q does not name the node", err)
			}
			if tc.text != "" && !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not say %q", err, tc.text)
			}
			var inv *driver.InvalidParameterError
			var miss *driver.MissingParameterError
			switch {
			case errors.As(err, &inv):
				if inv.Field != tc.field || inv.Key != tc.key || inv.Expected == "" {
					t.Errorf("invalid %s[%q] (expected %q), want %s[%q]", inv.Field, inv.Key, inv.Expected, tc.field, tc.key)
				}
			case errors.As(err, &miss):
				if tc.field != "" && (miss.Field != tc.field || !strings.Contains(strings.Join(miss.Missing, ","), tc.key)) {
					t.Errorf("missing %s %v, want %s %q", miss.Field, miss.Missing, tc.field, tc.key)
				}
			default:
				var np *pxe.NoPortError
				if !errors.As(err, &np) {
					t.Errorf("error %T is not a typed error", err)
				}
			}
		})
	}
}

func TestValidateRescue(t *testing.T) {
	b := pxe.New(netboottest.NewStore(), pxe.Options{}).IPXE()
	task := newTask(statemachine.Active)
	if err := b.ValidateRescue(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	delete(task.DriverInfo, "rescue_ramdisk")
	var miss *driver.MissingParameterError
	if err := b.ValidateRescue(context.Background(), task); !errors.As(err, &miss) || miss.Missing[0] != "rescue_ramdisk" {
		t.Fatalf("ValidateRescue = %v, want rescue_ramdisk missing", err)
	}
	withDefault := pxe.New(netboottest.NewStore(), pxe.Options{RescueRamdisk: "/srv/rescue.initramfs"}).IPXE()
	if err := withDefault.ValidateRescue(context.Background(), task); err != nil {
		t.Fatalf("with the conductor's rescue_ramdisk: %v", err)
	}
}

func TestPrepareRamdiskRefusesSecretsAndUnsafeParams(t *testing.T) {
	for name, params := range map[string]map[string]any{
		"agent token":   {"ipa-api-url": "http://192.0.2.1:6385", "ipa-agent-token": "s3cret"},
		"password":      {"root_password": "x"},
		"newline value": {"ipa-api-url": "http://192.0.2.1:6385\nkernel http://evil/"},
		"ipxe variable": {"ipa-api-url": "http://${next-server}/"},
		"map value":     {"ipa-api-url": map[string]any{"a": "b"}},
	} {
		t.Run(name, func(t *testing.T) {
			store := netboottest.NewStore()
			b := pxe.New(store, options()).IPXE()
			task := newTask(statemachine.Cleaning)
			m := &recordingManagement{}
			bind(task, pxe.NameIPXE, b, m)
			err := b.PrepareRamdisk(context.Background(), task, params)
			if !errors.Is(err, driver.ErrInvalidParameter) {
				t.Fatalf("PrepareRamdisk = %v, want an invalid parameter", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the secret: %v", err)
			}
			if _, ok := store.Config(nodeUUID); ok {
				t.Error("a configuration was written")
			}
			if _, n := m.last(); n != 0 {
				t.Error("the boot device was set")
			}
		})
	}
}

func TestPrepareRamdiskBoundsTheCommandLine(t *testing.T) {
	b := pxe.New(netboottest.NewStore(), options()).PXE()
	task := newTask(statemachine.Cleaning)
	task.DriverInfo["kernel_append_params"] = strings.Repeat("console=ttyS0 ", 200)
	bind(task, pxe.NamePXE, b, &recordingManagement{})
	if err := b.PrepareRamdisk(context.Background(), task, nil); !errors.Is(err, driver.ErrInvalidParameter) || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("PrepareRamdisk = %v, want the command line refused as too long", err)
	}
}

func TestRamdiskDeployNeedsInstanceImages(t *testing.T) {
	b := pxe.New(netboottest.NewStore(), options()).IPXE()
	task := newTask(statemachine.Deploying)
	task.Interfaces[driver.KindDeploy] = pxe.RamdiskDeploy
	bind(task, pxe.NameIPXE, b, &recordingManagement{})
	var miss *driver.MissingParameterError
	err := b.PrepareInstance(context.Background(), task)
	if !errors.As(err, &miss) || miss.Field != "instance_info" || strings.Join(miss.Missing, ",") != "kernel,ramdisk" {
		t.Fatalf("PrepareInstance = %v, want instance_info kernel and ramdisk missing", err)
	}
}

func TestNewPanicsOnBadOptions(t *testing.T) {
	for name, o := range map[string]pxe.Options{
		"boot mode":      {DefaultBootMode: "legacy"},
		"deploy kernel":  {DeployKernel: "ipa.kernel"},
		"append params":  {KernelAppendParams: "a;b"},
		"ipxe timeout":   {IPXETimeout: -1},
		"rescue ramdisk": {RescueRamdisk: "file:///srv/rescue"},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("New accepted bad options")
				}
			}()
			pxe.New(netboottest.NewStore(), o)
		})
	}
}

func FuzzKernelAppendParams(f *testing.F) {
	for _, s := range []string{"nofb nomodeset vga=normal", "console=ttyS0,115200n8", "a\nb", "x=${y}", "ipa-agent-token=1", "%default% quiet", "\x00", "a\tb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		task := newTask(statemachine.Cleaning)
		task.DriverInfo["kernel_append_params"] = s
		store := netboottest.NewStore()
		b := pxe.New(store, options()).IPXE()
		bind(task, pxe.NameIPXE, b, &recordingManagement{})
		if err := b.PrepareRamdisk(context.Background(), task, nil); err != nil {
			if !errors.Is(err, driver.ErrInvalidParameter) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		c, _ := store.Config(nodeUUID)
		for _, p := range c.Params {
			if strings.ContainsAny(p, "\"'$;`\\{}|&<>#") || strings.IndexFunc(p, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
				t.Fatalf("unsafe parameter %q written", p)
			}
			if name, _, _ := strings.Cut(p, "="); name == "" || strings.Contains(strings.ToLower(name), "token") {
				t.Fatalf("token parameter %q written", p)
			}
		}
	})
}
