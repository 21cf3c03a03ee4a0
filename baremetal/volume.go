package baremetal

import (
	"fmt"
	"math"
	"time"

	"github.com/anvilmetal/anvil/internal/jsonmap"
)

// Bounds of the volume resources' fields: the widths of Ironic's
// columns.
const (
	MaxVolumeConnectorType = 32
	MaxVolumeConnectorID   = 255
	MaxVolumeType          = 64
	MaxVolumeID            = 36
)

// VolumeConnector is how a node connects to remote volumes (Ironic's
// volume connector, API 1.32): an iSCSI initiator name, a Fibre Channel
// WWPN, an IP or MAC address. A (Type, ConnectorID) pair is unique
// across the store. Deleting its node deletes it.
type VolumeConnector struct {
	// ID is the store's internal key.
	ID int64
	// UUID is the connector's public identity; generated when empty.
	UUID string
	// NodeUUID is the node the connector belongs to.
	NodeUUID string
	// Type is the kind of ConnectorID ("iqn", "ip", "mac", "wwnn",
	// "wwpn", "port", "portgroup"), at most MaxVolumeConnectorType
	// characters.
	Type string
	// ConnectorID is the connector's identifier of that type, at most
	// MaxVolumeConnectorID characters.
	ConnectorID string
	// Extra is free-form operator data.
	Extra map[string]any
	// CreatedAt and UpdatedAt are stamped by the store.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version is the compare-and-swap counter, as on Node.
	Version int64
}

// Clone returns a deep copy of c.
func (c *VolumeConnector) Clone() *VolumeConnector {
	if c == nil {
		return nil
	}
	out := *c
	out.Extra = jsonmap.Clone(c.Extra)
	return &out
}

// Validate checks the lengths of c's type and connector ID. It does not
// check NodeUUID, which the store resolves.
func (c *VolumeConnector) Validate() error {
	if err := checkLen("volume_connector", c.UUID, "type", c.Type, MaxVolumeConnectorType); err != nil {
		return err
	}
	return checkLen("volume_connector", c.UUID, "connector_id", c.ConnectorID, MaxVolumeConnectorID)
}

// VolumeTarget is a remote volume a node uses (Ironic's volume target,
// API 1.32), for example a Cinder volume it boots from. BootIndex is
// unique per node: 0 is the boot volume. Deleting its node deletes it.
type VolumeTarget struct {
	// ID is the store's internal key.
	ID int64
	// UUID is the target's public identity; generated when empty.
	UUID string
	// NodeUUID is the node the target belongs to.
	NodeUUID string
	// VolumeType is the volume's type ("iscsi", "fibre_channel", ...),
	// at most MaxVolumeType characters.
	VolumeType string
	// Properties are the volume's connection details; they may hold
	// secrets (CHAP passwords) and are masked in views.
	Properties map[string]any
	// BootIndex orders the node's volumes (a 32-bit integer, unique per
	// node).
	BootIndex int
	// VolumeID is the volume's identifier in its storage service, at
	// most MaxVolumeID characters.
	VolumeID string
	// Extra is free-form operator data.
	Extra map[string]any
	// CreatedAt and UpdatedAt are stamped by the store.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Version is the compare-and-swap counter, as on Node.
	Version int64
}

// Clone returns a deep copy of t.
func (t *VolumeTarget) Clone() *VolumeTarget {
	if t == nil {
		return nil
	}
	out := *t
	out.Properties = jsonmap.Clone(t.Properties)
	out.Extra = jsonmap.Clone(t.Extra)
	return &out
}

// Validate checks the lengths of t's volume type and ID and the range of
// its boot index. It does not check NodeUUID, which the store resolves.
func (t *VolumeTarget) Validate() error {
	if err := checkLen("volume_target", t.UUID, "volume_type", t.VolumeType, MaxVolumeType); err != nil {
		return err
	}
	if err := checkLen("volume_target", t.UUID, "volume_id", t.VolumeID, MaxVolumeID); err != nil {
		return err
	}
	if t.BootIndex < math.MinInt32 || t.BootIndex > math.MaxInt32 {
		return &InvalidFieldError{Kind: "volume_target", Ident: t.UUID, Field: "boot_index",
			Expected: fmt.Sprintf("an integer from %d to %d", math.MinInt32, math.MaxInt32)}
	}
	return nil
}

// VolumeConnectorSortKeys and VolumeTargetSortKeys are the fields a
// listing can be sorted by (Page.SortKey): every column but the JSON
// ones, as in Ironic; node_id sorts by the node's internal key.
func VolumeConnectorSortKeys() []string {
	return []string{"id", "uuid", "node_id", "type", "connector_id", "created_at", "updated_at"}
}

// VolumeTargetSortKeys: see VolumeConnectorSortKeys.
func VolumeTargetSortKeys() []string {
	return []string{"id", "uuid", "node_id", "volume_type", "boot_index", "volume_id", "created_at", "updated_at"}
}

// VolumeFilter selects volume connectors or targets in a listing.
type VolumeFilter struct {
	// NodeUUID matches the connectors or targets of one node.
	NodeUUID string
}
