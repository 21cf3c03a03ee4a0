package conductor_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/hashring"
)

// clusterEpoch is where the manual clocks of these tests start.
var clusterEpoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// clusterDSN returns a DSN of a fresh schema in the database named by
// ANVIL_TEST_POSTGRES_DSN, dropped when t ends; it skips t without it.
func clusterDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv("ANVIL_TEST_POSTGRES_DSN")
	if base == "" {
		t.Skip("ANVIL_TEST_POSTGRES_DSN not set: PostgreSQL cluster test skipped")
	}
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "anvil_cluster_" + hex.EncodeToString(b[:])
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		_ = db.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("ANVIL_TEST_POSTGRES_DSN must be a URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// clusterStore opens a store whose clock is clock: SQLite in a temporary
// file, or PostgreSQL in a fresh schema when pg is set (skipping without a
// DSN). It returns the DSN too ("" for SQLite).
func clusterStore(t *testing.T, pg bool, clock clock.Clock) (baremetal.Store, string) {
	t.Helper()
	ctx := context.Background()
	if pg {
		dsn := clusterDSN(t)
		s, err := sqlstore.OpenPostgres(ctx, dsn, sqlstore.Options{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, dsn
	}
	s, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "cluster.db"), sqlstore.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ""
}

func register(t *testing.T, s baremetal.Store, host, group string, types ...string) {
	t.Helper()
	var hws []baremetal.HardwareInterface
	for _, hw := range types {
		hws = append(hws, baremetal.HardwareInterface{HardwareType: hw, InterfaceType: "power", InterfaceName: "fake", Default: true})
	}
	if _, err := s.RegisterConductor(context.Background(), baremetal.ConductorRegistration{
		Hostname: host, ConductorGroup: group, Drivers: types, Interfaces: hws, UpdateExisting: true}); err != nil {
		t.Fatal(err)
	}
}

func forBothStores(t *testing.T, fn func(t *testing.T, pg bool)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, false) })
	t.Run("postgres", func(t *testing.T) { fn(t, true) })
}

func TestOwnershipPartitionsNodesAmongLiveConductors(t *testing.T) {
	t.Parallel()
	forBothStores(t, func(t *testing.T, pg bool) {
		ctx := context.Background()
		clock := storetest.NewManualClock(clusterEpoch)
		s, _ := clusterStore(t, pg, clock)
		hosts := []string{"c1", "c2", "c3"}
		for _, h := range hosts {
			register(t, s, h, "", builtin.FakeHardware)
		}
		views := map[string]*conductor.Ownership{}
		for _, h := range hosts {
			o, err := conductor.NewOwnership(s, h, "", conductor.RingOptions{HeartbeatTimeout: time.Minute}, clock, nil)
			if err != nil {
				t.Fatal(err)
			}
			if changed, err := o.Refresh(ctx); err != nil || !changed {
				t.Fatalf("first Refresh = %v, %v; want a change", changed, err)
			}
			views[h] = o
		}
		nodes := make([]*baremetal.Node, 300)
		for i := range nodes {
			nodes[i] = &baremetal.Node{UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Driver: builtin.FakeHardware}
		}
		count := map[string]int{}
		for _, n := range nodes {
			owners := 0
			for h, o := range views {
				if o.Owns(n) {
					owners++
					count[h]++
					if got, err := o.OwnerOf(n); err != nil || got != h {
						t.Fatalf("OwnerOf(%s) = %q, %v; Owns says %s", n.UUID, got, err, h)
					}
				}
			}
			if owners != 1 {
				t.Fatalf("node %s has %d owners, want exactly 1", n.UUID, owners)
			}
		}
		for _, h := range hosts {
			if count[h] < 60 {
				t.Errorf("conductor %s owns %d of 300 nodes; want a fair share (%v)", h, count[h], count)
			}
		}

		// c3 stops heart-beating: after the heartbeat timeout the others
		// split its nodes and keep their own.
		before := map[string]string{}
		for _, n := range nodes {
			before[n.UUID], _ = views["c1"].OwnerOf(n)
		}
		clock.Advance(61 * time.Second)
		for _, h := range []string{"c1", "c2"} {
			if err := s.KeepaliveConductor(ctx, h, true); err != nil {
				t.Fatal(err)
			}
		}
		for _, h := range []string{"c1", "c2"} {
			if changed, err := views[h].Refresh(ctx); err != nil || !changed {
				t.Fatalf("%s Refresh after c3's death = %v, %v; want a change", h, changed, err)
			}
			if got := views[h].Alive(); len(got) != 2 {
				t.Fatalf("%s sees alive %v, want c1 and c2", h, got)
			}
		}
		for _, n := range nodes {
			after, err := views["c1"].OwnerOf(n)
			if err != nil {
				t.Fatal(err)
			}
			if after == "c3" {
				t.Fatalf("node %s still owned by the dead c3", n.UUID)
			}
			if before[n.UUID] != "c3" && after != before[n.UUID] {
				t.Errorf("node %s moved from live %s to %s: the ring must only move the dead conductor's nodes", n.UUID, before[n.UUID], after)
			}
		}
	})
}

