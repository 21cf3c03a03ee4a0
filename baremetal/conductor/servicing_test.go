package conductor_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/agentdeploy/simfleet"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/imagecache"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// activeAgentNode is an agent-deployed node, active with its instance
// booted from disk.
func (h *agentHarness) activeAgentNode(name string) *baremetal.Node {
	h.t.Helper()
	n := h.enrollAgentNode(name)
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	a := h.waitFor(n.UUID, statemachine.Active)
	if a.PowerState != driver.PowerOn || a.DriverInternalInfo[fake.BootDeviceKey] != string(driver.BootDisk) {
		h.t.Fatalf("active node: power %q boot device %v", a.PowerState, a.DriverInternalInfo[fake.BootDeviceKey])
	}
	return a
}

// serviceSteps is one step of each out-of-band interface.
func oobServiceSteps() []steps.Step {
	return []steps.Step{
		{Interface: "management", Name: "reset_secure_boot_keys_to_default", Args: map[string]any{}},
		{Interface: "bios", Name: "apply_configuration", Args: map[string]any{"settings": []any{map[string]any{"name": "ProcVirtualization", "value": "Disabled"}}}},
		{Interface: "firmware", Name: "update", Args: map[string]any{"settings": []any{map[string]any{"component": "bios", "url": "http://fw.example/bios-2.0.bin"}}}},
		{Interface: "raid", Name: "create_configuration", Args: map[string]any{}},
	}
}

// TestServiceOutOfBandWithoutRamdisk: disable_ramdisk (API 1.108) runs
// management, BIOS, firmware and RAID service steps out of band: no
// ramdisk boots, the instance is never powered off, the node returns to
// active.
func TestServiceOutOfBandWithoutRamdisk(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{}, nil)
	n := h.activeAgentNode("svc-oob")
	boots, calls := h.fleet.Boots(n.UUID), len(h.fleet.PowerCalls(n.UUID))
	h.must(h.c.Service(h.ctx, n.UUID, oobServiceSteps(), conductor.ServiceOptions{DisableRamdisk: true}))
	a := h.waitFor(n.UUID, statemachine.Active)
	if a.LastError != "" || a.PowerState != driver.PowerOn {
		t.Fatalf("after servicing: last error %q power %q", a.LastError, a.PowerState)
	}
	if h.fleet.Boots(n.UUID) != boots || len(h.fleet.PowerCalls(n.UUID)) != calls {
		t.Logf("all calls %v, before %d", h.fleet.PowerCalls(n.UUID), calls)
		t.Fatalf("the ramdisk booted (%d → %d) or the power changed (%v)", boots, h.fleet.Boots(n.UUID), h.fleet.PowerCalls(n.UUID)[calls:])
	}
	dii := a.DriverInternalInfo
	bios, _ := dii[fake.BIOSSettingsKey].(map[string]any)
	if dii[fake.SecureBootKeysResetKey] != true || bios["ProcVirtualization"] != "Disabled" || dii[fake.FirmwareVersionKey] != "http://fw.example/bios-2.0.bin" || dii[fake.RAIDConfiguredKey] != true {
		t.Fatalf("the steps did not all run: %v", dii)
	}
	for _, k := range []string{"service_steps", "service_step_index", "service_disable_ramdisk"} {
		if v, ok := dii[k]; ok && v != nil {
			t.Fatalf("%s left in driver_internal_info: %v", k, v)
		}
	}
	// A step that needs the ramdisk is refused with disable_ramdisk.
	err := h.c.Service(h.ctx, n.UUID, []steps.Step{{Interface: "deploy", Name: "burnin_cpu", Args: map[string]any{}}}, conductor.ServiceOptions{DisableRamdisk: true})
	if err == nil {
		a = h.waitFor(n.UUID, statemachine.ServiceFailed)
		if !strings.Contains(a.LastError, "burnin_cpu") {
			t.Fatalf("an in-band step without the ramdisk: %q", a.LastError)
		}
	}
}

