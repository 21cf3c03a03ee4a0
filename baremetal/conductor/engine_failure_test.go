package conductor_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// newFakeClock is the tests' settable clock (storetest.ManualClock):
// After fires once Advance passes its deadline.
func newFakeClock() *storetest.ManualClock {
	return storetest.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
}

// newClockHarness runs a conductor and store on a fake clock, with the
// direct deploy interface registered but no agent ever booting (fake
// power), so agent-based runs wait forever unless aborted or timed out.
func newClockHarness(t *testing.T, fakeCfg fake.Config) (*harness, *storetest.ManualClock) {
	t.Helper()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindDeploy: {fake.Name, agentdeploy.Name}}})
	if err := reg.Register(builtin.Bundle(fakeCfg)); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(nil)); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	return launchOnClock(t, clock, reg, conductor.Options{Hostname: "clock-conductor"}), clock
}

// launchOnClock runs a conductor with opts over reg and a store of its
// own, both on clock, and stops it when the test ends. The tests run the
// periodic tasks themselves: their intervals are disabled.
func launchOnClock(t *testing.T, clock *storetest.ManualClock, reg *driver.Registry, opts conductor.Options) *harness {
	t.Helper()
	store, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "anvil.db"), sqlstore.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	opts.Clock = clock
	opts.CheckProvisionStateInterval, opts.SyncPowerStateInterval, opts.PowerFailureRecoveryInterval = -1, -1, -1
	c, err := conductor.New(store, reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Stop(sctx)
	})
	return &harness{t: t, store: store, c: c, ctx: ctx}
}

func (h *harness) must(err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

// manageable enrolls a node and makes it manageable.
func (h *harness) manageable(name, deploy string) *baremetal.Node {
	h.t.Helper()
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName(name), Driver: builtin.FakeHardware, DeployInterface: deploy,
		InstanceInfo: map[string]any{"image_source": "http://images.example/img", "image_checksum": "0123456789abcdef0123456789abcdef"}})
	h.must(err)
	h.must(h.c.Manage(h.ctx, n.UUID))
	return h.waitFor(n.UUID, statemachine.Manageable)
}

func TestCleanWaitTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, cleanWaitTimeout)
}

func cleanWaitTimeout(t *testing.T) {
	h, clock := newClockHarness(t, fake.Config{})
	n := h.manageable("timeout-1", agentdeploy.Name)
	h.must(h.c.Provide(h.ctx, n.UUID))
	w := h.waitFor(n.UUID, statemachine.CleanWait)
	if w.PowerState != "power on" {
		t.Errorf("node waiting for its ramdisk has power %q, want power on", w.PowerState)
	}
	clock.Advance(29 * time.Minute)
	h.c.CheckTimeouts(h.ctx)
	if got, _ := h.store.GetNode(h.ctx, n.UUID); got.ProvisionState != statemachine.CleanWait {
		t.Fatalf("after 29 minutes: %s, want still clean wait", got.ProvisionState)
	}
	clock.Advance(2 * time.Minute)
	h.c.CheckTimeouts(h.ctx)
	f := h.waitFor(n.UUID, statemachine.CleanFailed)
	if !strings.Contains(f.LastError, "Timeout reached while cleaning") || f.TargetProvisionState != "available" {
		t.Fatalf("timed-out node: last error %q, target %q", f.LastError, f.TargetProvisionState)
	}
	if f.Maintenance {
		t.Errorf("no clean step ran, yet maintenance was set (fault %q)", f.Fault)
	}
	// clean failed has one exit: manage.
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
}

func TestDeployWaitTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, deployWaitTimeout)
}

func deployWaitTimeout(t *testing.T) {
	h, clock := newClockHarness(t, fake.Config{})
	n := h.manageable("timeout-2", agentdeploy.Name)
	h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error { n.AutomatedClean = new(false); return nil }))
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	h.waitFor(n.UUID, statemachine.DeployWait)
	clock.Advance(31 * time.Minute)
	h.c.CheckTimeouts(h.ctx)
	f := h.waitFor(n.UUID, statemachine.DeployFailed)
	if !strings.Contains(f.LastError, "Timeout reached while waiting for callback") || !strings.Contains(f.LastError, "deploy.deploy") {
		t.Fatalf("last error %q", f.LastError)
	}
}

