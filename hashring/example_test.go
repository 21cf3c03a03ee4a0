package hashring_test

import (
	"errors"
	"fmt"

	"github.com/anvilmetal/anvil/hashring"
)

// Ironic-compatible rings agree with real Ironic (tooz) on every owner;
// this lookup is one of the vectors computed by tooz.
func Example_ironicCompatible() {
	ring, err := hashring.New(hashring.Config{Algorithm: hashring.IronicCompatible},
		hashring.Names("conductor-01", "conductor-02", "conductor-03")...)
	if err != nil {
		panic(err)
	}
	owner, _ := ring.Get("cd613e30-d8f1-4adf-91b7-584a2265b1f5")
	fmt.Println(owner)
	// Output: conductor-02
}

// GetN with an ignore list names who takes a node over when its owner is
// gone, before the ring is rebuilt.
func ExampleRing_GetN() {
	ring, _ := hashring.New(hashring.Config{}, hashring.Names("c1", "c2", "c3")...)
	node := "1e2feb89-414c-443c-9027-c4d1c386bbc4"
	owner, _ := ring.Get(node)
	next, _ := ring.GetN(nil, node, 1, owner)

	without := []string{}
	for _, m := range ring.Members() {
		if m.Name != owner {
			without = append(without, m.Name)
		}
	}
	rebuilt, _ := hashring.New(hashring.Config{}, hashring.Names(without...)...)
	after, _ := rebuilt.Get(node)
	fmt.Println(next[0] == after)
	// Output: true
}

// NewGroupRings builds Ironic's per "<group>:<hardware type>" rings from
// conductor records; a Holder publishes them to lock-free readers.
func ExampleNewGroupRings() {
	rings, err := hashring.NewGroupRings(hashring.Config{}, []hashring.Conductor{
		{Name: "c1", Group: "rack-a", HardwareTypes: []string{"ipmi", "redfish"}},
		{Name: "c2", Group: "rack-a", HardwareTypes: []string{"redfish"}},
		{Name: "c3", Group: "rack-b", HardwareTypes: []string{"ipmi"}},
	})
	if err != nil {
		panic(err)
	}
	current := hashring.NewHolder(rings)
	fmt.Println(current.Load().Keys())

	owner, _ := current.Load().Get("rack-b", "ipmi", "78e51061-7311-48a3-82ce-6f447ed4d57b")
	fmt.Println(owner)

	_, err = current.Load().Get("rack-b", "redfish", "78e51061-7311-48a3-82ce-6f447ed4d57b")
	fmt.Println(errors.Is(err, hashring.ErrNoRing), err)
	// Output:
	// [rack-a:ipmi rack-a:redfish rack-b:ipmi]
	// c3
	// true hashring: no conductor in group "rack-b" serves hardware type "redfish"
}

// Moves tells a conductor what to take over when a peer dies.
func ExampleMovesFor() {
	keys := []string{
		"cd613e30-d8f1-4adf-91b7-584a2265b1f5",
		"1e2feb89-414c-443c-9027-c4d1c386bbc4",
		"78e51061-7311-48a3-82ce-6f447ed4d57b",
		"35bf992d-c9e9-4616-a12e-7696a6cecc1b",
	}
	before, _ := hashring.New(hashring.Config{}, hashring.Names("c1", "c2", "c3")...)
	after, _ := hashring.New(hashring.Config{}, hashring.Names("c1", "c2")...)
	for _, m := range hashring.Moves(before, after, keys) {
		fmt.Println(m.Key, m.From, "->", m.To)
	}
	acquired, released := hashring.MovesFor("c2", before, after, keys)
	fmt.Println("c2 takes over", acquired, "and gives up", released)
	// Output:
	// 1e2feb89-414c-443c-9027-c4d1c386bbc4 c3 -> c2
	// 35bf992d-c9e9-4616-a12e-7696a6cecc1b c3 -> c1
	// c2 takes over [1e2feb89-414c-443c-9027-c4d1c386bbc4] and gives up []
}
