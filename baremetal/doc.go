// Package baremetal is Anvil's model of a bare-metal fleet and the contract
// of the database that keeps it, as database/sql/driver is to database/sql:
// it holds no engine. The conductor engine that moves nodes through their
// lifecycle is package baremetal/conductor; the SQLite and PostgreSQL store
// is package baremetal/sqlstore.
//
// # The model
//
// A Node is one machine: its driver and the interfaces composed from it,
// its provision and power states (Ironic's strings, see package
// statemachine), driver_info (BMC credentials), instance_info, the
// engine's driver_internal_info and its last error. A Port is one of its
// network interfaces, identified by MAC address. A HistoryEntry is one
// thing that happened to a node; a NodeInventory is what inspection found
// (CheckInventory validates one). A ConductorRecord is a conductor process
// as its peers see it.
//
// Nodes carry secrets. Node's String, Format, LogValue and MarshalJSON
// never print them, and Masked returns a copy with every secret field
// replaced by Mask, the form to hand to users (IsSensitiveKey, MaskText
// and MaskSecrets mask other values the same way). ValidNodeName and
// CheckNodeName state Ironic's node name rules.
//
// # The Store contract
//
// Store is everything the engine needs from a database. It is made of role
// interfaces (NodeStore, PortStore, ResourceStore, ReservationStore,
// ConductorStore, HistoryStore, InventoryStore), so a component asks only
// for the part it uses. The resources kept beside nodes and ports
// (portgroups, allocations, deploy templates, runbooks, chassis, volume
// connectors and targets) share one generic contract, Collection, and
// ResourceStore hands out one per resource:
//
//	rb, err := s.Runbooks().Get(ctx, "bios-reset")
//	failed, err := s.Allocations().List(ctx,
//		baremetal.AllocationFilter{State: baremetal.AllocationError}, baremetal.Page{Limit: 50})
//
// A component that keeps one resource can ask for its Collection alone.
//
// Every write is a compare-and-swap on the node's Version: a writer that
// lost the race gets a *ConflictError and nothing is written. A node is changed
// only under its exclusive reservation: AcquireNode takes it with the
// retries of a LockPolicy (DefaultLockPolicy is Ironic's), and the holder
// releases it with ReservationStore.ReleaseNode. Several conductors sharing a database are
// told about membership changes and hand-offs through a ClusterNotifier
// (LocalNotifier in one process; sqlstore.NewNotifier on PostgreSQL).
//
// An implementation is checked by the conformance suite in
// baremetal/storetest, which depends on this package only:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, clock clock.Clock) baremetal.Store {
//			s := mystore.Open(t.TempDir(), clock)
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// # Errors
//
// Callers branch with errors.Is on the sentinels and read the detail with
// errors.As on the typed errors that match them:
//
//	ErrNotFound                    *NotFoundError, *InventoryNotRecordedError
//	ErrNodeLocked                  *NodeLockedError (another conductor holds the node)
//	ErrNodeNotLocked               *NodeNotLockedError
//	ErrConflict                    *ConflictError (retry from a fresh read)
//	ErrInvalidInput                *InvalidFieldError (names the node and field)
//	ErrDuplicate                   *DuplicateError (also matches ErrInvalidInput)
//	ErrConductorAlreadyRegistered  *ConductorAlreadyRegisteredError
//	ErrNodeInUse                   *NodeInUseError
//
// Error text is for people; never compare it.
package baremetal