func TestAbortCleanWait(t *testing.T) {
	t.Parallel()
	synctest.Test(t, abortCleanWait)
}

func abortCleanWait(t *testing.T) {
	h, _ := newClockHarness(t, fake.Config{})
	n := h.manageable("abort-1", agentdeploy.Name)
	// Abort is refused where Ironic refuses it, changing nothing.
	err := h.c.Abort(h.ctx, n.UUID)
	if !errors.Is(err, statemachine.ErrInvalidTransition) {
		t.Fatalf("Abort in manageable: %v, want ErrInvalidTransition", err)
	}
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.CleanWait)
	// Updates are refused while the clean is in progress.
	_, err = h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error { n.Description = "x"; return nil })
	if !errors.Is(err, conductor.ErrUpdateInProgress) {
		t.Fatalf("Update in clean wait: %v, want ErrUpdateInProgress", err)
	}
	h.must(h.c.Abort(h.ctx, n.UUID))
	f := h.waitFor(n.UUID, statemachine.CleanFailed)
	if !strings.Contains(f.LastError, "aborted by request") {
		t.Fatalf("last error %q", f.LastError)
	}
	if _, ok := f.DriverInternalInfo[driver.InternalAgentToken]; ok {
		t.Errorf("agent token survived the abort")
	}
}

func TestHoldUnholdManualClean(t *testing.T) {
	t.Parallel()
	synctest.Test(t, holdUnholdManualClean)
}

func holdUnholdManualClean(t *testing.T) {
	h, _ := newClockHarness(t, fake.Config{})
	n := h.manageable("hold-1", fake.Name)
	h.must(h.c.Clean(h.ctx, n.UUID, []steps.Step{{Interface: "deploy", Name: "hold"}}, conductor.CleanOptions{}))
	held := h.waitFor(n.UUID, statemachine.CleanHold)
	if held.TargetProvisionState != "manageable" {
		t.Fatalf("manual clean hold target %q, want manageable", held.TargetProvisionState)
	}
	h.must(h.c.Unhold(h.ctx, n.UUID))
	w := h.waitFor(n.UUID, statemachine.CleanWait)
	if w.TargetProvisionState != "manageable" {
		t.Fatalf("after unhold target %q, want manageable", w.TargetProvisionState)
	}
	h.must(h.c.Abort(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.CleanFailed)
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
}

func TestDeployHoldAbortAndServiceHold(t *testing.T) {
	t.Parallel()
	synctest.Test(t, deployHoldAbortAndServiceHold)
}

func deployHoldAbortAndServiceHold(t *testing.T) {
	h, _ := newClockHarness(t, fake.Config{})
	n := h.manageable("hold-2", fake.Name)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{DeploySteps: []steps.Step{{Interface: "deploy", Name: "hold", Priority: 150, Args: map[string]any{}}}}))
	h.waitFor(n.UUID, statemachine.DeployHold)
	h.must(h.c.Abort(h.ctx, n.UUID))
	f := h.waitFor(n.UUID, statemachine.DeployFailed)
	if !strings.Contains(f.LastError, "Deploy aborted by request") {
		t.Fatalf("last error %q", f.LastError)
	}
	// deploy failed accepts deploy again; this time without the hold.
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	h.waitFor(n.UUID, statemachine.Active)
	// Service with a hold: unhold continues at once.
	h.must(h.c.Service(h.ctx, n.UUID, []steps.Step{{Interface: "deploy", Name: "hold"}}, conductor.ServiceOptions{}))
	h.waitFor(n.UUID, statemachine.ServiceHold)
	h.must(h.c.Unhold(h.ctx, n.UUID))
	a := h.waitFor(n.UUID, statemachine.Active)
	if a.LastError != "" {
		t.Fatalf("service ended with %q", a.LastError)
	}
}

func TestFailingOutOfBandCleanStep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, failingOutOfBandCleanStep)
}

func failingOutOfBandCleanStep(t *testing.T) {
	h, _ := newClockHarness(t, fake.Config{})
	n := h.manageable("fail-1", fake.Name)
	h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error {
		n.DriverInfo = map[string]any{fake.FailKey: "bios.factory_reset"}
		return nil
	}))
	h.must(h.c.Clean(h.ctx, n.UUID, []steps.Step{{Interface: "bios", Name: "factory_reset"}}, conductor.CleanOptions{}))
	f := h.waitFor(n.UUID, statemachine.CleanFailed)
	if !f.Maintenance || f.Fault != "clean failure" || !strings.Contains(f.LastError, "factory_reset") {
		t.Fatalf("failed clean: maintenance %t fault %q last error %q", f.Maintenance, f.Fault, f.LastError)
	}
}

