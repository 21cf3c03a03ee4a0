package conductor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
)

// SetConsoleMode returns once the request is accepted; the node's owner
// starts the console, and Watch (or the node history) says when it has.
// ConsoleInfo then tells how to reach it. Asking for the mode the console
// already is in changes nothing.
func ExampleConductor_SetConsoleMode() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anvil-example-")
	defer os.RemoveAll(dir)
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "anvil.db"), sqlstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	// Ironic enables no-console alone unless told otherwise.
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindConsole: {fake.Name, driver.NoConsole}}})
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
	n, err := c.Enroll(ctx, &baremetal.Node{Name: "rack1-u07", Driver: builtin.FakeHardware})
	if err != nil {
		fmt.Println(err)
		return
	}

	if _, err := c.ConsoleInfo(ctx, n.Name); errors.Is(err, conductor.ErrConsoleNotEnabled) {
		fmt.Println("console not enabled yet")
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	events := c.Watch(watchCtx, conductor.WatchFilter{Nodes: []string{n.UUID}, Types: []conductor.EventType{conductor.EventConsole}})
	if err := c.SetConsoleMode(ctx, n.Name, true); err != nil {
		fmt.Println(err) // unsupported, invalid driver_info or locked: nothing changed
		return
	}
	e := <-events
	fmt.Println(e.Detail, e.Error == "")
	st, err := c.ConsoleInfo(ctx, n.Name)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Enabled, st.Info.Type, st.Info.URL == "fake://console/"+n.UUID)
	fmt.Println(c.SetConsoleMode(ctx, n.Name, true)) // already enabled: a no-op
	// Output:
	// console not enabled yet
	// console enabled true
	// true fake true
	// <nil>
}
