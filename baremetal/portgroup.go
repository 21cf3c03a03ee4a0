package baremetal

import (
	"time"

	"github.com/anvilmetal/anvil/internal/jsonmap"
)

// Portgroup is a group of a node's ports bonded together (Ironic's
// portgroup: a link aggregate, LAG or bond). Its optional MAC Address is
// unique across the store like a port's; its optional Name is unique
// across portgroups. Ports join a portgroup through Port.PortgroupUUID,
// and only ports of the same node can. A portgroup that still has ports
// cannot be deleted; deleting its node deletes it.
type Portgroup struct {
	// ID is the store's internal key.
	ID int64
	// UUID is the portgroup's public identity; generated when empty.
	UUID string
	// Name is an optional unique name, with the rules of node names.
	Name string
	// NodeUUID is the UUID of the node the portgroup belongs to.
	NodeUUID string
	// Address is the MAC address of the bond (optional), normalised to
	// lower case with colons.
	Address string
	// Mode is the bonding mode ("active-backup", "802.3ad", ...); empty
	// means Ironic's [DEFAULT]default_portgroup_mode applies.
	Mode string
	// Properties holds the bonding options (miimon, xmit_hash_policy...).
	Properties map[string]any
	// StandalonePortsSupported says whether the member ports may also be
	// used on their own (Ironic defaults it to true; the zero value here
	// is false, as Port.PXEEnabled).
	StandalonePortsSupported bool
	// PhysicalNetwork names the physical network of the bond's ports.
	PhysicalNetwork string
	// InternalInfo is written by the engine (VIF identifiers).
	InternalInfo map[string]any
	// Extra is free-form operator data.
	Extra map[string]any
	// CreatedAt and UpdatedAt are stamped by the store.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version is the compare-and-swap counter, as on Node.
	Version int64
}

// Clone returns a deep copy of g.
func (g *Portgroup) Clone() *Portgroup {
	if g == nil {
		return nil
	}
	c := *g
	c.Properties = jsonmap.Clone(g.Properties)
	c.InternalInfo = jsonmap.Clone(g.InternalInfo)
	c.Extra = jsonmap.Clone(g.Extra)
	return &c
}

// PortgroupFilter selects portgroups in a listing; set fields are
// combined with AND.
type PortgroupFilter struct {
	// NodeUUID matches the portgroups of one node.
	NodeUUID string
	// Address matches the portgroup with this MAC address (any case).
	Address string
}
