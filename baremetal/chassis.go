package baremetal

import (
	"errors"
	"fmt"
	"time"

	"github.com/anvilmetal/anvil/internal/jsonmap"
)

// MaxChassisDescription is the longest chassis description, in
// characters (the width of Ironic's column).
const MaxChassisDescription = 255

// Chassis groups nodes (Ironic's chassis, API 1.0): a rack, an
// enclosure, a blade chassis. It has a description and free-form data
// only; a node names its chassis in Node.ChassisUUID, and a chassis that
// still has nodes cannot be deleted.
type Chassis struct {
	// ID is the store's internal key.
	ID int64
	// UUID is the chassis' public identity; generated when empty.
	// Chassis have no name: they are found by UUID only.
	UUID string
	// Description is free text, at most MaxChassisDescription
	// characters.
	Description string
	// Extra is free-form operator data.
	Extra map[string]any
	// CreatedAt and UpdatedAt are stamped by the store.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version is the compare-and-swap counter, as on Node.
	Version int64
}

// Clone returns a deep copy of c.
func (c *Chassis) Clone() *Chassis {
	if c == nil {
		return nil
	}
	out := *c
	out.Extra = jsonmap.Clone(c.Extra)
	return &out
}

// Validate checks the fields of c that do not need the store: the length
// of the description.
func (c *Chassis) Validate() error {
	return checkLen("chassis", c.UUID, "description", c.Description, MaxChassisDescription)
}

// ChassisSortKeys are the chassis fields a listing can be sorted by
// (Page.SortKey): every column but extra, as in Ironic.
func ChassisSortKeys() []string {
	return []string{"id", "uuid", "description", "created_at", "updated_at"}
}

// ErrChassisNotEmpty: the chassis still has nodes.
var ErrChassisNotEmpty = errors.New("baremetal: chassis not empty")

// ChassisNotEmptyError refuses deleting a chassis that nodes still name,
// as Ironic's ChassisNotEmpty. It matches ErrChassisNotEmpty.
type ChassisNotEmptyError struct {
	// Chassis is the chassis' UUID.
	Chassis string
}

func (e *ChassisNotEmptyError) Error() string {
	return fmt.Sprintf("Cannot complete the requested action because chassis %s contains nodes.", e.Chassis)
}

// Is reports whether target is ErrChassisNotEmpty.
func (e *ChassisNotEmptyError) Is(target error) bool { return target == ErrChassisNotEmpty }

// ChassisFilter selects chassis in a listing. It has no fields: Ironic
// filters chassis by none. The type keeps the listing's signature when
// one comes.
type ChassisFilter struct{}
