package conductor

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// portOutageStore fails its next fail port reads as a database outage
// does.
type portOutageStore struct {
	baremetal.Store
	fail  atomic.Int32
	reads atomic.Int32
}

func (s *portOutageStore) ListPorts(ctx context.Context, node string) ([]*baremetal.Port, error) {
	s.reads.Add(1)
	if s.fail.Add(-1) >= 0 {
		return nil, &baremetal.StoreUnavailableError{Op: "listing the ports of node " + node, Err: syscall.ECONNRESET}
	}
	return s.Store.ListPorts(ctx, node)
}

// TestStepWaitsOutAPortReadOutage: a step run by a task of the
// conductor's own work (a deploy step continued after a heartbeat, in a
// fresh task) first reads the node's ports for the driver's view. A read
// that meets a database outage is read again until the database answers,
// and the step runs; it used to fail the step and the deploy ("Deploy
// step ... prepare_instance_boot ... failed on node ...: The database was
// unavailable", the chaos test's database cut). A verb's caller, waiting
// on its answer, still gets the error at once.
func TestStepWaitsOutAPortReadOutage(t *testing.T) {
	ctx := context.Background()
	inner, reg := sqliteAndFakeRegistry(t)
	store := &portOutageStore{Store: inner}
	c, err := New(store, reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.storeRetryPause = time.Millisecond
	n := &baremetal.Node{Name: "port-outage", Driver: builtin.FakeHardware, DeployInterface: fake.Name, ProvisionState: statemachine.Deploying}
	if err := store.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := store.CreatePort(ctx, &baremetal.Port{NodeUUID: n.UUID, Address: "52:54:00:00:00:01"}); err != nil {
		t.Fatal(err)
	}
	step := steps.Step{Interface: string(driver.KindDeploy), Name: "deploy", Priority: 100}

	store.fail.Store(3)
	if _, err := c.runStep(withStoreRetry(ctx), c.newTask(n.Clone()), steps.Deploy, step); err != nil {
		t.Fatalf("step in the conductor's own work through a 3-read outage: %v", err)
	}
	if got := store.reads.Load(); got != 4 {
		t.Fatalf("%d port reads, want 4 (3 failed, 1 answered)", got)
	}

	store.reads.Store(0)
	store.fail.Store(1)
	_, err = c.runStep(ctx, c.newTask(n.Clone()), steps.Deploy, step)
	if !baremetal.IsStoreUnavailable(err) || store.reads.Load() != 1 {
		t.Fatalf("step for a verb's caller through an outage: error %v after %d reads, want the outage's error after 1", err, store.reads.Load())
	}

	// An outage outlasting the work's context ends with the context.
	store.reads.Store(0)
	store.fail.Store(1 << 20)
	cctx, cancel := context.WithTimeout(withStoreRetry(ctx), 50*time.Millisecond)
	defer cancel()
	_, err = c.runStep(cctx, c.newTask(n.Clone()), steps.Deploy, step)
	if !errors.Is(err, baremetal.ErrStoreUnavailable) || store.reads.Load() < 2 {
		t.Fatalf("step through an outage outlasting its context: error %v after %d reads, want the outage's error after retries", err, store.reads.Load())
	}
}
