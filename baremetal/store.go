package baremetal

import (
	"context"
	"time"

	"github.com/anvilmetal/anvil/statemachine"
)

// Store keeps nodes, ports, portgroups, allocations, deploy templates,
// runbooks, chassis, volume connectors and targets, conductors, node
// history and inspection inventories. Implementations live in sub-packages (baremetal/sqlstore
// for SQLite and PostgreSQL) and are checked by the conformance suite in
// baremetal/storetest.
//
// Every method is safe for concurrent use by many goroutines and, for a
// shared database, many processes. Objects passed in are not retained;
// objects returned belong to the caller. Methods that write either succeed
// completely or leave the store unchanged.
type Store interface {
	NodeStore
	PortStore
	ResourceStore
	ReservationStore
	ConductorStore
	HistoryStore
	InventoryStore
	// Close releases the store's connections. The store must not be used
	// afterwards.
	Close() error
}

// NodeStore creates, reads, updates and deletes nodes.
type NodeStore interface {
	// CreateNode validates n and inserts it. On success it fills n.ID,
	// n.UUID (when empty), n.ProvisionState ("enroll" when empty),
	// n.CreatedAt, n.UpdatedAt and n.Version (1). n.Reservation must be
	// empty; n.ChassisUUID, when set, must name a stored chassis.
	// Errors: *InvalidFieldError, *DuplicateError, *NotFoundError (the
	// chassis).
	CreateNode(ctx context.Context, n *Node) error
	// CreateNodes inserts many nodes in few transactions, for enrolling a
	// fleet. It is all-or-nothing: on error no node was inserted, and the
	// error names the offending node. It fills each node as CreateNode does.
	CreateNodes(ctx context.Context, nodes []*Node) error
	// GetNode returns the node whose UUID or name is ident, or a
	// *NotFoundError.
	GetNode(ctx context.Context, ident string) (*Node, error)
	// ListNodes returns the nodes matching f in ID order, at most
	// page.Limit of them, starting after page.Marker.
	ListNodes(ctx context.Context, f NodeFilter, page Page) ([]*Node, error)
	// CountNodes returns how many nodes match f.
	CountNodes(ctx context.Context, f NodeFilter) (int, error)
	// UpdateNode writes every field of n except ID, UUID, Reservation and
	// CreatedAt, as a compare-and-swap: it succeeds only if the stored
	// version equals n.Version and, when holder is not empty, the stored
	// reservation equals holder. Otherwise it returns a *ConflictError (or
	// a *NotFoundError) and writes nothing. On success it increments
	// n.Version and refreshes n.UpdatedAt and n.ProvisionUpdatedAt, which
	// the store stamps when ProvisionState or TargetProvisionState changed
	// (otherwise the later of the stored and the given value is kept, so a
	// stale copy never moves the stamp back). A ChassisUUID naming no
	// stored chassis is a *NotFoundError of kind "chassis".
	UpdateNode(ctx context.Context, n *Node, holder string) error
	// TouchProvisioning stamps provision_updated_at with the current time
	// without changing the version, as an agent heartbeat in a wait state
	// does. Errors: *NotFoundError.
	TouchProvisioning(ctx context.Context, uuid string) error
	// DeleteNode deletes the node with its ports, portgroups,
	// allocation, volume connectors and targets, history and inventory. A reserved node is refused with
	// a *NodeInUseError.
	DeleteNode(ctx context.Context, uuid string) error
	// LookupNode finds the node for the agent lookup: by UUID when uuid is
	// not empty, else by the MAC addresses of its ports (malformed MACs
	// are ignored). No match, or MACs of several nodes, give a
	// *NotFoundError; no usable identifier gives an *InvalidFieldError.
	LookupNode(ctx context.Context, uuid string, macs []string) (*Node, error)
}

