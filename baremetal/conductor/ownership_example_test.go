package conductor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/hashring"
)

// ExampleOwnership builds the rings of three registered conductors with
// the Ironic-compatible algorithm and asks who owns a node, and what a
// verb on a node of a group nobody serves would get.
func ExampleOwnership() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "anvil-example")
	defer os.RemoveAll(dir)
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "anvil.db"), sqlstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	for _, host := range []string{"cond-a", "cond-b", "cond-c"} {
		_, _ = store.RegisterConductor(ctx, baremetal.ConductorRegistration{Hostname: host, Drivers: []string{"ipmi"},
			Interfaces: []baremetal.HardwareInterface{{HardwareType: "ipmi", InterfaceType: "power", InterfaceName: "ipmitool", Default: true}}})
	}
	own, err := conductor.NewOwnership(store, "cond-a", "", conductor.RingOptions{
		Ring: hashring.Config{Algorithm: hashring.IronicCompatible}}, nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := own.Refresh(ctx); err != nil {
		fmt.Println(err)
		return
	}
	node := &baremetal.Node{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Driver: "ipmi"}
	owner, _ := own.OwnerOf(node)
	fmt.Println("rings:", own.Rings().Keys())
	fmt.Println("owner:", owner, "mine:", own.Owns(node))
	_, err = own.OwnerOf(&baremetal.Node{UUID: node.UUID, Driver: "ipmi", ConductorGroup: "rack9"})
	fmt.Println(err)
	// Output:
	// rings: [:ipmi]
	// owner: cond-c mine: false
	// node 1be26c0b-03f2-4d2e-ae87-c02d7f33c123: no live conductor of group "rack9" enables hardware type "ipmi" (live conductors: [cond-a cond-b cond-c])
}
