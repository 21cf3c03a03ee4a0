package conductor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// clusterNotifier returns the notifier conductors of a test share: the
// in-process one on SQLite, LISTEN/NOTIFY on PostgreSQL.
func clusterNotifier(t *testing.T, dsn string) baremetal.ClusterNotifier {
	t.Helper()
	if dsn == "" {
		return baremetal.NewLocalNotifier()
	}
	n, err := sqlstore.NewNotifier(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// startMember starts a cluster conductor on its own manual clock, which
// the tests never advance: its periodic tasks and keepalives run only when
// a test calls them, so the store's clock alone decides who is alive.
func startMember(t *testing.T, s baremetal.Store, host string, fakeCfg fake.Config, cl conductor.ClusterOptions) *conductor.Conductor {
	t.Helper()
	return startMemberWith(t, s, host, fakeCfg, cl, conductor.Options{Clock: storetest.NewManualClock(clusterEpoch)})
}

// startMemberWith is startMember with the conductor's options (clock and
// periodic intervals); hostname, lock policy, intent poll and cluster
// options are set as startMember sets them.
func startMemberWith(t *testing.T, s baremetal.Store, host string, fakeCfg fake.Config, cl conductor.ClusterOptions, opts conductor.Options) *conductor.Conductor {
	t.Helper()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fakeCfg)); err != nil {
		t.Fatal(err)
	}
	return startMemberReg(t, s, host, reg, conductor.AgentSettings{}, cl, opts)
}

// startMemberReg is startMemberWith with the conductor's driver registry
// and agent settings.
func startMemberReg(t *testing.T, s baremetal.Store, host string, reg *driver.Registry, agent conductor.AgentSettings, cl conductor.ClusterOptions, opts conductor.Options) *conductor.Conductor {
	t.Helper()
	if cl.Ring.HeartbeatTimeout == 0 {
		cl.Ring.HeartbeatTimeout = time.Minute
	}
	if cl.Ring.ResetInterval == 0 {
		cl.Ring.ResetInterval = -1
	}
	opts.Hostname = host
	opts.LockPolicy = &baremetal.LockPolicy{Attempts: 100, Interval: 10 * time.Millisecond, Clock: clock.System()}
	opts.IntentPollInterval = -1
	opts.Cluster = &cl
	opts.Agent = agent
	c, err := conductor.New(s, reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("Stop %s: %v", host, err)
		}
	})
	return c
}