// PortStore keeps the ports of nodes.
type PortStore interface {
	// CreatePort validates p (the MAC is normalised to lower case) and
	// inserts it, filling ID, UUID, CreatedAt, UpdatedAt and Version.
	// p.PortgroupUUID, when set, must name a portgroup of the same node
	// (else an *InvalidFieldError on portgroup_uuid).
	// Errors: *InvalidFieldError, *DuplicateError, *NotFoundError (node).
	CreatePort(ctx context.Context, p *Port) error
	// GetPort returns the port with the given UUID or MAC address.
	GetPort(ctx context.Context, ident string) (*Port, error)
	// ListPorts returns the ports of a node in ID order ("" lists all).
	ListPorts(ctx context.Context, nodeUUID string) ([]*Port, error)
	// QueryPorts returns the ports matching q in q's order, at most
	// page.Limit of them (0 for no limit), after the port whose UUID is
	// page.Marker. The filters are evaluated by the store, so a listing
	// by address or node costs one indexed query however many ports
	// there are. Errors: *InvalidFieldError (a malformed address, an
	// unknown sort key, a marker naming no port, a negative limit).
	QueryPorts(ctx context.Context, q PortQuery, page Page) ([]*Port, error)
	// UpdatePort writes p's fields as a compare-and-swap on p.Version.
	UpdatePort(ctx context.Context, p *Port) error
	// DeletePort deletes the port with the given UUID.
	DeletePort(ctx context.Context, uuid string) error
}

// ResourceStore hands out the Collection of each resource kept beside
// nodes and ports. The methods are cheap: each returns a value bound to
// the store, to use at once or keep. Below is what each resource adds to
// Collection's contract.
type ResourceStore interface {
	// Portgroups keeps the portgroups of nodes. Get takes a UUID or a
	// name. Create and Update normalise the MAC, when set, to lower
	// case; a *DuplicateError names uuid, name or address. Moving a
	// portgroup that has ports to another node, or deleting one, is
	// refused with a *PortgroupNotEmptyError.
	Portgroups() Collection[Portgroup, PortgroupFilter]
	// Allocations keeps allocations. The binding of a node to an
	// allocation is the conductor's business (it writes the node's
	// AllocationUUID and InstanceUUID under the node's lock); the store
	// only keeps the rows, and deletes a node's allocation with the node.
	// Get takes a UUID or a name. Create sets State to allocating when it
	// is empty; a *DuplicateError names uuid, name or node_uuid (a node
	// has at most one allocation).
	Allocations() Collection[Allocation, AllocationFilter]
	// DeployTemplates keeps deploy templates (see DeployTemplate.Validate).
	// Get takes a UUID or a name; a *DuplicateError names uuid or name.
	DeployTemplates() Collection[DeployTemplate, DeployTemplateFilter]
	// Runbooks keeps runbooks (see Runbook.Validate). Get takes a UUID or
	// a name; a *DuplicateError names uuid or name.
	Runbooks() Collection[Runbook, RunbookFilter]
	// Chassis keeps chassis. Get takes a UUID; List sorts by
	// ChassisSortKeys. Deleting a chassis that nodes still name is
	// refused with a *ChassisNotEmptyError.
	Chassis() Collection[Chassis, ChassisFilter]
	// VolumeConnectors keeps nodes' volume connectors. The rules of when
	// they may change (the node powered off, its lock held) are the
	// conductor's; the store keeps the rows and their unique constraints.
	// Get takes a UUID; List sorts by VolumeConnectorSortKeys; a
	// *DuplicateError names uuid or connector_id (the type and connector
	// ID pair is taken).
	VolumeConnectors() Collection[VolumeConnector, VolumeFilter]
	// VolumeTargets keeps nodes' volume targets, as VolumeConnectors
	// keeps connectors. List sorts by VolumeTargetSortKeys; a
	// *DuplicateError names uuid or boot_index (the node has a target
	// with that boot index).
	VolumeTargets() Collection[VolumeTarget, VolumeFilter]
}