func TestOwnershipGroupsAndHardwareTypes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewManualClock(clusterEpoch)
	s, _ := clusterStore(t, false, clock)
	register(t, s, "a", "Rack1", builtin.FakeHardware, "ipmi")
	register(t, s, "b", "rack1", "ipmi")
	register(t, s, "c", "", builtin.FakeHardware)
	o, err := conductor.NewOwnership(s, "a", "rack1", conductor.RingOptions{}, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := o.Rings().Keys(); fmt.Sprint(got) != "[:fake-hardware rack1:fake-hardware rack1:ipmi]" {
		t.Fatalf("ring keys = %v", got)
	}
	// Only a serves fake-hardware in rack1 (groups compare case-insensitively).
	n := &baremetal.Node{UUID: "11111111-1111-4111-8111-111111111111", Driver: builtin.FakeHardware, ConductorGroup: "RACK1"}
	if !o.Owns(n) {
		t.Errorf("a does not own a fake-hardware node of its only group ring")
	}
	// A node of the default group is never a's, even if the ring lookup
	// would name a conductor.
	if o.Owns(&baremetal.Node{UUID: n.UUID, Driver: builtin.FakeHardware}) {
		t.Errorf("a owns a node of another conductor group")
	}
	_, err = o.OwnerOf(&baremetal.Node{UUID: n.UUID, Driver: builtin.FakeHardware, ConductorGroup: "rack9"})
	var nc *conductor.NoConductorError
	if !errors.Is(err, conductor.ErrNoConductor) || !errors.As(err, &nc) || nc.Group != "rack9" || nc.HardwareType != builtin.FakeHardware || len(nc.Alive) != 3 {
		t.Fatalf("OwnerOf for a group nobody serves = %v, want a *NoConductorError naming rack9 and 3 live conductors", err)
	}
	_, err = o.OwnerOf(&baremetal.Node{UUID: n.UUID, Driver: "redfish", ConductorGroup: "rack1"})
	if !errors.Is(err, conductor.ErrNoConductor) {
		t.Fatalf("OwnerOf for a hardware type nobody enables = %v, want ErrNoConductor", err)
	}
}

func TestOwnershipIronicCompatibleAgreesWithTheRing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewManualClock(clusterEpoch)
	s, _ := clusterStore(t, false, clock)
	for _, h := range []string{"cond-a", "cond-b", "cond-c"} {
		register(t, s, h, "", builtin.FakeHardware)
	}
	cfg := hashring.Config{Algorithm: hashring.IronicCompatible}
	o, err := conductor.NewOwnership(s, "cond-a", "", conductor.RingOptions{Ring: cfg}, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	want, err := hashring.New(cfg, hashring.Names("cond-a", "cond-b", "cond-c")...)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		n := &baremetal.Node{UUID: fmt.Sprintf("aaaaaaaa-0000-4000-8000-%012d", i), Driver: builtin.FakeHardware}
		got, err := o.OwnerOf(n)
		w, _ := want.Get(n.UUID)
		if err != nil || got != w {
			t.Fatalf("node %s: owner %q (%v), the Ironic-compatible ring says %q", n.UUID, got, err, w)
		}
	}
	if _, err := conductor.NewOwnership(s, "x", "", conductor.RingOptions{Ring: hashring.Config{Algorithm: 9}}, clock, nil); !errors.Is(err, hashring.ErrInvalidConfig) {
		t.Fatalf("unknown algorithm: %v, want ErrInvalidConfig", err)
	}
}