// deployVia manages, provides and deploys node uuid through c's verbs,
// waiting in s for each stable state on the way.
func deployVia(ctx context.Context, t *testing.T, c *conductor.Conductor, s baremetal.Store, uuid string) {
	t.Helper()
	if err := c.Manage(ctx, uuid); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, uuid, statemachine.Manageable)
	if err := c.Provide(ctx, uuid); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, uuid, statemachine.Available)
	if err := c.Deploy(ctx, uuid, conductor.DeployOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitState(t *testing.T, s baremetal.Store, uuid string, want statemachine.State) *baremetal.Node {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		n, err := s.GetNode(context.Background(), uuid)
		if err != nil {
			t.Fatal(err)
		}
		if n.ProvisionState == want && n.Reservation == "" {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: state %q target %q reserved by %q last error %q; want %q",
				uuid, n.ProvisionState, n.TargetProvisionState, n.Reservation, n.LastError, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ownedBy enrolls nodes through c until one is owned by host.
func ownedBy(t *testing.T, c *conductor.Conductor, host string) *baremetal.Node {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 64; i++ {
		n, err := c.Enroll(ctx, &baremetal.Node{Driver: builtin.FakeHardware})
		if err != nil {
			t.Fatal(err)
		}
		if owner, err := c.Ownership().OwnerOf(n); err == nil && owner == host {
			return n
		}
	}
	t.Fatalf("no node hashed to %s in 64 tries", host)
	return nil
}

func historyHas(t *testing.T, s baremetal.Store, uuid, substr string) bool {
	t.Helper()
	hs, err := s.ListHistory(context.Background(), uuid, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if strings.Contains(h.Message, substr) {
			return true
		}
	}
	return false
}

// TestTakeoverOfDeadConductor kills (freezes) a conductor in the middle of
// a deploy step, lets its keepalive age past the heartbeat timeout, and
// checks what the survivor's orphan check does: release the reservation,
// then resume at the interrupted step when it is declared safe to re-run,
// or fail the deploy as Ironic does otherwise. The frozen conductor's
// late write is fenced off.
func TestTakeoverOfDeadConductor(t *testing.T) {
	t.Parallel()
	for _, safe := range []bool{true, false} {
		t.Run(fmt.Sprintf("rerun-safe=%v", safe), func(t *testing.T) {
			forBothStores(t, func(t *testing.T, pg bool) { takeover(t, pg, safe) })
		})
	}
}

func takeover(t *testing.T, pg, safe bool) {
	ctx := context.Background()
	clock := storetest.NewManualClock(clusterEpoch)
	s, dsn := clusterStore(t, pg, clock)
	notifier := clusterNotifier(t, dsn)
	entered := make(chan struct{}, 1)
	frozen := fake.Config{
		Delays: map[string]time.Duration{"deploy.deploy": time.Hour},
		Sleep: func(ctx context.Context, _ time.Duration) error {
			entered <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		},
	}
	cl := conductor.ClusterOptions{Notifier: notifier}
	if safe {
		cl.RerunSafeSteps = []string{"deploy.deploy"}
	}
	victim := startMember(t, s, "victim", frozen, cl)
	survivor := startMember(t, s, "survivor", fake.Config{}, cl)
	waitAlive(t, survivor, 2)
	waitAlive(t, victim, 2)

	n := ownedBy(t, survivor, "victim")
	// Verbs go to the survivor; the victim, the owner, executes them.
	deployVia(ctx, t, survivor, s, n.UUID)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the victim never started the deploy step")
	}
	mid, _ := s.GetNode(ctx, n.UUID)
	if mid.ProvisionState != "deploying" || mid.Reservation != "victim" || mid.DeployStep["step"] != "deploy" {
		t.Fatalf("mid-step node: %s reserved by %q step %v", mid.ProvisionState, mid.Reservation, mid.DeployStep)
	}

	// A second node of the victim's with a power action in flight.
	p := ownedBy(t, survivor, "victim")
	p.TargetPowerState = "power on"
	if err := s.UpdateNode(ctx, p, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReserveNode(ctx, p.UUID, "victim"); err != nil {
		t.Fatal(err)
	}

	// Before the heartbeat timeout nothing is taken.
	clock.Advance(30 * time.Second)
	if err := s.KeepaliveConductor(ctx, "survivor", true); err != nil {
		t.Fatal(err)
	}
	survivor.CheckOrphanNodes(ctx)
	if got, _ := s.GetNode(ctx, n.UUID); got.Reservation != "victim" {
		t.Fatalf("reservation broken before the heartbeat timeout: %q", got.Reservation)
	}
	clock.Advance(31 * time.Second)
	if err := s.KeepaliveConductor(ctx, "survivor", true); err != nil {
		t.Fatal(err)
	}
	survivor.CheckOrphanNodes(ctx)

	if safe {
		got := waitState(t, s, n.UUID, statemachine.Active)
		if got.LastError != "" {
			t.Errorf("resumed node has last_error %q", got.LastError)
		}
		if !historyHas(t, s, n.UUID, "resuming deployment at step deploy.deploy") {
			t.Errorf("no history note of the resume")
		}
	} else {
		got := waitState(t, s, n.UUID, statemachine.DeployFailed)
		if !strings.Contains(got.LastError, "not declared safe to re-run") || !strings.Contains(got.LastError, "survivor") {
			t.Errorf("last_error = %q; want the reason and the new owner", got.LastError)
		}
	}
	if !historyHas(t, s, n.UUID, "reservation of dead conductor victim released by conductor survivor") {
		t.Errorf("no history note of the released reservation")
	}
	pw := waitState(t, s, p.UUID, statemachine.Enroll)
	if pw.TargetPowerState != "" || !strings.Contains(pw.LastError, "Pending power operation to power on was aborted") {
		t.Errorf("power node: target %q last_error %q; want the pending action cleared and explained", pw.TargetPowerState, pw.LastError)
	}
	if !historyHas(t, s, p.UUID, "was aborted") {
		t.Errorf("no history note of the aborted power action")
	}

	// The frozen victim wakes up: its late writes are fenced off.
	before, _ := s.GetNode(ctx, n.UUID)
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_ = victim.Stop(sctx)
	after, _ := s.GetNode(ctx, n.UUID)
	if after.ProvisionState != before.ProvisionState || after.Version != before.Version {
		t.Fatalf("the dead conductor overwrote the new owner's work: %s v%d -> %s v%d",
			before.ProvisionState, before.Version, after.ProvisionState, after.Version)
	}

	if safe {
		// The active node was prepared by the victim: the survivor
		// re-prepares it and takes its affinity.
		survivor.SyncLocalState(ctx)
		rec, err := s.GetConductor(ctx, "survivor")
		if err != nil {
			t.Fatal(err)
		}
		got := waitState(t, s, n.UUID, statemachine.Active)
		if got.ConductorAffinity != rec.ID || !historyHas(t, s, n.UUID, "re-prepared the active node") {
			t.Errorf("affinity %d after sync local state, want %d with a history note", got.ConductorAffinity, rec.ID)
		}
	}
}

func waitAlive(t *testing.T, c *conductor.Conductor, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(c.Ownership().Alive()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s sees %v alive, want %d conductors", c.Hostname(), c.Ownership().Alive(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestDrainHandsOverWithoutFailing drains one of two conductors while it
// runs a step: the step finishes, the node is not failed, the drained
// conductor is not taken for dead, and its nodes move to the survivor.
func TestDrainHandsOverWithoutFailing(t *testing.T) {
	t.Parallel()
	forBothStores(t, func(t *testing.T, pg bool) {
		ctx := context.Background()
		clock := storetest.NewManualClock(clusterEpoch)
		s, dsn := clusterStore(t, pg, clock)
		notifier := clusterNotifier(t, dsn)
		release := make(chan struct{})
		var once sync.Once
		entered := make(chan struct{})
		slow := fake.Config{
			Delays: map[string]time.Duration{"deploy.deploy": time.Hour},
			Sleep: func(ctx context.Context, _ time.Duration) error {
				once.Do(func() { close(entered) })
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			},
		}
		cl := conductor.ClusterOptions{Notifier: notifier}
		a := startMember(t, s, "a", slow, cl)
		b := startMember(t, s, "b", fake.Config{}, cl)
		waitAlive(t, a, 2)
		waitAlive(t, b, 2)
		n := ownedBy(t, b, "a")
		m := ownedBy(t, b, "a")
		for _, id := range []string{n.UUID, m.UUID} {
			if err := b.Manage(ctx, id); err != nil {
				t.Fatal(err)
			}
			waitState(t, s, id, statemachine.Manageable)
			if err := b.Provide(ctx, id); err != nil {
				t.Fatal(err)
			}
			waitState(t, s, id, statemachine.Available)
		}
		if err := b.Deploy(ctx, n.UUID, conductor.DeployOptions{}); err != nil {
			t.Fatal(err)
		}
		<-entered
		drained := make(chan error, 1)
		go func() { drained <- a.Drain(ctx) }()
		waitAlive(t, b, 1)
		// The drained conductor is not dead: its reservation holds.
		clock.Advance(10 * time.Second)
		b.CheckOrphanNodes(ctx)
		if got, _ := s.GetNode(ctx, n.UUID); got.Reservation != "a" {
			t.Fatalf("draining conductor's reservation broken: %q", got.Reservation)
		}
		// New work on a's other node goes to b.
		if owner, err := b.NodeOwner(ctx, m.UUID); err != nil || owner != "b" {
			t.Fatalf("owner of a's node after the drain = %q, %v; want b", owner, err)
		}
		if err := b.Deploy(ctx, m.UUID, conductor.DeployOptions{}); err != nil {
			t.Fatal(err)
		}
		waitState(t, s, m.UUID, statemachine.Active)
		close(release)
		if err := <-drained; err != nil {
			t.Fatalf("Drain: %v", err)
		}
		got := waitState(t, s, n.UUID, statemachine.Active)
		if got.LastError != "" {
			t.Errorf("drained node has last_error %q", got.LastError)
		}
		rec, err := s.GetConductor(ctx, "a")
		if err != nil || rec.Online {
			t.Errorf("drained conductor row: %+v, %v; want offline", rec, err)
		}
	})
}

func TestVerbOnUnservedGroupIsRefused(t *testing.T) {
	t.Parallel()
	synctest.Test(t, verbOnUnservedGroupIsRefused)
}

func verbOnUnservedGroupIsRefused(t *testing.T) {
	ctx := context.Background()
	s, _ := clusterStore(t, false, storetest.NewManualClock(clusterEpoch))
	c := startMember(t, s, "only", fake.Config{}, conductor.ClusterOptions{})
	n, err := c.Enroll(ctx, &baremetal.Node{Driver: builtin.FakeHardware, ConductorGroup: "rack9"})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Manage(ctx, n.UUID)
	var nc *conductor.NoConductorError
	if !errors.Is(err, conductor.ErrNoConductor) || !errors.As(err, &nc) || nc.Group != "rack9" || nc.Node != n.UUID {
		t.Fatalf("Manage on a group nobody serves = %v; want a *NoConductorError naming the node and rack9", err)
	}
	got, _ := s.GetNode(ctx, n.UUID)
	if got.ProvisionState != "enroll" || got.Reservation != "" {
		t.Fatalf("refused verb changed the node: %s reserved by %q", got.ProvisionState, got.Reservation)
	}
	if _, err := c.NodeOwner(ctx, n.UUID); !errors.Is(err, conductor.ErrNoConductor) {
		t.Fatalf("NodeOwner = %v, want ErrNoConductor", err)
	}
}

// TestTakeoverRestartsRunsThatHadNotStarted: a deploy and an automated
// clean interrupted before their first step start again from the
// beginning on the new owner; a manual clean, whose requested steps are
// gone, is failed with the reason.
func TestTakeoverRestartsRunsThatHadNotStarted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, takeoverRestartsRunsThatHadNotStarted)
}

func takeoverRestartsRunsThatHadNotStarted(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewManualClock(clusterEpoch)
	s, _ := clusterStore(t, false, clock)
	register(t, s, "ghost", "", builtin.FakeHardware)
	c := startMember(t, s, "survivor", fake.Config{}, conductor.ClusterOptions{})
	cases := []struct{ state, target, want statemachine.State }{
		{"deploying", "active", "active"},
		{"cleaning", "available", "available"},
		{"cleaning", "manageable", "clean failed"},
	}
	var ids []string
	for _, tc := range cases {
		n, err := c.Enroll(ctx, &baremetal.Node{Driver: builtin.FakeHardware})
		if err != nil {
			t.Fatal(err)
		}
		n.ProvisionState, n.TargetProvisionState = tc.state, tc.target
		if err := s.UpdateNode(ctx, n, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReserveNode(ctx, n.UUID, "ghost"); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, n.UUID)
	}
	clock.Advance(61 * time.Second)
	if err := s.KeepaliveConductor(ctx, "survivor", true); err != nil {
		t.Fatal(err)
	}
	c.CheckOrphanNodes(ctx)
	for i, tc := range cases {
		got := waitState(t, s, ids[i], tc.want)
		switch tc.want {
		case "clean failed":
			if !strings.Contains(got.LastError, "requested steps are gone") || !got.Maintenance {
				t.Errorf("manual clean: last_error %q maintenance %v", got.LastError, got.Maintenance)
			}
		default:
			if !historyHas(t, s, ids[i], "restarting") {
				t.Errorf("%s: no history note of the restart", tc.state)
			}
		}
	}
}

// TestDeployRecordsAffinity checks that a deploy records the conductor
// that prepared the node (Ironic's do_node_deploy sets conductor_affinity),
// so that SyncLocalState re-prepares nothing while the node stays with the
// conductor that deployed it.
func TestDeployRecordsAffinity(t *testing.T) {
	t.Parallel()
	forBothStores(t, func(t *testing.T, pg bool) {
		ctx := context.Background()
		s, dsn := clusterStore(t, pg, storetest.NewManualClock(clusterEpoch))
		cl := conductor.ClusterOptions{Notifier: clusterNotifier(t, dsn)}
		owner := startMember(t, s, "owner", fake.Config{}, cl)
		other := startMember(t, s, "other", fake.Config{}, cl)
		waitAlive(t, owner, 2)
		waitAlive(t, other, 2)

		n := ownedBy(t, other, "owner")
		if err := other.Manage(ctx, n.UUID); err != nil {
			t.Fatal(err)
		}
		waitState(t, s, n.UUID, statemachine.Manageable)
		if err := other.Provide(ctx, n.UUID); err != nil {
			t.Fatal(err)
		}
		waitState(t, s, n.UUID, statemachine.Available)
		if err := other.Deploy(ctx, n.UUID, conductor.DeployOptions{}); err != nil {
			t.Fatal(err)
		}
		got := waitState(t, s, n.UUID, statemachine.Active)
		rec, err := s.GetConductor(ctx, "owner")
		if err != nil {
			t.Fatal(err)
		}
		if got.ConductorAffinity != rec.ID {
			t.Fatalf("affinity %d after the deploy, want the deploying conductor's id %d", got.ConductorAffinity, rec.ID)
		}
		owner.SyncLocalState(ctx)
		other.SyncLocalState(ctx)
		after := waitState(t, s, n.UUID, statemachine.Active)
		if after.ConductorAffinity != rec.ID || historyHas(t, s, n.UUID, "re-prepared the active node") {
			t.Fatalf("sync local state re-prepared a node its owner deployed (affinity %d, want %d)", after.ConductorAffinity, rec.ID)
		}
	})
}

// TestPromptTakeoverAtHeartbeatTimeout: on one fake clock shared by the
// store and the survivor, a peer keeps itself alive and then stops; its
// reservation is released one heartbeat timeout after its last keepalive
// (within the test's clock step), long before the next periodic orphan
// check, and not a step earlier.
func TestPromptTakeoverAtHeartbeatTimeout(t *testing.T) {
	t.Parallel()
	forBothStores(t, func(t *testing.T, pg bool) {
		const (
			timeout = 10 * time.Second
			tick    = 30 * time.Second
			step    = 250 * time.Millisecond
		)
		ctx := context.Background()
		clock := storetest.NewManualClock(clusterEpoch)
		s, _ := clusterStore(t, pg, clock)
		register(t, s, "ghost", "", builtin.FakeHardware)
		c := startMemberWith(t, s, "survivor", fake.Config{},
			conductor.ClusterOptions{Ring: conductor.RingOptions{HeartbeatTimeout: timeout}, OrphanCheckInterval: tick, SyncLocalStateInterval: -1},
			conductor.Options{Clock: clock, KeepaliveInterval: time.Second, SyncPowerStateInterval: -1,
				PowerFailureRecoveryInterval: -1, CheckProvisionStateInterval: -1})
		n, err := c.Enroll(ctx, &baremetal.Node{Driver: builtin.FakeHardware})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReserveNode(ctx, n.UUID, "ghost"); err != nil {
			t.Fatal(err)
		}

		// The conductor's loops are parked on the clock when the number
		// of pending timers is back to what it is at rest: at least the
		// keepalive's and the orphan check loop's tick and deadline (the
		// loop arms its deadline only after its first look at the
		// conductors table, a query).
		rest := settledWaiters(t, clock, 3)
		advance := func() {
			t.Helper()
			clock.Advance(step)
			deadline := time.Now().Add(10 * time.Second)
			for clock.Waiters() != rest {
				if time.Now().After(deadline) {
					t.Fatalf("loops not parked on the clock after an advance: %d timers pending, want %d", clock.Waiters(), rest)
				}
				time.Sleep(time.Millisecond)
			}
		}
		// The ghost keeps itself alive for a while, then dies.
		for clock.Now().Sub(clusterEpoch) < 4*time.Second {
			advance()
		}
		if err := s.KeepaliveConductor(ctx, "ghost", true); err != nil {
			t.Fatal(err)
		}
		rec, err := s.GetConductor(ctx, "ghost")
		if err != nil {
			t.Fatal(err)
		}
		last := rec.UpdatedAt
		for {
			advance()
			since := clock.Now().Sub(last)
			got, err := s.GetNode(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Reservation == "" {
				if since < timeout || since > timeout+step {
					t.Fatalf("reservation released %s after the last keepalive; want within (%s, %s]", since, timeout, timeout+step)
				}
				if !historyHas(t, s, n.UUID, "reservation of dead conductor ghost released by conductor survivor") {
					t.Errorf("no history note of the release")
				}
				t.Logf("released %s after the last keepalive (heartbeat timeout %s, clock step %s, check interval %s)", since, timeout, step, tick)
				return
			}
			if clock.Now().Sub(clusterEpoch) >= tick {
				t.Fatalf("reservation still held by ghost at the periodic check (%s after its last keepalive)", since)
			}
		}
	})
}

// settledWaiters returns the number of timers pending on clock once it
// is at least atLeast and has stayed the same for 50 ms: every loop of a
// started conductor is parked on the clock.
func settledWaiters(t *testing.T, clock *storetest.ManualClock, atLeast int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	n, since := clock.Waiters(), time.Now()
	for n < atLeast || time.Since(since) < 50*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("the conductor's timers never settled (%d pending, want at least %d)", n, atLeast)
		}
		time.Sleep(time.Millisecond)
		if w := clock.Waiters(); w != n {
			n, since = w, time.Now()
		}
	}
	return n
}

// TestTakeoverRetriesABusyNode: a node released from a dead conductor may
// be locked for a moment by something else (an agent heartbeat) between
// the takeover's listing and its reservation; the takeover retries as the
// lock policy says instead of leaving the node interrupted until the next
// orphan check.
func TestTakeoverRetriesABusyNode(t *testing.T) {
	t.Parallel()
	synctest.Test(t, takeoverRetriesABusyNode)
}

func takeoverRetriesABusyNode(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewManualClock(clusterEpoch)
	s, _ := clusterStore(t, false, clock)
	register(t, s, "ghost", "", builtin.FakeHardware)
	busy := &busyAfterListing{Store: s, holdFor: 50 * time.Millisecond}
	c := startMember(t, busy, "survivor", fake.Config{}, conductor.ClusterOptions{})
	n, err := c.Enroll(ctx, &baremetal.Node{Driver: builtin.FakeHardware})
	if err != nil {
		t.Fatal(err)
	}
	n.ProvisionState, n.TargetProvisionState = "deploying", "active"
	if err := s.UpdateNode(ctx, n, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReserveNode(ctx, n.UUID, "ghost"); err != nil {
		t.Fatal(err)
	}
	busy.arm(n.UUID)
	clock.Advance(61 * time.Second)
	if err := s.KeepaliveConductor(ctx, "survivor", true); err != nil {
		t.Fatal(err)
	}
	c.CheckOrphanNodes(ctx)
	if !busy.held() {
		t.Fatal("the node was not locked between the takeover's listing and its reservation")
	}
	waitState(t, s, n.UUID, statemachine.Active)
	if !historyHas(t, s, n.UUID, "restarting") {
		t.Errorf("no history note of the takeover")
	}
}

// busyAfterListing is a store that, once armed with a node, locks that
// node for holdFor under another holder right after the first listing of
// unreserved nodes that returns it, as a heartbeat processed at that
// moment does.
type busyAfterListing struct {
	baremetal.Store
	holdFor time.Duration
	mu      sync.Mutex
	node    string
	done    bool
	wg      sync.WaitGroup
}

func (b *busyAfterListing) arm(uuid string) {
	b.mu.Lock()
	b.node = uuid
	b.mu.Unlock()
}

func (b *busyAfterListing) held() bool {
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}

func (b *busyAfterListing) ListNodes(ctx context.Context, f baremetal.NodeFilter, p baremetal.Page) ([]*baremetal.Node, error) {
	nodes, err := b.Store.ListNodes(ctx, f, p)
	if err != nil || f.Reserved == nil || *f.Reserved {
		return nodes, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.node == "" || b.done {
		return nodes, err
	}
	for _, n := range nodes {
		if n.UUID != b.node {
			continue
		}
		if _, rerr := b.Store.ReserveNode(ctx, n.UUID, "heartbeat"); rerr != nil {
			return nil, rerr
		}
		b.done = true
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			time.Sleep(b.holdFor)
			_ = b.Store.ReleaseNode(context.Background(), n.UUID, "heartbeat")
		}()
	}
	return nodes, err
}

// TestReleaserTellsTheOwner: the conductor that releases a dead
// conductor's reservation of a node mid-operation that another conductor
// owns tells the owner, which takes the node over at once. Before, the
// node waited, unreserved in deploying, for the owner's next orphan check
// (a minute): the owner's own check had run before the release (the
// chaos test saw deploys and undeploys stuck for 50 s after a kill).
func TestReleaserTellsTheOwner(t *testing.T) {
	t.Parallel()
	forBothStores(t, func(t *testing.T, pg bool) {
		ctx := context.Background()
		clock := storetest.NewManualClock(clusterEpoch)
		s, dsn := clusterStore(t, pg, clock)
		cl := conductor.ClusterOptions{Notifier: clusterNotifier(t, dsn)}
		register(t, s, "ghost", "", builtin.FakeHardware)
		a := startMember(t, s, "a", fake.Config{}, cl)
		b := startMember(t, s, "b", fake.Config{}, cl)
		waitAlive(t, a, 3)
		waitAlive(t, b, 3)

		// A node b owns once the ghost is gone, left deploying by the
		// ghost with its reservation.
		clock.Advance(61 * time.Second)
		for _, h := range []string{"a", "b"} {
			if err := s.KeepaliveConductor(ctx, h, true); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []*conductor.Conductor{a, b} {
			if _, err := c.Ownership().Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			waitAlive(t, c, 2)
		}
		n := ownedBy(t, a, "b")
		n.ProvisionState, n.TargetProvisionState = statemachine.Deploying, statemachine.Active
		if err := s.UpdateNode(ctx, n, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReserveNode(ctx, n.UUID, "ghost"); err != nil {
			t.Fatal(err)
		}

		// a releases the ghost's reservation; it does not own the node.
		a.CheckOrphanNodes(ctx)
		if !historyHas(t, s, n.UUID, "reservation of dead conductor ghost released by conductor a") {
			t.Fatal("a did not release the ghost's reservation")
		}
		deadline := time.Now().Add(10 * time.Second)
		for !historyHas(t, s, n.UUID, "conductor b took the node over") {
			if time.Now().After(deadline) {
				got, _ := s.GetNode(ctx, n.UUID)
				t.Fatalf("b never took the node over: %s reserved by %q; the owner was not told", got.ProvisionState, got.Reservation)
			}
			time.Sleep(5 * time.Millisecond)
		}
		for {
			got, err := s.GetNode(ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Reservation == "" && (got.ProvisionState == statemachine.Active || got.ProvisionState == statemachine.DeployFailed) {
				t.Logf("after b's takeover: %s (last error %q)", got.ProvisionState, got.LastError)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after b's takeover the node is %s reserved by %q", got.ProvisionState, got.Reservation)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}
