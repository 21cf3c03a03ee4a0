package conductor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// An embedder opens a store, builds a driver registry, starts a conductor
// and calls verbs; Watch follows the node to its target.
func ExampleConductor() {
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
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Launch(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer c.Stop(ctx)

	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	events := c.Watch(watchCtx, conductor.WatchFilter{Types: []conductor.EventType{conductor.EventTransition}})

	n, err := c.Enroll(ctx, &baremetal.Node{Name: "rack1-u07", Driver: builtin.FakeHardware})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Manage(ctx, n.UUID); err != nil {
		fmt.Println(err)
		return
	}
	for e := range events {
		fmt.Println(e.From, "->", e.To)
		if e.To == statemachine.Manageable {
			break
		}
	}
	// Output:
	// enroll -> verifying
	// verifying -> manageable
}
