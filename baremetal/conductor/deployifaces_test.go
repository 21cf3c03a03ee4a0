package conductor_test

import (
	"errors"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// availableWith enrolls a node with deploy interface deploy and instance
// info ii and takes it through cleaning to available.
func (h *agentHarness) availableWith(name, deploy string, ii map[string]any) *baremetal.Node {
	h.t.Helper()
	n := h.enrollAgentNode(name)
	h.must2(h.c.Update(h.ctx, n.UUID, func(m *baremetal.Node) error {
		m.DeployInterface, m.InstanceInfo = deploy, ii
		return nil
	}))
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	return h.waitFor(n.UUID, statemachine.Available)
}

// TestRamdiskDeploy deploys a live ISO with the ramdisk deploy interface
// (Metal3's live-ISO hosts): no ramdisk agent boots, the boot interface
// boots the instance and the node ends active and powered on; the
// undeploy powers it off and forgets the instance's boot. A node with
// nothing to boot is refused at the request.
func TestRamdiskDeploy(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{}, nil)
	n := h.availableWith("live-iso", agentdeploy.RamdiskName, map[string]any{"boot_iso": "http://images.example/live.iso"})
	boots := h.fleet.Boots(n.UUID)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	a := h.waitFor(n.UUID, statemachine.Active)
	if a.PowerState != driver.PowerOn {
		t.Errorf("power %q, want power on", a.PowerState)
	}
	if got := h.fleet.Boots(n.UUID); got != boots {
		t.Errorf("ramdisk boots during a ramdisk deploy: %d, want %d", got, boots)
	}
	if a.DriverInternalInfo[fake.BootPreparedKey] != "instance" {
		t.Errorf("boot prepared %v, want the instance", a.DriverInternalInfo[fake.BootPreparedKey])
	}
	h.must(h.c.Undeploy(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)

	bad := h.availableWith("live-none", agentdeploy.RamdiskName, map[string]any{"kernel": "http://images.example/vmlinuz"})
	err := h.c.Deploy(h.ctx, bad.UUID, conductor.DeployOptions{})
	if err == nil {
		t.Fatal("ramdisk deploy without boot_iso or ramdisk accepted")
	}
	var fe *baremetal.InvalidFieldError
	if !errors.As(err, &fe) {
		t.Logf("refusal: %v", err)
	}
}

// TestCustomAgentDeploy deploys with custom-agent (Metal3's custom
// deploy): the agent boots and runs the user's in-band deploy step, no
// image is written, and the node ends active.
func TestCustomAgentDeploy(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{}, nil)
	n := h.availableWith("custom", agentdeploy.CustomAgentName, map[string]any{})
	user := []steps.Step{{Interface: "deploy", Name: "erase_devices_metadata", Priority: 85, Args: map[string]any{}}}
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{DeploySteps: user}))
	h.waitFor(n.UUID, statemachine.Active)
	hist, err := h.store.ListHistory(h.ctx, n.UUID, 0)
	h.must(err)
	seen := map[string]bool{}
	for _, e := range hist {
		seen[e.Event] = true
	}
	if !seen["step_end deploy.erase_devices_metadata"] || !seen["step_end deploy.boot_instance"] {
		t.Errorf("history lacks the user's in-band step or boot_instance: %v", seen)
	}
	if seen["step_end deploy.write_image"] || seen["step_start deploy.write_image"] {
		t.Error("custom-agent ran write_image")
	}
}

// TestAutodetectDeploy checks Ironic 2026.1's default deploy interface:
// a disk image deploys with direct, an instance marked
// ironic_ramdisk_deploy with a boot_iso with ramdisk; the node's
// deploy_interface reads the chosen one while deployed and autodetect
// again once torn down.
func TestAutodetectDeploy(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{}, nil)
	for _, tc := range []struct {
		name string
		ii   map[string]any
		want string
	}{
		{"auto-disk", map[string]any{"image_source": "http://images.example/ubuntu.qcow2", "image_checksum": "0123456789abcdef0123456789abcdef"}, agentdeploy.Name},
		{"auto-iso", map[string]any{"boot_iso": "http://images.example/live.iso", "ironic_ramdisk_deploy": true}, agentdeploy.RamdiskName},
	} {
		n := h.availableWith(tc.name, agentdeploy.AutodetectName, tc.ii)
		h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
		a := h.waitFor(n.UUID, statemachine.Active)
		if a.DeployInterface != tc.want || a.DriverInternalInfo["original_deploy_interface"] != agentdeploy.AutodetectName {
			t.Errorf("%s: deployed with %q (original %v), want %q switched from autodetect", tc.name, a.DeployInterface, a.DriverInternalInfo["original_deploy_interface"], tc.want)
		}
		h.must(h.c.Undeploy(h.ctx, n.UUID))
		b := h.waitFor(n.UUID, statemachine.Available)
		if b.DeployInterface != agentdeploy.AutodetectName {
			t.Errorf("%s: deploy interface %q after undeploy, want autodetect restored", tc.name, b.DeployInterface)
		}
	}
}
