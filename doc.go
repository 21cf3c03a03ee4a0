// Package anvil is an embeddable Go SDK for bare-metal provisioning: the core
// of OpenStack Ironic's conductor, re-thought as a Go library.
//
// Anvil keeps a fleet of bare-metal nodes, moves each one through Ironic's
// provision state machine (enroll, manageable, available, active, and every
// transitional, wait and failure state between them), talks to baseboard
// management controllers through composable drivers and to the ramdisk agent
// (Ironic Python Agent) over REST, spreads nodes over several conductors with
// a consistent hash ring, and survives the loss of any of them. It is meant
// to be imported into a larger controller (a cloud control plane, a
// Kubernetes operator, an internal tool), extended with vendor driver
// plugins, and used piece by piece by tool authors.
//
// This root package holds only documentation. The work is done by these
// packages:
//
//	statemachine  Ironic's provision state machine as a pure value: states,
//	              events, the 93 transitions, target rules, API verbs, and
//	              JSON, Graphviz and Mermaid export.
//	hashring      the consistent hash ring that assigns nodes to conductors:
//	              bit-compatible with Ironic's tooz ring, plus a better
//	              balanced default.
//	steps         deploy, clean, service and verify step planning,
//	              validation and progress bookkeeping (pure).
//	driver        hardware types, the 13 interface kinds, the registry that
//	              composes a node's driver, the built-in fake-hardware and
//	              manual-management types, and (driver/plugin) out-of-process
//	              driver plugins over hashicorp/go-plugin.
//	agentclient   the Ironic Python Agent REST client and the agent-facing
//	              lookup and heartbeat handler; agentclient/agenttest is a
//	              faithful fake agent for tests.
//	baremetal     the model: nodes, ports and conductor records, history,
//	              the Store contract and its errors, node reservations;
//	              baremetal/sqlstore implements it (SQLite embedded or
//	              PostgreSQL shared).
//	baremetal/conductor
//	              the conductor engine that executes provisioning verbs,
//	              heartbeats, periodic tasks and multi-conductor takeover.
//	plugins/...   driver plugin binaries (fake, ipmi, redfish).
//	examples/...  runnable programs, starting with examples/quickstart.
//
// # Usage
//
// A tool author can use a pure package on its own. For example, checking a
// verb against the provision state machine before sending it anywhere:
//
//	m := statemachine.NewProvisionMachine()
//	next, target, err := m.Process(statemachine.Manageable, statemachine.EventProvide)
//	if err != nil {
//		var refused *statemachine.TransitionError
//		if errors.As(err, &refused) {
//			fmt.Println("allowed from here:", refused.Allowed)
//		}
//	}
//	fmt.Println(next, target) // cleaning available
//
// An embedder opens a store, builds a driver registry and runs a conductor:
//
//	store, err := sqlstore.OpenSQLite(ctx, "anvil.db", sqlstore.Options{})
//	cond, err := conductor.New(store, registry, conductor.Options{Hostname: "c1"})
//	err = cond.Run(ctx) // starts, serves until ctx ends, then drains
//
// See examples/quickstart for a complete, runnable program.
package anvil
