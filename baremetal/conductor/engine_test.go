package conductor_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// openStore opens a fresh SQLite store in a temporary directory, or the
// fresh schema of the PostgreSQL database named by ANVIL_TEST_POSTGRES_DSN
// when pg is true.
func openStore(t *testing.T, pg bool) baremetal.Store {
	t.Helper()
	ctx := context.Background()
	if pg {
		// Each test gets its own schema, dropped when it ends, so runs
		// (go test -count=2) and tests never see each other's rows.
		return sqlstoretest.OpenPostgres(t, nil)
	}
	s, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "anvil.db"), sqlstore.Options{})
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type harness struct {
	t     *testing.T
	store baremetal.Store
	c     *conductor.Conductor
	ctx   context.Context
}

func newHarness(t *testing.T, store baremetal.Store, fakeCfg fake.Config, opts conductor.Options) *harness {
	t.Helper()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fakeCfg)); err != nil {
		t.Fatal(err)
	}
	if opts.Hostname == "" {
		opts.Hostname = fmt.Sprintf("conductor-%d", time.Now().UnixNano())
	}
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
		if err := c.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return &harness{t: t, store: store, c: c, ctx: ctx}
}

// waitFor waits until the node is in state with no reservation.
func (h *harness) waitFor(uuid string, state statemachine.State) *baremetal.Node {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := h.store.GetNode(h.ctx, uuid)
		if err != nil {
			h.t.Fatal(err)
		}
		if n.ProvisionState == state && n.Reservation == "" {
			return n
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("node %s: state %q (target %q, reserved by %q, last error %q), want %q",
				uuid, n.ProvisionState, n.TargetProvisionState, n.Reservation, n.LastError, state)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *harness) enroll(name string, driverInfo map[string]any) *baremetal.Node {
	h.t.Helper()
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName(name), Driver: builtin.FakeHardware, DriverInfo: driverInfo})
	if err != nil {
		h.t.Fatalf("Enroll: %v", err)
	}
	return n
}

func lifecycle(t *testing.T, store baremetal.Store) {
	h := newHarness(t, store, fake.Config{}, conductor.Options{})
	events := h.c.Watch(h.ctx, conductor.WatchFilter{Types: []conductor.EventType{conductor.EventTransition}})
	n := h.enroll("node-1", nil)
	if n.ProvisionState != "enroll" || n.DeployInterface != fake.Name || n.PowerInterface != fake.Name {
		t.Fatalf("enrolled node = %s/%s/%s, want enroll with fake interfaces", n.ProvisionState, n.DeployInterface, n.PowerInterface)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.c.Manage(h.ctx, n.UUID))
	m := h.waitFor(n.UUID, statemachine.Manageable)
	if m.PowerState != "power off" {
		t.Errorf("power state after verification = %q, want power off", m.PowerState)
	}
	must(h.c.Inspect(h.ctx, n.UUID))
	m = h.waitFor(n.UUID, statemachine.Manageable)
	if m.Properties["cpu_arch"] != "x86_64" || m.InspectionFinishedAt.IsZero() {
		t.Errorf("after inspection properties = %v, finished %v", m.Properties, m.InspectionFinishedAt)
	}
	ports, err := store.ListPorts(h.ctx, n.UUID)
	if err != nil || len(ports) != 1 || ports[0].Address != fake.MAC(n.UUID) {
		t.Errorf("ports after inspection = %v, %v", ports, err)
	}
	must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{ConfigDrive: []byte(`{"meta_data":{"hostname":"web-1"}}`)}))
	a := h.waitFor(n.UUID, statemachine.Active)
	if a.TargetProvisionState != "" || a.LastError != "" {
		t.Errorf("active node: target %q, last error %q", a.TargetProvisionState, a.LastError)
	}
	if cd, _ := a.InstanceInfo["configdrive"].(string); cd == "" {
		t.Errorf("config drive not built: %v", a.InstanceInfo["configdrive"])
	}
	must(h.c.Undeploy(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)

	want := []string{"enroll>verifying", "verifying>manageable", "manageable>inspecting", "inspecting>manageable",
		"manageable>cleaning", "cleaning>available", "available>deploying", "deploying>active",
		"active>deleting", "deleting>cleaning", "cleaning>available"}
	for i, w := range want {
		select {
		case e := <-events:
			if got := string(e.From) + ">" + string(e.To); got != w {
				t.Fatalf("transition %d = %s, want %s", i, got, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("transition %d (%s) not published", i, w)
		}
	}
	hist, err := store.ListHistory(h.ctx, n.UUID, 0)
	if err != nil || len(hist) < len(want) {
		t.Fatalf("history = %d entries, %v; want at least %d", len(hist), err, len(want))
	}
}

func TestLifecycleSQLite(t *testing.T) {
	t.Parallel()
	lifecycle(t, openStore(t, false))
}

func TestLifecyclePostgres(t *testing.T) {
	t.Parallel()
	lifecycle(t, openStore(t, true))
}

func TestRefusedVerbChangesNothing(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	h := newHarness(t, store, fake.Config{}, conductor.Options{})
	n := h.enroll("node-r", nil)
	before, _ := store.GetNode(h.ctx, n.UUID)
	err := h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{})
	var te *statemachine.TransitionError
	if !errors.As(err, &te) || !errors.Is(err, statemachine.ErrInvalidTransition) {
		t.Fatalf("Deploy from enroll err = %v, want a *TransitionError", err)
	}
	after, _ := store.GetNode(h.ctx, n.UUID)
	if after.Version != before.Version || after.ProvisionState != "enroll" {
		t.Fatalf("refused verb changed the node: version %d -> %d, state %s", before.Version, after.Version, after.ProvisionState)
	}
	if err := h.c.Delete(h.ctx, n.UUID); err != nil {
		t.Fatalf("Delete in enroll: %v", err)
	}
}

func TestVerifyFailureReturnsToEnroll(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	h := newHarness(t, store, fake.Config{}, conductor.Options{})
	n := h.enroll("node-v", map[string]any{fake.FailKey: "power.get_power_state"})
	if err := h.c.Manage(h.ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	got := h.waitFor(n.UUID, statemachine.Enroll)
	if got.LastError == "" || got.TargetProvisionState != "" {
		t.Fatalf("after failed verification: last error %q, target %q", got.LastError, got.TargetProvisionState)
	}
}

// uniqueName makes node names unique per run, so that tests can share a
// PostgreSQL database with earlier runs.
func uniqueName(name string) string {
	return fmt.Sprintf("%s-%x", name, time.Now().UnixNano()&0xffffffffff)
}

// openStoreB opens a fresh SQLite store for a benchmark.
func openStoreB(b *testing.B) baremetal.Store {
	b.Helper()
	s, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "anvil.db"), sqlstore.Options{})
	if err != nil {
		b.Fatalf("OpenSQLite: %v", err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