// TestServiceInBandBootsInstanceAgain: a service with an agent step
// boots the ramdisk, runs the agent's service step, then tears the
// ramdisk down and boots the instance from its disk again.
func TestServiceInBandBootsInstanceAgain(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{}, nil)
	n := h.activeAgentNode("svc-inband")
	boots := h.fleet.Boots(n.UUID)
	user := append(oobServiceSteps(), steps.Step{Interface: "deploy", Name: "burnin_cpu", Args: map[string]any{}})
	h.must(h.c.Service(h.ctx, n.UUID, user, conductor.ServiceOptions{}))
	a := h.waitFor(n.UUID, statemachine.Active)
	if a.LastError != "" {
		t.Fatalf("service failed: %s", a.LastError)
	}
	if h.fleet.Boots(n.UUID) != boots+1 {
		t.Fatalf("ramdisk boots %d → %d, want one for servicing", boots, h.fleet.Boots(n.UUID))
	}
	if !h.historyHas(n.UUID, "step_end deploy.burnin_cpu") {
		t.Fatalf("the agent did not run deploy.burnin_cpu")
	}
	// The instance boots again: from the disk, persistently, powered on.
	if a.PowerState != driver.PowerOn || a.DriverInternalInfo[fake.BootDeviceKey] != string(driver.BootDisk) || a.DriverInternalInfo[fake.BootPersistentKey] != true {
		t.Fatalf("after servicing: power %q boot %v persistent %v", a.PowerState, a.DriverInternalInfo[fake.BootDeviceKey], a.DriverInternalInfo[fake.BootPersistentKey])
	}
	calls := h.fleet.PowerCalls(n.UUID)
	if len(calls) < 2 || calls[len(calls)-1].Target != driver.PowerOn || calls[len(calls)-2].Target != driver.PowerOff {
		t.Fatalf("power calls %v: want the ramdisk powered off, then the instance on", calls)
	}
	if _, ok := a.DriverInternalInfo[driver.InternalAgentURL]; ok {
		t.Fatalf("the service agent's URL stayed")
	}
}

// TestServiceFailureAbortAndHold: a failing in-band step ends in service
// failed; abort returns the node to active with its instance booted; a
// service hold is unheld; service wait can be aborted.
func TestServiceFailureAbortAndHold(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	h := newAgentHarness(t, conductor.Options{}, func(string) *agenttest.Agent {
		a := agenttest.NewAgent(agenttest.AgentConfig{})
		if fail.Load() {
			a.SetStepBehavior(steps.Service, "deploy", "burnin_cpu", agenttest.Behavior{Fail: &agentclient.AgentError{Type: "CleaningError", Code: 500, Message: "CPU burn-in found a fault"}})
		}
		return a
	})
	n := h.activeAgentNode("svc-fail")
	fail.Store(true)
	h.must(h.c.Service(h.ctx, n.UUID, []steps.Step{{Interface: "deploy", Name: "burnin_cpu", Args: map[string]any{}}}, conductor.ServiceOptions{}))
	f := h.waitFor(n.UUID, statemachine.ServiceFailed)
	if !strings.Contains(f.LastError, "CPU burn-in found a fault") {
		t.Fatalf("service failed with %q", f.LastError)
	}
	h.must(h.c.Abort(h.ctx, n.UUID))
	a := h.waitFor(n.UUID, statemachine.Active)
	if a.PowerState != driver.PowerOn || a.DriverInternalInfo[fake.BootDeviceKey] != string(driver.BootDisk) {
		t.Fatalf("after abort: power %q boot %v", a.PowerState, a.DriverInternalInfo[fake.BootDeviceKey])
	}
	fail.Store(false)
	// A hold between two out-of-band steps; unhold resumes at once.
	hold := []steps.Step{oobServiceSteps()[0], {Interface: "deploy", Name: "hold", Args: map[string]any{}}, oobServiceSteps()[1]}
	h.must(h.c.Service(h.ctx, n.UUID, hold, conductor.ServiceOptions{DisableRamdisk: true}))
	hd := h.waitFor(n.UUID, statemachine.ServiceHold)
	if hd.DriverInternalInfo[fake.SecureBootKeysResetKey] != true {
		t.Fatalf("the step before the hold did not run")
	}
	h.must(h.c.Unhold(h.ctx, n.UUID))
	a = h.waitFor(n.UUID, statemachine.Active)
	if bios, _ := a.DriverInternalInfo[fake.BIOSSettingsKey].(map[string]any); bios["ProcVirtualization"] != "Disabled" || a.PowerState != driver.PowerOn {
		t.Fatalf("after unhold: bios %v power %q", a.DriverInternalInfo[fake.BIOSSettingsKey], a.PowerState)
	}
	// Service wait (the agent's step is running) aborted: service
	// failed, then active with the instance booted again.
	h.must(h.c.Service(h.ctx, n.UUID, []steps.Step{{Interface: "deploy", Name: "wait", Args: map[string]any{}}}, conductor.ServiceOptions{DisableRamdisk: true}))
	h.waitFor(n.UUID, statemachine.ServiceWait)
	h.must(h.c.Abort(h.ctx, n.UUID))
	a = h.waitFor(n.UUID, statemachine.Active)
	if a.PowerState != driver.PowerOn || !h.historyHas(n.UUID, "service failed") {
		t.Fatalf("after aborting service wait: power %q", a.PowerState)
	}
	if err := h.c.Abort(h.ctx, n.UUID); !errors.Is(err, statemachine.ErrInvalidTransition) && err == nil {
		t.Fatalf("abort of an active node: %v", err)
	}
}

