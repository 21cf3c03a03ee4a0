package conductor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// retryOnLimit calls verb until it is accepted or fails for another
// reason, backing off while the concurrent action limit refuses it. The
// refusal changed nothing, so calling the verb again is always safe.
func retryOnLimit(ctx context.Context, verb func(context.Context) error, waiting func(*conductor.ConcurrentActionLimitError)) error {
	backoff := 50 * time.Millisecond
	for {
		err := verb(ctx)
		var limit *conductor.ConcurrentActionLimitError
		if !errors.As(err, &limit) {
			return err // accepted (nil) or refused for good
		}
		if waiting != nil {
			waiting(limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// A bulk client meets Ironic's concurrency limits (250 nodes deploying,
// 50 cleaning, by default): a verb refused with ErrConcurrentActionLimit
// changed nothing and is retried after a back-off, once some of the nodes
// counted against the limit have finished.
func ExampleConcurrentActionLimitError() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anvil-example-")
	defer os.RemoveAll(dir)
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "anvil.db"), sqlstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		fmt.Println(err)
		return
	}
	// One node at a time may clean.
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "example", MaxConcurrentClean: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Launch(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer c.Stop(ctx)

	var uuids []string
	for _, name := range []string{"rack1-u01", "rack1-u02"} {
		// Every fake operation takes 100 ms, so the first node is still
		// cleaning when the second is provided.
		n, err := c.Enroll(ctx, &baremetal.Node{Name: name, Driver: builtin.FakeHardware,
			DriverInfo: map[string]any{fake.DelayKey: "100ms"}})
		if err == nil {
			err = c.Manage(ctx, n.UUID)
		}
		if err == nil {
			err = untilState(ctx, c, n.UUID, statemachine.Manageable)
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		uuids = append(uuids, n.UUID)
	}
	reported := false
	for _, u := range uuids {
		err := retryOnLimit(ctx, func(ctx context.Context) error { return c.Provide(ctx, u) },
			func(e *conductor.ConcurrentActionLimitError) {
				if !reported {
					fmt.Printf("provide waits: %d node cleaning, %s is %d\n", e.Count, e.Option, e.Limit)
					reported = true
				}
			})
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	for _, u := range uuids {
		if err := untilState(ctx, c, u, statemachine.Available); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("both nodes available")
	// Output:
	// provide waits: 1 node cleaning, max_concurrent_clean is 1
	// both nodes available
}

// untilState polls the node until it is in state and unlocked.
func untilState(ctx context.Context, c *conductor.Conductor, uuid string, state statemachine.State) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		n, err := c.Store().GetNode(ctx, uuid)
		if err != nil {
			return err
		}
		if n.ProvisionState == state && n.Reservation == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: still %s: %w", uuid, n.ProvisionState, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
