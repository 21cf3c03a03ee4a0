package faultlab_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/internal/faultlab"
	"github.com/anvilmetal/anvil/statemachine"
)

// newFleet opens a PostgreSQL store of the test's own schema through a
// faultlab proxy, starts a conductor on it with fake hardware whose every
// operation takes delay, and enrolls n nodes plus a spare one, all made
// available.
func newFleet(t *testing.T, n int, delay time.Duration) faultlab.Fleet {
	t.Helper()
	dsn := sqlstoretest.PostgresDSN(t)
	up, err := faultlab.Upstream(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultlab.Listen(up)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	pdsn, err := faultlab.RewriteDSN(dsn, p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := sqlstore.OpenPostgres(ctx, pdsn, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{Delays: map[string]time.Duration{"*": delay}})); err != nil {
		t.Fatal(err)
	}
	logLevel := slog.LevelError
	if testing.Verbose() {
		logLevel = slog.LevelWarn
	}
	c, err := conductor.New(store, reg, conductor.Options{
		Hostname: fmt.Sprintf("outage-%d", time.Now().UnixNano()),
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Restore()
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	f := faultlab.Fleet{Conductor: c, Store: store, Proxy: p}
	uuids := make([]string, n+1)
	for i := range uuids {
		nd, err := c.Enroll(ctx, &baremetal.Node{Name: fmt.Sprintf("outage-%d", i), Driver: builtin.FakeHardware})
		if err != nil {
			t.Fatal(err)
		}
		uuids[i] = nd.UUID
	}
	f.Spare, f.Nodes = uuids[0], uuids[1:]
	forAll(t, f, uuids, statemachine.Manageable, c.Manage)
	forAll(t, f, uuids, statemachine.Available, c.Provide)
	return f
}

// forAll runs verb on every node, 16 at a time, and waits until each is
// in state with no reservation.
func forAll(t *testing.T, f faultlab.Fleet, uuids []string, state statemachine.State, verb func(context.Context, string) error) time.Duration {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make(chan error, len(uuids))
	for _, u := range uuids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			for {
				err := verb(ctx, u)
				if err == nil || !isLimit(err) {
					errs <- err
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("verb towards %s: %v", state, err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, u := range uuids {
		for {
			n, err := f.Store.GetNode(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			if n.ProvisionState == state && n.Reservation == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s: %s (reserved by %q, last error %q), want %s", u, n.ProvisionState, n.Reservation, n.LastError, state)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return time.Since(start)
}

func isLimit(err error) bool {
	_, ok := err.(*conductor.ConcurrentActionLimitError)
	return ok
}

// checkRecovery fails t unless every node settled with no reservation
// within bound of the restore, reads and writes came back together, and
// no call hung during the cut.
func checkRecovery(t *testing.T, rep faultlab.Report, baseline time.Duration) {
	t.Helper()
	t.Logf("cut %v: reads after %v, writes after %v, fleet settled after %v, slowest call during the cut %v, verbs refused %d, states %v, failed %v",
		rep.Cut, rep.ReadAfter, rep.WriteAfter, rep.Recovered, rep.SlowestCall, rep.VerbErrors, rep.States, rep.Failed)
	if len(rep.Stuck) > 0 {
		t.Fatalf("%d nodes still busy or reserved after the restore: %v", len(rep.Stuck), rep.Stuck)
	}
	// The bound: settled within 30 s of the database's return;
	// a loaded machine gets its baseline's multiple.
	if bound := max(30*time.Second, 5*baseline); rep.Recovered > bound {
		t.Errorf("the fleet settled %v after the restore, want within %v", rep.Recovered, bound)
	}
	// Writes resume within 2 s of reads (the reads' own delay is the
	// connection pool's reconnect, the baseline of this run).
	if rep.WriteAfter > rep.ReadAfter+2*time.Second {
		t.Errorf("writes resumed %v after the restore, reads %v: want writes within 2 s of reads", rep.WriteAfter, rep.ReadAfter)
	}
	// A probe during the cut fails fast: a request never hangs for the
	// whole outage.
	if rep.SlowestCall > rep.Cut/2+time.Second {
		t.Errorf("a call during the %v cut took %v", rep.Cut, rep.SlowestCall)
	}
}

func TestOutageDuringUndeploy(t *testing.T) {
	f := newFleet(t, 40, 30*time.Millisecond)
	c := f.Conductor
	deploy := func(ctx context.Context, u string) error { return c.Deploy(ctx, u, conductor.DeployOptions{}) }
	baseline := forAll(t, f, f.Nodes, statemachine.Active, deploy)
	rep, err := faultlab.Run(context.Background(), f, faultlab.Cut{
		Verb: c.Undeploy, After: baseline / 4, Length: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRecovery(t, rep, baseline)
}

func TestOutageDuringDeploy(t *testing.T) {
	f := newFleet(t, 40, 30*time.Millisecond)
	c := f.Conductor
	// The baseline: the fleet's deploy with the database up.
	undeploy := c.Undeploy
	deploy := func(ctx context.Context, u string) error { return c.Deploy(ctx, u, conductor.DeployOptions{}) }
	baseline := forAll(t, f, f.Nodes, statemachine.Active, deploy)
	forAll(t, f, f.Nodes, statemachine.Available, undeploy)
	rep, err := faultlab.Run(context.Background(), f, faultlab.Cut{
		Verb: deploy, After: baseline / 4, Length: 3 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRecovery(t, rep, baseline)
}
