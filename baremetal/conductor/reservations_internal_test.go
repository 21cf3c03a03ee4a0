package conductor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// heldProbe is a store that records, at each node write, how many
// reservations of the node the conductor counts as held.
type heldProbe struct {
	baremetal.Store
	c *Conductor

	mu   sync.Mutex
	seen map[string][]int // health written -> held counts at those writes
}

func (p *heldProbe) UpdateNode(ctx context.Context, n *baremetal.Node, host string) error {
	p.c.resv.mu.Lock()
	held := p.c.resv.held[n.UUID]
	p.c.resv.mu.Unlock()
	p.mu.Lock()
	p.seen[n.Health] = append(p.seen[n.Health], held)
	p.mu.Unlock()
	return p.Store.UpdateNode(ctx, n, host)
}

// TestHealthSyncCountsItsReservation: the power sync's health write holds
// the node's reservation as every operation does, counted in the
// conductor's reservation book. It used to reserve the store directly,
// uncounted, and its release then took one count from whoever reserved
// the node next: with a node left a suspect (a reserve that met the
// health sync's hold), the phantom sweep released the reservation of the
// operation that then ran (seen in the chaos test as "released a
// reservation no operation of this conductor held" right after a "health
// changed" entry, the operation's saves refused and its node taken over
// while it still ran).
func TestHealthSyncCountsItsReservation(t *testing.T) {
	ctx := context.Background()
	st, reg := sqliteAndFakeRegistry(t)
	probe := &heldProbe{Store: st, seen: map[string][]int{}}
	c, err := New(probe, reg, Options{Hostname: "health-host", SyncPowerStateInterval: -1, CheckProvisionStateInterval: -1, PowerFailureRecoveryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	probe.c = c
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	}()
	n, err := c.Enroll(ctx, &baremetal.Node{Name: "health-1", Driver: builtin.FakeHardware,
		DriverInfo: map[string]any{fake.HealthKey: string(driver.HealthWarning)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Manage(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		cur, err := st.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.ProvisionState == statemachine.Manageable && cur.Reservation == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not manageable: %s, reserved by %q", n.UUID, cur.ProvisionState, cur.Reservation)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.syncPowerStates(ctx)
	got, err := st.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Health != string(driver.HealthWarning) {
		t.Fatalf("health %q after the sync, want %q", got.Health, driver.HealthWarning)
	}
	probe.mu.Lock()
	counts := probe.seen[string(driver.HealthWarning)]
	probe.mu.Unlock()
	if len(counts) == 0 {
		t.Fatal("the health write was not seen")
	}
	for _, h := range counts {
		if h != 1 {
			t.Fatalf("the health write held %d counted reservations of the node, want 1", h)
		}
	}
	c.resv.mu.Lock()
	left := c.resv.held[n.UUID]
	c.resv.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d reservations of the node still counted after the sync", left)
	}
}

// TestReserveReleasesItsOwnPhantom: a reservation in this conductor's
// name that none of its goroutines holds (a reserve whose commit landed
// while an outage lost its answer) is released by the next reserve of
// the node, which then takes it. It used to wait for the phantom sweep,
// and the work retrying that very reserve every 200 ms kept the sweep
// from claiming the node: in the chaos test an undeploy's node stayed in
// deleting, reserved by its own live conductor, for 40 s after a
// database cut.
func TestReserveReleasesItsOwnPhantom(t *testing.T) {
	ctx := context.Background()
	st, reg := sqliteAndFakeRegistry(t)
	c, err := New(st, reg, Options{Hostname: "phantom-host", SyncPowerStateInterval: -1, CheckProvisionStateInterval: -1, PowerFailureRecoveryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Enroll(ctx, &baremetal.Node{Name: "phantom-1", Driver: builtin.FakeHardware})
	if err != nil {
		t.Fatal(err)
	}
	// The phantom: reserved in the store under this conductor's name,
	// behind the reservation book's back (as a lost answer leaves it).
	if _, err := st.ReserveNode(ctx, n.UUID, "phantom-host"); err != nil {
		t.Fatal(err)
	}
	got, err := c.reserve(ctx, n.UUID)
	if err != nil {
		t.Fatalf("reserve of a node this conductor's phantom holds: %v, want the node", err)
	}
	if got.Reservation != "phantom-host" {
		t.Errorf("reservation %q, want phantom-host", got.Reservation)
	}
	c.resv.mu.Lock()
	held, suspect := c.resv.held[n.UUID], c.resv.suspects[n.UUID]
	c.resv.mu.Unlock()
	if held != 1 || suspect {
		t.Errorf("reservation book: held %d, suspect %v; want 1, false", held, suspect)
	}
	// Another conductor's reservation is never released this way.
	if err := st.ReleaseNode(ctx, n.UUID, "phantom-host"); err != nil {
		t.Fatal(err)
	}
	c.resv.released(n.UUID)
	if _, err := st.ReserveNode(ctx, n.UUID, "other-host"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.reserve(ctx, n.UUID); !errors.Is(err, baremetal.ErrNodeLocked) {
		t.Fatalf("reserve of a node another conductor holds: %v, want ErrNodeLocked", err)
	}
	// Nor is this conductor's own live reservation.
	if err := st.ReleaseNode(ctx, n.UUID, "other-host"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.reserve(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.reserve(ctx, n.UUID); !errors.Is(err, baremetal.ErrNodeLocked) {
		t.Fatalf("second reserve while the first holds: %v, want ErrNodeLocked", err)
	}
}

// TestPowerSyncMaintenanceReleasesOnce: a power sync that finds the
// hardware's power state differing from the record past
// PowerStateSyncMaxRetries releases its reservation, puts the node in
// maintenance under a reservation of its own, and must not release
// again. Its deferred release used to run as well, and with the node
// already released it took one count from whatever else of this
// conductor held or was taking the node: here a reservation counted
// before the sync, as an operation's in flight is.
func TestPowerSyncMaintenanceReleasesOnce(t *testing.T) {
	ctx := context.Background()
	st, reg := sqliteAndFakeRegistry(t)
	n := &baremetal.Node{Name: "mismatch-1", Driver: builtin.FakeHardware, ProvisionState: statemachine.Available,
		PowerState: driver.PowerOn, DriverInternalInfo: map[string]any{fake.PowerStateKey: string(driver.PowerOff)},
		// The sync's attempt to force the power back fails, so the
		// second sync finds the mismatch past the one retry allowed.
		DriverInfo: map[string]any{fake.FailKey: "power.set_power_state"}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	c := launchQuiet(t, st, reg, Options{Hostname: "mismatch-host", PowerStateSyncMaxRetries: 1})
	// Another operation of this conductor is taking the node.
	if err := c.resv.begin(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c.syncPowerStates(ctx)
	}
	got, err := st.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Maintenance || got.PowerState != driver.PowerOff || got.Reservation != "" {
		t.Fatalf("after the sync: maintenance %v, power %q, reserved by %q; want maintenance, power off, unreserved",
			got.Maintenance, got.PowerState, got.Reservation)
	}
	c.resv.mu.Lock()
	held := c.resv.held[n.UUID]
	c.resv.mu.Unlock()
	if held != 1 {
		t.Fatalf("%d reservations of the node counted after the sync, want the other operation's 1", held)
	}
}