// ReservationStore implements the exclusive node lock of reference §5.1:
// the reservation column holds the hostname of the conductor holding it.
// Shared access needs no store call.
type ReservationStore interface {
	// ReserveNode takes the exclusive lock with one conditional update
	// (UPDATE ... WHERE reservation IS NULL) and returns the node as
	// locked. A node already reserved, even by holder itself, gives a
	// *NodeLockedError naming the holder; an unknown node a
	// *NotFoundError. It does not retry: see AcquireNode. If ctx ends
	// while the statement runs, the lock may have been taken all the
	// same; the holder's ReleaseReservationsOf at start and stop, or an
	// explicit ReleaseNode, clears it.
	ReserveNode(ctx context.Context, uuid, holder string) (*Node, error)
	// ReleaseNode releases the lock if holder holds it. Otherwise it
	// returns a *NodeNotLockedError (unlocked) or a *NodeLockedError
	// (someone else holds it) and writes nothing.
	ReleaseNode(ctx context.Context, uuid, holder string) error
	// ReleaseReservationsOf clears every reservation held by hostname
	// (compared case-insensitively), as a conductor does at start and
	// stop. It returns the number of nodes released.
	ReleaseReservationsOf(ctx context.Context, hostname string) (int, error)
	// ClearTargetPowerStateOf clears target_power_state on the nodes
	// reserved by hostname that have one, setting last_error to lastError,
	// as a restarting conductor does before it releases its locks. It
	// bumps the version of each node written and returns their number.
	ClearTargetPowerStateOf(ctx context.Context, hostname, lastError string) (int, error)
	// BreakDeadReservations releases the reservations held by conductors
	// whose last keepalive is older than heartbeatTimeout, never counting
	// self as dead, and returns the nodes released with their old holder,
	// for the orphan-node task.
	BreakDeadReservations(ctx context.Context, heartbeatTimeout time.Duration, self string) ([]BrokenReservation, error)
}

// BrokenReservation is a node whose lock was taken from a dead conductor.
type BrokenReservation struct {
	// NodeUUID is the node released.
	NodeUUID string
	// Holder is the dead conductor that held it.
	Holder string
}

// ConductorStore implements conductor registration and liveness
// (reference §4.2).
type ConductorStore interface {
	// RegisterConductor inserts the conductor's row, or revives it when it
	// exists offline, and replaces its hardware-interface rows. An online
	// row gives a *ConductorAlreadyRegisteredError unless
	// r.UpdateExisting is set.
	RegisterConductor(ctx context.Context, r ConductorRegistration) (*ConductorRecord, error)
	// KeepaliveConductor stamps the conductor's updated_at and sets its
	// online flag (false while draining). Errors: *NotFoundError.
	KeepaliveConductor(ctx context.Context, hostname string, online bool) error
	// DrainConductor marks the conductor offline but still heart-beating:
	// it leaves the hash ring yet is not considered dead, so its locks are
	// not broken.
	DrainConductor(ctx context.Context, hostname string) error
	// UnregisterConductor marks the conductor offline at stop.
	UnregisterConductor(ctx context.Context, hostname string) error
	// GetConductor returns the conductor's row.
	GetConductor(ctx context.Context, hostname string) (*ConductorRecord, error)
	// ListConductors returns every conductor row, online or not, in ID
	// (registration) order, for the API's conductor listing.
	ListConductors(ctx context.Context) ([]*ConductorRecord, error)
	// ListAliveConductors returns the conductors that are online and kept
	// alive within heartbeatTimeout, ordered by hostname.
	ListAliveConductors(ctx context.Context, heartbeatTimeout time.Duration) ([]*ConductorRecord, error)
	// ListOfflineConductors returns the hostnames whose last keepalive is
	// older than heartbeatTimeout, whatever their online flag, excluding
	// self: the conductors whose locks may be broken.
	ListOfflineConductors(ctx context.Context, heartbeatTimeout time.Duration, self string) ([]string, error)
	// ListHardwareInterfaces returns the hardware-interface rows of the
	// conductor with the given hostname.
	ListHardwareInterfaces(ctx context.Context, hostname string) ([]HardwareInterface, error)
	// DeleteStaleConductors deletes at most limit conductors that are
	// offline and not kept alive for olderThan, returning their hostnames.
	DeleteStaleConductors(ctx context.Context, olderThan time.Duration, limit int) ([]string, error)
}

