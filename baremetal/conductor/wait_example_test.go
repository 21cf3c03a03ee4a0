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

// Verbs return once the intent is stored; WaitFor waits for the result.
// This enrolls a fake node, deploys it and waits until it is active.
func ExampleConductor_WaitFor() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
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
	cond, err := conductor.New(store, reg, conductor.Options{Hostname: "example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := cond.Launch(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer cond.Stop(ctx)

	if _, err := cond.Enroll(ctx, &baremetal.Node{Name: "rack1-u08", Driver: builtin.FakeHardware}); err != nil {
		fmt.Println(err)
		return
	}
	// Each verb is followed by the state it leads to.
	plan := []struct {
		verb func() error
		want statemachine.State
	}{
		{func() error { return cond.Manage(ctx, "rack1-u08") }, statemachine.Manageable},
		{func() error { return cond.Provide(ctx, "rack1-u08") }, statemachine.Available},
		{func() error { return cond.Deploy(ctx, "rack1-u08", conductor.DeployOptions{}) }, statemachine.Active},
	}
	for _, p := range plan {
		if err := p.verb(); err != nil {
			fmt.Println(err)
			return
		}
		n, err := cond.WaitFor(ctx, "rack1-u08", p.want)
		if errors.Is(err, conductor.ErrNodeFailed) {
			fmt.Println("failed:", n.LastError)
			return
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(n.Name, "is", n.ProvisionState)
	}
	// Output:
	// rack1-u08 is manageable
	// rack1-u08 is available
	// rack1-u08 is active
}
