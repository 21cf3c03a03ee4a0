package baremetal

import (
	"slices"
	"time"

	"github.com/anvilmetal/anvil/internal/jsonmap"
)

// AllocationState is the state of an allocation (Ironic's allocation
// states).
type AllocationState string

// The allocation states: a new allocation is allocating until the
// conductor picks a node (active) or finds none (error).
const (
	AllocationAllocating AllocationState = "allocating"
	AllocationActive     AllocationState = "active"
	AllocationError      AllocationState = "error"
)

// Allocation is a request for a node (Ironic's allocation, API 1.52):
// the conductor picks an available node that matches ResourceClass,
// has every trait of Traits and, when CandidateNodes is set, is one of
// them; it then binds the node to the allocation (the node's
// InstanceUUID and AllocationUUID become the allocation's UUID) and the
// allocation becomes active with NodeUUID set. An allocation created
// with NodeUUID set is a backfill: it records an existing binding.
type Allocation struct {
	// ID is the store's internal key.
	ID int64
	// UUID is the allocation's public identity; generated when empty.
	UUID string
	// Name is an optional unique name, with the rules of node names.
	Name string
	// NodeUUID is the node allocated, empty until then.
	NodeUUID string
	// State is allocating, active or error; a new allocation starts
	// allocating when State is empty.
	State AllocationState
	// LastError says why the allocation failed (state error).
	LastError string
	// ResourceClass is the resource class the node must have (required
	// unless the allocation is a backfill).
	ResourceClass string
	// Traits are the traits the node must all have.
	Traits []string
	// CandidateNodes, when not empty, restricts the choice to these node
	// UUIDs (names are resolved to UUIDs before the allocation is
	// stored).
	CandidateNodes []string
	// Extra is free-form operator data.
	Extra map[string]any
	// Owner is the project that owns the allocation; only nodes with the
	// same owner (or none) can be allocated to it.
	Owner string
	// ConductorAffinity is the ID of the conductor that processes the
	// allocation (0 for none).
	ConductorAffinity int64
	// CreatedAt and UpdatedAt are stamped by the store.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version is the compare-and-swap counter, as on Node.
	Version int64
}

// Clone returns a deep copy of a.
func (a *Allocation) Clone() *Allocation {
	if a == nil {
		return nil
	}
	c := *a
	c.Traits = slices.Clone(a.Traits)
	c.CandidateNodes = slices.Clone(a.CandidateNodes)
	c.Extra = jsonmap.Clone(a.Extra)
	return &c
}

// AllocationFilter selects allocations in a listing; set fields
// are combined with AND.
type AllocationFilter struct {
	// NodeUUID matches the allocation of one node.
	NodeUUID string
	// ResourceClass matches the requested resource class.
	ResourceClass string
	// State matches one state.
	State AllocationState
	// Owner matches the owner.
	Owner string
	// ConductorAffinity matches the processing conductor (0: any).
	ConductorAffinity int64
}
