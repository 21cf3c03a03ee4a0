package conductor_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/mock/gomock"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/drivermock"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestPowerSyncCountsConsecutiveBMCFailures scripts, with a mock power
// interface, a BMC that answers, stops answering, answers once and stops
// again, each failure a *driver.BMCUnreachableError with its address: a
// sequence no fake gives without rewriting the node's driver_info between
// runs. With PowerStateSyncMaxRetries 2 the failure count must restart
// after the answer, so only the third consecutive failure puts the node
// in maintenance with fault "power failure" and the BMC's error in the
// reason; once in maintenance the sync reads the BMC no more (the mock
// fails the test on any call beyond the seven expected).
func TestPowerSyncCountsConsecutiveBMCFailures(t *testing.T) {
	ctx := context.Background()
	ctrl := gomock.NewController(t)
	power := drivermock.NewMockPowerInterface(ctrl)
	unreachable := func(_ context.Context, tk *driver.Task) (driver.PowerState, error) {
		return "", &driver.BMCUnreachableError{Node: tk.NodeUUID, Kind: driver.KindPower, Impl: "mock",
			Address: "192.0.2.7:623", Attempts: 3, Waited: "60s"}
	}
	on := driver.PowerOn
	gomock.InOrder(
		power.EXPECT().GetPowerState(gomock.Any(), gomock.Any()).Return(on, nil),
		power.EXPECT().GetPowerState(gomock.Any(), gomock.Any()).DoAndReturn(unreachable).Times(2),
		power.EXPECT().GetPowerState(gomock.Any(), gomock.Any()).Return(on, nil),
		power.EXPECT().GetPowerState(gomock.Any(), gomock.Any()).DoAndReturn(unreachable).Times(3),
	)

	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "anvil.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindPower: {"mock"}}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindPower, "mock", power); err != nil {
		t.Fatal(err)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "mock-conductor", PowerStateSyncMaxRetries: 2,
		// The test runs the power sync itself.
		CheckProvisionStateInterval: -1, SyncPowerStateInterval: -1, PowerFailureRecoveryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	// A manageable node whose recorded power matches the BMC's first
	// answer, created in the store so that no verb reads the mock.
	n := &baremetal.Node{Name: "mock-1", Driver: builtin.FakeHardware, PowerInterface: "mock",
		ProvisionState: statemachine.Manageable, PowerState: driver.PowerOn}
	if err := store.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}

	for i, wantMaint := range []bool{false, false, false, false, false, false, true, true} {
		c.SyncPowerStates(ctx)
		got, err := store.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Maintenance != wantMaint {
			t.Fatalf("after sync %d: maintenance %t (reason %q), want %t", i+1, got.Maintenance, got.MaintenanceReason, wantMaint)
		}
		if wantMaint && (got.Fault != "power failure" || got.PowerState != "" ||
			!strings.Contains(got.MaintenanceReason, "no answer from the BMC at 192.0.2.7:623 after 3 attempt(s) in 60s")) {
			t.Fatalf("after sync %d: fault %q power %q reason %q", i+1, got.Fault, got.PowerState, got.MaintenanceReason)
		}
	}
	hist, err := store.ListHistory(ctx, n.UUID, 0)
	if err != nil {
		t.Fatal(err)
	}
	failures := 0
	for _, h := range hist {
		if h.Event == "power failure" {
			failures++
		}
	}
	if failures != 1 {
		t.Errorf("%d power failure history entries, want 1: %+v", failures, hist)
	}
}

// TestPowerSyncStaleListing checks the power sync against its own
// listing going stale: the sync lists the fleet once and reaches each
// node later (minutes later at 10,000 nodes), and a node powered on
// meanwhile reads "power on" at its BMC while the listing still says
// "power off". The re-check under the node's lock finds the record
// agreeing with the BMC: nothing is forced and nothing counted (Ironic
// reads each node afresh when it takes its turn). The mock fails the
// test on any power action.
func TestPowerSyncStaleListing(t *testing.T) {
	ctx := context.Background()
	ctrl := gomock.NewController(t)
	power := drivermock.NewMockPowerInterface(ctrl)
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "anvil.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	n := &baremetal.Node{Name: "stale-1", Driver: builtin.FakeHardware, PowerInterface: "mock",
		ProvisionState: statemachine.Available, PowerState: driver.PowerOff}
	if err := store.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	// Between the listing and the node's turn the node was powered on
	// (its record saved), and the BMC says so.
	power.EXPECT().GetPowerState(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, _ *driver.Task) (driver.PowerState, error) {
		cur, err := store.GetNode(ctx, n.UUID)
		if err != nil {
			return "", err
		}
		cur.PowerState = driver.PowerOn
		if err := store.UpdateNode(ctx, cur, ""); err != nil {
			return "", err
		}
		return driver.PowerOn, nil
	})
	power.EXPECT().GetPowerState(gomock.Any(), gomock.Any()).Return(driver.PowerOn, nil)

	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindPower: {"mock"}}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindPower, "mock", power); err != nil {
		t.Fatal(err)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "stale-conductor", PowerStateSyncMaxRetries: 1,
		CheckProvisionStateInterval: -1, SyncPowerStateInterval: -1, PowerFailureRecoveryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	// The second sync lists the node afresh and matches; had the first
	// counted a mismatch, the second would be one more with a maximum of
	// one retry.
	for range 2 {
		c.SyncPowerStates(ctx)
	}
	got, err := store.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Maintenance || got.PowerState != driver.PowerOn {
		t.Fatalf("node after the syncs: maintenance %v (%q), power %q; want none, power on", got.Maintenance, got.MaintenanceReason, got.PowerState)
	}
	hist, err := store.ListHistory(ctx, n.UUID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		if h.Event == "power state corrected" {
			t.Errorf("history: %s: %s", h.Event, h.Message)
		}
	}
}
