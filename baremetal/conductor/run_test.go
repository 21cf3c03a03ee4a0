package conductor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// runnable and leaderElectionRunnable are copies of controller-runtime's
// manager.Runnable and manager.LeaderElectionRunnable (sigs.k8s.io/
// controller-runtime/pkg/manager), which the module does not import: it
// would drag Kubernetes in. mgr.Add accepts any value with these methods.
type runnable interface {
	Start(ctx context.Context) error
}

type leaderElectionRunnable interface {
	NeedLeaderElection() bool
}

var (
	_ runnable               = (*conductor.Conductor)(nil)
	_ leaderElectionRunnable = (*conductor.Conductor)(nil)
)

// newRunConductor builds (without starting) a conductor whose fake deploy
// takes deployDelay.
func newRunConductor(t *testing.T, store baremetal.Store, deployDelay time.Duration, opts conductor.Options) *conductor.Conductor {
	t.Helper()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{Delays: map[string]time.Duration{"deploy.deploy": deployDelay}})); err != nil {
		t.Fatal(err)
	}
	opts.Hostname = fmt.Sprintf("run-%d", time.Now().UnixNano())
	c, err := conductor.New(store, reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runAsManager starts r as controller-runtime's manager does (Start in a
// goroutine of its own) and returns the channel of its result.
func runAsManager(ctx context.Context, r runnable) <-chan error {
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	return done
}

// deployUnderManager runs c as a manager would, enrolls a node and starts
// its deploy, and returns once the node is deploying: the function that
// ends the manager's context, Run's result, a context for the test's own
// calls and the node.
func deployUnderManager(t *testing.T, c *conductor.Conductor) (stopManager func(), done <-chan error, ctx context.Context, n *baremetal.Node) {
	t.Helper()
	mgrCtx, stopManager := context.WithCancel(context.Background())
	t.Cleanup(stopManager)
	done = runAsManager(mgrCtx, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	n = enrollWhenRunning(t, ctx, c)
	if err := c.Deploy(ctx, n.UUID, conductor.DeployOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitFor(ctx, n.UUID, statemachine.Deploying); err != nil {
		t.Fatal(err)
	}
	return stopManager, done, ctx, n
}

// enrollWhenRunning enrolls a node and, once the conductor accepts verbs
// (Run starts it on its own goroutine), brings it to available.
func enrollWhenRunning(t *testing.T, ctx context.Context, c *conductor.Conductor) *baremetal.Node {
	t.Helper()
	n, err := c.Enroll(ctx, &baremetal.Node{Name: uniqueName("run"), Driver: builtin.FakeHardware})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Manage(ctx, n.UUID)
		if err == nil {
			break
		}
		if !errors.Is(err, conductor.ErrConductorNotRunning) || time.Now().After(deadline) {
			t.Fatalf("Manage while Run starts: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := c.WaitFor(ctx, n.UUID, statemachine.Manageable); err != nil {
		t.Fatal(err)
	}
	if err := c.Provide(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitFor(ctx, n.UUID, statemachine.Available); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRunDrainsWhenTheContextEnds runs the conductor as a controller-runtime
// manager would: Run serves verbs, and when the manager's context ends it
// lets the running deploy finish, unregisters and returns nil.
func TestRunDrainsWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, runDrainsWhenTheContextEnds)
}

func runDrainsWhenTheContextEnds(t *testing.T) {
	store := openStore(t, false)
	c := newRunConductor(t, store, 300*time.Millisecond, conductor.Options{DrainTimeout: 20 * time.Second})
	if c.NeedLeaderElection() {
		t.Fatal("NeedLeaderElection = true, want false: every conductor runs at once")
	}
	stopManager, done, ctx, n := deployUnderManager(t, c)
	select {
	case err := <-done:
		t.Fatalf("Run returned %v before its context ended", err)
	default:
	}
	stopManager()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil after a clean drain", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	got, err := store.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ProvisionState != statemachine.Active || got.Reservation != "" {
		t.Fatalf("after the drain the node is %q reserved by %q, want active and free: the running deploy finishes", got.ProvisionState, got.Reservation)
	}
	if rec, err := store.GetConductor(ctx, c.Hostname()); err != nil || rec.Online {
		t.Fatalf("conductor row after Run = %+v, %v; want offline (unregistered)", rec, err)
	}
	if err := c.Manage(ctx, n.UUID); !errors.Is(err, conductor.ErrConductorNotRunning) {
		t.Fatalf("verb after Run = %v, want ErrConductorNotRunning", err)
	}
}

// TestRunWithoutGraceStopsAtOnce checks a negative DrainTimeout: Run stops
// without waiting for the running deploy, which is left for the next
// start-up, and returns well before the deploy would have ended.
func TestRunWithoutGraceStopsAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, runWithoutGraceStopsAtOnce)
}

func runWithoutGraceStopsAtOnce(t *testing.T) {
	store := openStore(t, false)
	c := newRunConductor(t, store, 5*time.Second, conductor.Options{DrainTimeout: -1})
	stopManager, done, ctx, n := deployUnderManager(t, c)
	start := time.Now()
	stopManager()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Run with DrainTimeout -1 waited for the running deploy")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Run took %v to stop, want well under the 5 s deploy", d)
	}
	got, err := store.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ProvisionState == statemachine.Active || got.Reservation != "" {
		t.Fatalf("after a stop without grace the node is %q reserved by %q, want not active and free", got.ProvisionState, got.Reservation)
	}
}

// TestRunReturnsStartErrors checks that Run reports a conductor that cannot
// start, and returns nil at once when someone else stopped it.
func TestRunReturnsStartErrors(t *testing.T) {
	t.Parallel()
	synctest.Test(t, runReturnsStartErrors)
}

func runReturnsStartErrors(t *testing.T) {
	store := openStore(t, false)
	c := newRunConductor(t, store, 0, conductor.Options{})
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); err == nil {
		t.Fatal("Run after Stop = nil, want the Start error")
	}

	c = newRunConductor(t, store, 0, conductor.Options{})
	done := runAsManager(context.Background(), c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	enrollWhenRunning(t, ctx, c)
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after an outside Stop = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after an outside Stop")
	}
}