// HistoryStore keeps node history.
type HistoryStore interface {
	// AddHistory appends an entry (its Message masked for secrets),
	// filling ID and CreatedAt. Errors: *NotFoundError (node),
	// *InvalidFieldError.
	AddHistory(ctx context.Context, e *HistoryEntry) error
	// ListHistory returns the node's entries, oldest first, at most limit
	// (0 for all) of the newest ones.
	ListHistory(ctx context.Context, nodeUUID string, limit int) ([]*HistoryEntry, error)
	// PageHistory returns one page of the node's entries, in the order
	// and from the position p names, reading only that page from the
	// database. Errors: *NotFoundError for an unknown node (Kind "node")
	// or a p.After that is not an entry of the node (Kind "history").
	PageHistory(ctx context.Context, nodeUUID string, p HistoryPage) ([]*HistoryEntry, error)
	// GetHistory returns the node's entry with the given ID. Errors:
	// *NotFoundError (Kind "node" or "history").
	GetHistory(ctx context.Context, nodeUUID string, id int64) (*HistoryEntry, error)
}

// RecordingNodeStore is implemented by stores that can write a node and
// the history entry recording that change in one transaction. The
// conductor uses it, when the store offers it, for every state change, so
// a transition and its history line commit together (or neither does)
// and cost one commit instead of two.
type RecordingNodeStore interface {
	// UpdateNodeRecording is UpdateNode that also appends e (as
	// AddHistory would: masked, ID and CreatedAt filled) in the same
	// transaction. e.NodeUUID, when set, must be n's UUID. Errors are
	// UpdateNode's and AddHistory's.
	UpdateNodeRecording(ctx context.Context, n *Node, holder string, e *HistoryEntry) error
}

// ReleasingNodeStore is implemented by stores that can write the last
// change of an operation, the history entry recording it and the release
// of the node's reservation in one transaction: an operation's end costs
// one commit instead of two. The conductor does not use it yet: with the
// release inside that commit, the next verb can take the node and
// publish its own event before the ending transition's event is
// published, and Watch promises a node's events in order.
type ReleasingNodeStore interface {
	// UpdateNodeReleasing is UpdateNodeRecording (e may be nil: no
	// history entry) fenced by holder, which must not be empty and must
	// hold the reservation, that also clears the reservation. On success
	// n.Reservation is empty. A refused write changes nothing and keeps
	// the reservation. Errors are UpdateNodeRecording's, and an
	// *InvalidFieldError for an empty holder.
	UpdateNodeReleasing(ctx context.Context, n *Node, holder string, e *HistoryEntry) error
}

// NodeFilter selects nodes in ListNodes and CountNodes. The zero value
// matches every node; set fields are combined with AND.
type NodeFilter struct {
	// ProvisionStates matches any of the given provision states.
	ProvisionStates []statemachine.State
	// Maintenance matches the maintenance flag when not nil.
	Maintenance *bool
	// Reserved matches reserved (true) or unreserved (false) nodes.
	Reserved *bool
	// ReservedBy matches nodes reserved by this hostname.
	ReservedBy string
	// ConductorGroup matches the group when not nil ("" is a valid group).
	ConductorGroup *string
	// Drivers matches any of the given hardware types.
	Drivers []string
	// ProvisionUpdatedBefore matches nodes whose provision_updated_at is
	// older than this time (the callback-timeout query).
	ProvisionUpdatedBefore time.Time
	// Associated matches nodes with (true) or without (false) an instance.
	Associated *bool
	// ConductorAffinityNot matches nodes whose conductor affinity differs
	// from this conductor ID (the takeover query); 0 disables it.
	ConductorAffinityNot int64
	// ConsoleEnabled matches the console_enabled flag when not nil (the
	// console restore query at start-up and takeover).
	ConsoleEnabled *bool
	// InstanceUUID matches the node bound to this instance when not
	// empty (compared case-insensitively).
	InstanceUUID string
	// ResourceClass, Fault, Owner and Lessee match their field exactly
	// when not empty.
	ResourceClass string
	Fault         string
	Owner         string
	Lessee        string
	// Shards matches any of the given shards.
	Shards []string
	// Retired matches the retired flag when not nil.
	Retired *bool
	// DescriptionContains matches nodes whose description contains this
	// text (case-sensitive) when not empty.
	DescriptionContains string
	// Project matches nodes whose owner or lessee is this project when
	// not empty.
	Project string
	// Sharded matches nodes with (true) or without (false) a shard.
	Sharded *bool
	// InstanceName matches the instance name exactly when not empty.
	InstanceName string
	// ChassisUUID matches the nodes of this chassis when not empty
	// (compared case-insensitively).
	ChassisUUID string
	// ParentNode matches the children of this node when set; a pointer to
	// "" matches nodes without a parent (Ironic's listings hide child
	// nodes unless asked to include them).
	ParentNode *string
}

