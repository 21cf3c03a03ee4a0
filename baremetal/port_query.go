package baremetal

import "slices"

// PortQuery selects and orders ports in QueryPorts. The zero value
// matches every port in ID order; set fields are combined with AND.
type PortQuery struct {
	// NodeUUID matches the ports of one node.
	NodeUUID string
	// Address matches the port with this MAC address (any case, colons or
	// dashes); a malformed address is an *InvalidFieldError.
	Address string
	// Name matches the port with this name.
	Name string
	// PortgroupUUID matches the member ports of one portgroup.
	PortgroupUUID string
	// ConductorGroups matches the ports of nodes in any of these conductor
	// groups (compared case-insensitively; "" is the default group).
	ConductorGroups []string
	// Shards matches the ports of nodes in any of these shards.
	Shards []string
	// DescriptionContains matches the ports whose description contains
	// this text, compared case-insensitively.
	DescriptionContains string
	// SortKey orders the result by one of PortSortKeys ("" is "id"), ties
	// broken by ID; Descending reverses the order. Paging follows the
	// order: Page.Marker is the UUID of the last port of the previous page.
	SortKey    string
	Descending bool
}

// PortSortKeys returns the port fields QueryPorts can order by, with
// Ironic's names. The caller owns the returned slice.
func PortSortKeys() []string {
	return []string{"id", "uuid", "address", "name", "pxe_enabled", "physical_network",
		"is_smartnic", "description", "vendor", "category", "created_at", "updated_at"}
}

// ValidPortSortKey reports whether key is one of PortSortKeys or "".
func ValidPortSortKey(key string) bool {
	return key == "" || slices.Contains(PortSortKeys(), key)
}