func TestOwnershipRunRefreshesOnTimerAndWake(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := storetest.NewManualClock(clusterEpoch)
	s, _ := clusterStore(t, false, clock)
	register(t, s, "a", "", builtin.FakeHardware)
	o, err := conductor.NewOwnership(s, "a", "", conductor.RingOptions{ResetInterval: 15 * time.Second}, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan struct{}, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.Run(ctx, func(context.Context) { changes <- struct{}{} })
	}()
	waitWaiters(t, clock, 1)
	register(t, s, "b", "", builtin.FakeHardware)
	clock.Advance(15 * time.Second) // the timer
	select {
	case <-changes:
	case <-time.After(5 * time.Second):
		t.Fatal("no rebuild after the reset interval")
	}
	if got := o.Alive(); fmt.Sprint(got) != "[a b]" {
		t.Fatalf("alive after the timer = %v", got)
	}
	if err := s.UnregisterConductor(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	o.Wake() // a membership notification, no time passing
	select {
	case <-changes:
	case <-time.After(5 * time.Second):
		t.Fatal("no rebuild after Wake")
	}
	if got := o.Alive(); fmt.Sprint(got) != "[a]" {
		t.Fatalf("alive after b left = %v", got)
	}
	cancel()
	<-done
}

func waitWaiters(t *testing.T, clock *storetest.ManualClock, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for clock.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d clock waiters, want %d", clock.Waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLocalNotifier(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := baremetal.NewLocalNotifier()
	a, cancelA := n.Subscribe(baremetal.TopicIntent)
	b, cancelB := n.Subscribe(baremetal.TopicIntent)
	m, cancelM := n.Subscribe(baremetal.TopicMembership)
	defer cancelM()
	if err := n.Publish(ctx, baremetal.TopicIntent, "node-1"); err != nil {
		t.Fatal(err)
	}
	if got := <-a; got != "node-1" {
		t.Fatalf("a got %q", got)
	}
	if got := <-b; got != "node-1" {
		t.Fatalf("b got %q", got)
	}
	select {
	case got := <-m:
		t.Fatalf("membership subscriber got an intent payload %q", got)
	default:
	}
	cancelA()
	cancelA() // idempotent
	cancelB()
	if err := n.Publish(ctx, baremetal.TopicIntent, "node-2"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-a:
		t.Fatalf("cancelled subscriber got %q", got)
	default:
	}
}

func TestPostgresNotifierCrossesConnections(t *testing.T) {
	t.Parallel()
	dsn := clusterDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n1, err := sqlstore.NewNotifier(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	n2, err := sqlstore.NewNotifier(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	ch, stop := n2.Subscribe(baremetal.TopicMembership)
	defer stop()
	other, stopOther := n2.Subscribe(baremetal.TopicIntent)
	defer stopOther()
	if err := n1.Publish(ctx, baremetal.TopicMembership, "c1"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-ch:
		if got != "c1" {
			t.Fatalf("payload %q, want c1", got)
		}
	case <-ctx.Done():
		t.Fatal("membership notification not received through PostgreSQL")
	}
	select {
	case got := <-other:
		t.Fatalf("intent subscriber received %q from the membership topic", got)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestPowerSyncOnlyOwnedNodes checks that each conductor's power sync
// acts on the nodes the ring gives it and leaves the others to their
// owner: with every node's hardware on while the database says off, a's
// pass corrects exactly a's nodes, and b's pass then corrects the rest.
func TestPowerSyncOnlyOwnedNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewManualClock(clusterEpoch)
	s, _ := clusterStore(t, false, clock)
	cl := conductor.ClusterOptions{Notifier: baremetal.NewLocalNotifier()}
	a := startMember(t, s, "a", fake.Config{}, cl)
	b := startMember(t, s, "b", fake.Config{}, cl)
	waitAlive(t, a, 2)
	waitAlive(t, b, 2)
	uuids := fleetNodes(t, s, 40, "manageable", "power on")
	owner := map[string]string{}
	for _, id := range uuids {
		n, err := s.GetNode(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if owner[id], err = a.Ownership().OwnerOf(n); err != nil {
			t.Fatal(err)
		}
	}
	corrected := func(id string) bool {
		n, err := s.GetNode(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return n.DriverInternalInfo[fake.PowerStateKey] == "power off" && historyHas(t, s, id, "forcing it back")
	}
	a.SyncPowerStates(ctx)
	ofA := 0
	for _, id := range uuids {
		if owner[id] == "a" {
			ofA++
		}
		if got, want := corrected(id), owner[id] == "a"; got != want {
			t.Errorf("after a's sync, node %s (owner %s): corrected %v, want %v", id, owner[id], got, want)
		}
	}
	if ofA == 0 || ofA == len(uuids) {
		t.Fatalf("a owns %d of %d nodes; the test needs both conductors to own some", ofA, len(uuids))
	}
	b.SyncPowerStates(ctx)
	for _, id := range uuids {
		if !corrected(id) {
			t.Errorf("after both syncs, node %s (owner %s) not corrected", id, owner[id])
		}
	}
}
