package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/statemachine"
)

// Open a SQLite store, enroll a node, lock it, write under the lock and
// release it. A second conductor meanwhile gets a NodeLocked error that
// names the holder.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anvil-example")
	defer func() { _ = os.RemoveAll(dir) }()

	s, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "anvil.db"), sqlstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = s.Close() }()

	n := &baremetal.Node{Name: "rack1-u07", Driver: "ipmi",
		DriverInfo: map[string]any{"ipmi_address": "10.0.0.7", "ipmi_password": "secret"}}
	if err := s.CreateNode(ctx, n); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("created in", n.ProvisionState, "version", n.Version)

	locked, err := baremetal.AcquireNode(ctx, s, n.UUID, "conductor-1", baremetal.DefaultLockPolicy())
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = baremetal.AcquireNode(ctx, s, n.UUID, "conductor-2", baremetal.NoRetry())
	var nl *baremetal.NodeLockedError
	if errors.As(err, &nl) {
		fmt.Println("conductor-2 sees the node locked by", nl.Holder)
	}

	locked.ProvisionState, locked.TargetProvisionState = "verifying", "manageable"
	if err := s.UpdateNode(ctx, locked, "conductor-1"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("now", locked.ProvisionState, "version", locked.Version)
	if err := s.ReleaseNode(ctx, n.UUID, "conductor-1"); err != nil {
		fmt.Println(err)
	}
	// Output:
	// created in enroll version 1
	// conductor-2 sees the node locked by conductor-1
	// now verifying version 2
}

// List the nodes a periodic task cares about, a page at a time.
func ExampleStore_ListNodes() {
	ctx := context.Background()
	s, err := sqlstore.OpenSQLite(ctx, ":memory:", sqlstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = s.Close() }()
	var fleet []*baremetal.Node
	for i := 0; i < 5; i++ {
		fleet = append(fleet, &baremetal.Node{Name: fmt.Sprintf("n%d", i), ProvisionState: []statemachine.State{"available", "active"}[i%2]})
	}
	if err := s.CreateNodes(ctx, fleet); err != nil {
		fmt.Println(err)
		return
	}
	filter := baremetal.NodeFilter{ProvisionStates: []statemachine.State{"available"}, Reserved: new(false)}
	page := baremetal.Page{Limit: 2}
	for {
		nodes, err := s.ListNodes(ctx, filter, page)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, n := range nodes {
			fmt.Println(n.Name, n.ProvisionState)
		}
		if len(nodes) < page.Limit {
			break
		}
		page.Marker = nodes[len(nodes)-1].UUID
	}
	// Output:
	// n0 available
	// n2 available
	// n4 available
}
