package faultlab_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/internal/faultlab"
	"github.com/anvilmetal/anvil/statemachine"
)

// newFleet starts a faultlab fleet of n nodes on the test's own
// PostgreSQL schema.
func newFleet(t *testing.T, n int, delay time.Duration) faultlab.Fleet {
	t.Helper()
	logLevel := slog.LevelError
	if testing.Verbose() {
		logLevel = slog.LevelWarn
	}
	f, stop, err := faultlab.StartFleet(context.Background(), faultlab.FleetConfig{
		DSN: sqlstoretest.PostgresDSN(t), Nodes: n, Delay: delay,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return f
}

// forAll is faultlab.Drive, failing t on error.
func forAll(t *testing.T, f faultlab.Fleet, uuids []string, state statemachine.State, verb func(context.Context, string) error) time.Duration {
	t.Helper()
	d, err := faultlab.Drive(context.Background(), f, uuids, state, verb)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkRecovery fails t unless every node settled with no reservation
// within bound of the restore, reads and writes came back together, and
// no call hung during the cut.
func checkRecovery(t *testing.T, rep faultlab.Report, baseline time.Duration) {
	t.Helper()
	t.Logf("cut %v: reads after %v, writes after %v, fleet settled after %v, slowest call during the cut %v, slowest verb %v, verbs refused %d, states %v, failed %v",
		rep.Cut, rep.ReadAfter, rep.WriteAfter, rep.Recovered, rep.SlowestCall, rep.SlowestVerb, rep.VerbErrors, rep.States, rep.Failed)
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
	if rep.SlowestVerb > rep.Cut/2+time.Second {
		t.Errorf("a verb took %v (the cut lasted %v): it waited for the database instead of answering", rep.SlowestVerb, rep.Cut)
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
