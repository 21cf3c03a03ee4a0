package conductor_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestWaitForFollowsVerbsToTheirStates drives a node from enroll to
// active with WaitFor alone, no polling loop.
func TestWaitForFollowsVerbsToTheirStates(t *testing.T) {
	t.Parallel()
	synctest.Test(t, waitForFollowsVerbsToTheirStates)
}

func waitForFollowsVerbsToTheirStates(t *testing.T) {
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{})
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	n := h.enroll("wait-ok", nil)
	steps := []struct {
		verb func() error
		want statemachine.State
	}{
		{func() error { return h.c.Manage(ctx, n.UUID) }, statemachine.Manageable},
		{func() error { return h.c.Provide(ctx, n.UUID) }, statemachine.Available},
		{func() error { return h.c.Deploy(ctx, n.Name, conductor.DeployOptions{}) }, statemachine.Active},
	}
	for _, s := range steps {
		if err := s.verb(); err != nil {
			t.Fatal(err)
		}
		got, err := h.c.WaitFor(ctx, n.Name, s.want)
		if err != nil {
			t.Fatalf("WaitFor(%s): %v", s.want, err)
		}
		if got.UUID != n.UUID || got.ProvisionState != s.want {
			t.Fatalf("WaitFor(%s) = node %s in %q", s.want, got.UUID, got.ProvisionState)
		}
	}
	// A node already in a wanted state returns at once; any of several
	// states will do.
	got, err := h.c.WaitFor(ctx, n.UUID, statemachine.Available, statemachine.Active)
	if err != nil || got.ProvisionState != statemachine.Active {
		t.Fatalf("WaitFor(available, active) on an active node = %v, %v", got, err)
	}
}

// TestWaitForReportsFailureStates checks that a node landing in a failure
// state ends the wait with a typed error, unless that state was wanted.
func TestWaitForReportsFailureStates(t *testing.T) {
	t.Parallel()
	synctest.Test(t, waitForReportsFailureStates)
}

func waitForReportsFailureStates(t *testing.T) {
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{})
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	n := h.enroll("wait-fail", map[string]any{fake.FailKey: "deploy.deploy"})
	if err := h.c.Manage(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.WaitFor(ctx, n.UUID, statemachine.Manageable); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Provide(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.WaitFor(ctx, n.UUID, statemachine.Available); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Deploy(ctx, n.UUID, conductor.DeployOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := h.c.WaitFor(ctx, n.UUID, statemachine.Active)
	var we *conductor.WaitError
	if !errors.As(err, &we) || !errors.Is(err, conductor.ErrNodeFailed) {
		t.Fatalf("WaitFor(active) on a failing deploy = %v, want a *WaitError matching ErrNodeFailed", err)
	}
	if we.Node != n.UUID || we.State != statemachine.DeployFailed || we.LastError == "" || we.Err != nil {
		t.Fatalf("WaitError = %+v, want node %s in deploy failed with its last error", we, n.UUID)
	}
	if got == nil || got.ProvisionState != statemachine.DeployFailed {
		t.Fatalf("WaitFor returned node %v, want the failed node", got)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a failure must not match the context's error: %v", err)
	}
	// Waiting for the failure state itself is no error.
	if _, err := h.c.WaitFor(ctx, n.UUID, statemachine.DeployFailed); err != nil {
		t.Fatalf("WaitFor(deploy failed) = %v, want nil", err)
	}
}

// TestWaitForEndsWithItsContext checks the error of a wait that times out
// and of bad arguments.
func TestWaitForEndsWithItsContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, waitForEndsWithItsContext)
}

func waitForEndsWithItsContext(t *testing.T) {
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{})
	n := h.enroll("wait-ctx", nil)
	ctx, cancel := context.WithTimeout(h.ctx, 200*time.Millisecond)
	defer cancel()
	_, err := h.c.WaitFor(ctx, n.UUID, statemachine.Active)
	var we *conductor.WaitError
	if !errors.As(err, &we) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, conductor.ErrNodeFailed) {
		t.Fatalf("WaitFor past its deadline = %v, want a *WaitError wrapping context.DeadlineExceeded", err)
	}
	if we.State != statemachine.Enroll {
		t.Fatalf("WaitError.State = %q, want enroll", we.State)
	}
	if _, err := h.c.WaitFor(h.ctx, "no-such-node", statemachine.Active); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("WaitFor on an unknown node = %v, want ErrNotFound", err)
	}
	if _, err := h.c.WaitFor(h.ctx, n.UUID); !errors.Is(err, baremetal.ErrInvalidInput) {
		t.Fatalf("WaitFor without states = %v, want ErrInvalidInput", err)
	}
}