func TestRescueUnrescueAdoptPower(t *testing.T) {
	t.Parallel()
	synctest.Test(t, rescueUnrescueAdoptPower)
}

func rescueUnrescueAdoptPower(t *testing.T) {
	h, _ := newClockHarness(t, fake.Config{})
	n := h.manageable("misc-1", fake.Name)
	h.must(h.c.Adopt(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Active)
	if err := h.c.Rescue(h.ctx, n.UUID, ""); !errors.Is(err, statemachine.ErrMissingInput) {
		t.Fatalf("Rescue without password: %v", err)
	}
	h.must(h.c.Rescue(h.ctx, n.UUID, "s3cret"))
	r := h.waitFor(n.UUID, statemachine.Rescue)
	if r.InstanceInfo["rescue_password"] != "s3cret" {
		t.Fatalf("rescue password not kept for the ramdisk")
	}
	if strings.Contains(r.String(), "s3cret") {
		t.Fatalf("rescue password shown by String()")
	}
	h.must(h.c.Unrescue(h.ctx, n.UUID))
	u := h.waitFor(n.UUID, statemachine.Active)
	if _, ok := u.InstanceInfo["rescue_password"]; ok {
		t.Fatalf("rescue password kept after unrescue")
	}
	if err := h.c.Delete(h.ctx, n.UUID); !errors.Is(err, conductor.ErrDeleteRefused) {
		t.Fatalf("Delete of an active node: %v, want ErrDeleteRefused", err)
	}
	// Power actions set and clear target_power_state; power off wipes the
	// agent token.
	h.must(h.c.SetPowerState(h.ctx, n.UUID, statemachine.PowerOn, 0))
	on := h.waitPower(n.UUID, "power on")
	on.DriverInternalInfo[driver.InternalAgentToken] = "tok"
	h.must(h.store.UpdateNode(h.ctx, on, ""))
	h.must(h.c.SetPowerState(h.ctx, n.UUID, statemachine.PowerOff, 0))
	off := h.waitPower(n.UUID, "power off")
	if _, ok := off.DriverInternalInfo[driver.InternalAgentToken]; ok {
		t.Fatalf("power off kept the agent token")
	}
	if err := h.c.SetPowerState(h.ctx, n.UUID, "sideways", 0); !errors.Is(err, statemachine.ErrUnknownPowerState) {
		t.Fatalf("bad power target: %v", err)
	}
	// As in Ironic, maintenance lets an active node with an instance be
	// deleted (how a broken node is removed), but never a protected one.
	h.must(h.c.SetMaintenance(h.ctx, n.UUID, true, "broken BMC"))
	if _, err := h.c.Update(h.ctx, n.UUID, func(m *baremetal.Node) error { m.Protected = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(h.ctx, n.UUID); !errors.Is(err, conductor.ErrNodeProtected) {
		t.Fatalf("Delete of a protected node in maintenance: %v, want ErrNodeProtected", err)
	}
	if _, err := h.c.Update(h.ctx, n.UUID, func(m *baremetal.Node) error { m.Protected = false; return nil }); err != nil {
		t.Fatal(err)
	}
	h.must(h.c.Delete(h.ctx, n.UUID))
	if _, err := h.store.GetNode(h.ctx, n.UUID); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("node after Delete in maintenance: %v", err)
	}
}

func (h *harness) waitPower(uuid string, want statemachine.PowerState) *baremetal.Node {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := h.store.GetNode(h.ctx, uuid)
		h.must(err)
		if n.PowerState == want && n.TargetPowerState == "" && n.Reservation == "" {
			return n
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("node %s power %q target %q, want %q", uuid, n.PowerState, n.TargetPowerState, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestPowerSyncMaintenanceAndRecovery(t *testing.T) {
	t.Parallel()
	synctest.Test(t, powerSyncMaintenanceAndRecovery)
}

func powerSyncMaintenanceAndRecovery(t *testing.T) {
	h, _ := newClockHarness(t, fake.Config{})
	n := h.manageable("sync-1", fake.Name)
	// The machine was switched on behind the conductor's back: sync
	// forces it back to the recorded state.
	cur, _ := h.store.GetNode(h.ctx, n.UUID)
	cur.DriverInternalInfo[fake.PowerStateKey] = "power on"
	h.must(h.store.UpdateNode(h.ctx, cur, ""))
	h.c.SyncPowerStates(h.ctx)
	got, _ := h.store.GetNode(h.ctx, n.UUID)
	if got.DriverInternalInfo[fake.PowerStateKey] != "power off" || got.PowerState != "power off" {
		t.Fatalf("after sync: hardware %v, recorded %q; want forced back to power off", got.DriverInternalInfo[fake.PowerStateKey], got.PowerState)
	}
	// The next run finds them matching, which resets the failure count.
	h.c.SyncPowerStates(h.ctx)
	// The BMC stops answering: after more than 3 consecutive failures the
	// node goes to maintenance with fault "power failure".
	h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error {
		n.DriverInfo = map[string]any{fake.FailKey: "power.get_power_state"}
		return nil
	}))
	for i := 1; i <= 4; i++ {
		h.c.SyncPowerStates(h.ctx)
		got, _ = h.store.GetNode(h.ctx, n.UUID)
		if want := i > 3; got.Maintenance != want {
			t.Fatalf("after %d failed syncs maintenance = %t, want %t", i, got.Maintenance, want)
		}
	}
	if got.Fault != "power failure" || got.PowerState != "" {
		t.Fatalf("fault %q power %q, want power failure and unknown power", got.Fault, got.PowerState)
	}
	// Still failing: recovery leaves it alone.
	h.c.RecoverPowerFailures(h.ctx)
	if got, _ = h.store.GetNode(h.ctx, n.UUID); !got.Maintenance {
		t.Fatalf("recovered while the BMC still fails")
	}
	h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error { n.DriverInfo = map[string]any{}; return nil }))
	h.c.RecoverPowerFailures(h.ctx)
	got, _ = h.store.GetNode(h.ctx, n.UUID)
	if got.Maintenance || got.Fault != "" || got.PowerState != "power off" {
		t.Fatalf("after recovery: maintenance %t fault %q power %q", got.Maintenance, got.Fault, got.PowerState)
	}
}

func (h *harness) must2(_ *baremetal.Node, err error) {
	h.t.Helper()
	h.must(err)
}

func TestStartupFailsStuckNodesAndResumesIntents(t *testing.T) {
	t.Parallel()
	synctest.Test(t, startupFailsStuckNodesAndResumesIntents)
}

func startupFailsStuckNodesAndResumesIntents(t *testing.T) {
	clock := newFakeClock()
	dir := t.TempDir()
	store, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(dir, "anvil.db"), sqlstore.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	// A previous run left one node deploying with its work started (no
	// intent) and one with an accepted intent not yet picked up, both
	// reserved by the dead process.
	stuck := &baremetal.Node{Name: "stuck", Driver: builtin.FakeHardware, ProvisionState: "enroll"}
	pending := &baremetal.Node{Name: "pending", Driver: builtin.FakeHardware, ProvisionState: "enroll"}
	for _, n := range []*baremetal.Node{stuck, pending} {
		if err := store.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	stuck.ProvisionState, stuck.TargetProvisionState = "deploying", "active"
	pending.ProvisionState, pending.TargetProvisionState = "verifying", "manageable"
	pending.DriverInternalInfo = map[string]any{"anvil_intent": map[string]any{"op": "verify", "requested_at": clock.Now().Format(time.RFC3339Nano)}}
	for _, n := range []*baremetal.Node{stuck, pending} {
		if err := store.UpdateNode(ctx, n, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := store.ReserveNode(ctx, n.UUID, "restarting-host"); err != nil {
			t.Fatal(err)
		}
	}
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "restarting-host", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	h := &harness{t: t, store: store, c: c, ctx: ctx}
	f := h.waitFor(stuck.UUID, statemachine.DeployFailed)
	if !strings.Contains(f.LastError, "cannot be resumed") {
		t.Fatalf("stuck node last error %q", f.LastError)
	}
	h.waitFor(pending.UUID, statemachine.Manageable)
}