// Page bounds a listing: at most Limit items (0 for no limit) that come
// after the node or port whose UUID is Marker. Listings are ordered by the
// internal ID, a stable key, so paging never skips or repeats.
//
// Node listings may instead be sorted by SortKey, a node column named as
// Ironic's API names it ("name", "provision_state", "created_at", ...;
// see NodeSortKeys), then by ID, both ascending or, with SortDesc, both
// descending, so paging by Marker stays stable. Empty text and unset
// times sort as the smallest values. An unknown key is an
// *InvalidFieldError.
type Page struct {
	Limit    int
	Marker   string
	SortKey  string
	SortDesc bool
}

// NodeSortKeys are the node fields a listing can be sorted by: every
// scalar column (the JSON documents and traits cannot be sorted, as in
// Ironic).
func NodeSortKeys() []string {
	return []string{
		"id", "uuid", "name", "instance_uuid", "instance_name", "driver",
		"bios_interface", "boot_interface", "console_interface", "deploy_interface",
		"firmware_interface", "inspect_interface", "management_interface",
		"network_interface", "power_interface", "raid_interface", "rescue_interface",
		"storage_interface", "vendor_interface",
		"power_state", "target_power_state", "provision_state", "target_provision_state",
		"provision_updated_at", "maintenance", "maintenance_reason", "fault",
		"console_enabled", "last_error", "reservation", "conductor_group",
		"conductor_affinity", "resource_class", "owner", "lessee", "description",
		"protected", "protected_reason", "retired", "retired_reason",
		"automated_clean", "inspection_started_at", "inspection_finished_at",
		"boot_mode", "secure_boot", "shard", "parent_node", "disable_power_off",
		"health", "created_at", "updated_at",
	}
}

// NodeChange describes a committed write to a node, for in-process
// watchers.
type NodeChange struct {
	// UUID is the node written.
	UUID string
	// Op is what happened: "create", "update", "reserve", "release",
	// "delete" or "touch".
	Op string
	// ProvisionState and TargetProvisionState are the node's states after
	// the write ("" for delete and for lock operations).
	ProvisionState       statemachine.State
	TargetProvisionState statemachine.State
	// Reservation is the holder after the write.
	Reservation string
	// Version is the node's version after the write (0 for delete and for
	// bulk operations).
	Version int64
}

// NodeChangeNotifier is an optional Store capability, found by type
// assertion: it calls fn after every committed node write made through this
// store value, so an engine in the same process can be woken at once
// instead of polling. fn runs on the writer's goroutine and must not block
// or call back into the store's write methods; it should hand the change
// to a channel or a goroutine it owns. The returned function removes fn.
// Writes by other processes are not seen: poll or use the database's own
// notification for those.
type NodeChangeNotifier interface {
	SubscribeNodeChanges(fn func(NodeChange)) (cancel func())
}