// historyHas reports whether the node's history has an event
// containing what (in its event or message).
func (h *agentHarness) historyHas(uuid, what string) bool {
	hist, _ := h.store.ListHistory(h.ctx, uuid, 0)
	for _, e := range hist {
		if strings.Contains(e.Event, what) || strings.Contains(e.Message, what) {
			return true
		}
	}
	return false
}

// TestLocalImageDownloadFailsEveryDeploy: with image_download_source
// local, nodes deploying one image share one download from the origin;
// when it fails (a wrong checksum) every deploy fails with the cause,
// before its node boots; with the right checksum both deploy from one
// download.
func TestLocalImageDownloadFailsEveryDeploy(t *testing.T) {
	t.Parallel()
	img := []byte(strings.Repeat("disk ", 100000))
	var gets atomic.Int64
	gate := make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		<-gate
		_, _ = w.Write(img)
	}))
	t.Cleanup(origin.Close)
	cache, err := imagecache.New(imagecache.Options{Dir: t.TempDir(), URLBase: "http://conductor.test/images/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cache.Close() })
	h := newAgentHarnessFleet(t, conductor.Options{}, conductor.AgentSettings{}, simfleet.Config{},
		agentdeploy.Options{Images: cache, ImageDownloadSource: agentdeploy.ImageDownloadLocal})
	sum := sha256.Sum256(img)
	var nodes []*baremetal.Node
	for i := range 2 {
		n := h.enrollAgentNode(fmt.Sprint("local-", i))
		h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error {
			n.InstanceInfo = map[string]any{"image_source": origin.URL + "/disk.raw", "image_checksum": strings.Repeat("0", 64)}
			return nil
		}))
		h.must(h.c.Manage(h.ctx, n.UUID))
		h.waitFor(n.UUID, statemachine.Manageable)
		h.must(h.c.Provide(h.ctx, n.UUID))
		h.waitFor(n.UUID, statemachine.Available)
		nodes = append(nodes, n)
	}
	boots := h.fleet.Boots(nodes[0].UUID)
	for _, n := range nodes {
		h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	}
	for gets.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(gate)
	for _, n := range nodes {
		f := h.waitFor(n.UUID, statemachine.DeployFailed)
		if !strings.Contains(f.LastError, "checksum") || !strings.Contains(f.LastError, hex.EncodeToString(sum[:])) {
			t.Fatalf("node %s: last error %q, want the checksum mismatch", n.Name, f.LastError)
		}
	}
	if g := gets.Load(); g != 1 {
		t.Fatalf("the origin was read %d times, want once for both deploys", g)
	}
	if h.fleet.Boots(nodes[0].UUID) != boots {
		t.Fatalf("a node booted for a deploy whose image failed")
	}
	// The right checksum: both deploy, from a second single download.
	for _, n := range nodes {
		h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error {
			n.InstanceInfo["image_checksum"] = hex.EncodeToString(sum[:])
			return nil
		}))
		h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	}
	for _, n := range nodes {
		if a := h.waitFor(n.UUID, statemachine.Active); a.LastError != "" {
			t.Fatalf("node %s: %s", n.Name, a.LastError)
		}
	}
	if g := gets.Load(); g != 2 {
		t.Fatalf("the origin was read %d times in all, want 2", g)
	}
}
