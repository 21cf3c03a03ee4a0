package baremetal

import (
	"strings"
	"time"

	"github.com/anvilmetal/anvil/internal/jsonmap"
	"github.com/anvilmetal/anvil/internal/macaddr"
)

// Port is one network interface of a node (reference §10.2). Its MAC
// Address is unique across the store and kept in lower case; the agent
// lookup finds a node by the MACs of its ports.
type Port struct {
	// ID is the store's internal key.
	ID int64
	// UUID is the port's public identity; generated when empty.
	UUID string
	// NodeUUID is the UUID of the node the port belongs to.
	NodeUUID string
	// PortgroupUUID is the UUID of the portgroup (of the same node) the
	// port is a member of, or empty.
	PortgroupUUID string
	// Address is the MAC address, normalised to lower case with colons.
	Address string
	// Name is an optional unique name.
	Name string
	// PXEEnabled marks the port the node boots from over the network.
	// Ironic defaults it to true; the zero value here is false, so set it
	// when creating a port the node should boot from.
	PXEEnabled bool
	// LocalLinkConnection describes the switch port the NIC is cabled to
	// (switch_id, port_id, switch_info, hostname, network_type).
	LocalLinkConnection map[string]any
	// PhysicalNetwork names the physical network the port is on.
	PhysicalNetwork string
	// IsSmartNIC marks a Smart NIC port.
	IsSmartNIC bool
	// InternalInfo is written by the engine (VIF identifiers).
	InternalInfo map[string]any
	// Extra is free-form operator data.
	Extra map[string]any
	// Description is free text.
	Description string
	// Vendor and Category describe the NIC.
	Vendor   string
	Category string
	// NotForDynamicPortgroup keeps the port out of the port groups a
	// network interface forms by itself (Ironic's
	// available_for_dynamic_portgroup, API 1.111, inverted so that the
	// zero value is Ironic's default: available). Anvil forms no dynamic
	// port groups; the flag is kept for the clients that set it.
	NotForDynamicPortgroup bool
	// CreatedAt and UpdatedAt are stamped by the store.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version is the compare-and-swap counter, as on Node.
	Version int64
}

// Clone returns a deep copy of p.
func (p *Port) Clone() *Port {
	if p == nil {
		return nil
	}
	c := *p
	c.LocalLinkConnection = jsonmap.Clone(p.LocalLinkConnection)
	c.InternalInfo = jsonmap.Clone(p.InternalInfo)
	c.Extra = jsonmap.Clone(p.Extra)
	return &c
}

// NormalizeMAC parses a 48-bit MAC address written with colons or dashes
// (either case; surrounding white space is ignored) and returns it lower
// case with colons. The rule is Ironic's, owned by internal/macaddr. It
// returns an *InvalidFieldError naming field when s is not such an
// address.
func NormalizeMAC(field, s string) (string, error) {
	mac, ok := macaddr.Parse(strings.TrimSpace(s))
	if !ok {
		return "", &InvalidFieldError{Kind: "port", Field: field, Expected: "a 48-bit MAC address such as 52:54:00:12:34:56"}
	}
	return mac, nil
}
