package agentclient

import (
	"context"
	"time"
)

// Inventory is the hardware inventory the Ironic Python Agent collects and
// posts to POST /v1/continue_inspection (IPA's "hardware inventory"). Only
// the fields Anvil's inspection hooks read are typed; the agent may send
// more, and the raw document travels alongside in InspectionData.
type Inventory struct {
	Interfaces   []InventoryInterface `json:"interfaces"`
	CPU          InventoryCPU         `json:"cpu"`
	Memory       InventoryMemory      `json:"memory"`
	Disks        []InventoryDisk      `json:"disks,omitempty"`
	BMCAddress   string               `json:"bmc_address,omitempty"`
	BMCv6Address string               `json:"bmc_v6address,omitempty"`
	BMCMAC       string               `json:"bmc_mac,omitempty"`
	SystemVendor *SystemVendor        `json:"system_vendor,omitempty"`
	Boot         *BootInfo            `json:"boot,omitempty"`
	Hostname     string               `json:"hostname,omitempty"`
}

// InventoryInterface is one network interface of the inventory.
type InventoryInterface struct {
	Name        string `json:"name"`
	MACAddress  string `json:"mac_address"`
	IPv4Address string `json:"ipv4_address,omitempty"`
	IPv6Address string `json:"ipv6_address,omitempty"`
	HasCarrier  bool   `json:"has_carrier"`
	Vendor      string `json:"vendor,omitempty"`
	Product     string `json:"product,omitempty"`
	BIOSDevName string `json:"biosdevname,omitempty"`
	SpeedMbps   int    `json:"speed_mbps,omitempty"`
	// LLDP is the raw LLDP TLV list IPA reports, or nil.
	LLDP [][]any `json:"lldp,omitempty"`
}

// InventoryCPU is the inventory's CPU section.
type InventoryCPU struct {
	ModelName    string   `json:"model_name,omitempty"`
	Frequency    string   `json:"frequency,omitempty"`
	Count        int      `json:"count"`
	Architecture string   `json:"architecture"`
	Flags        []string `json:"flags,omitempty"`
	SocketCount  int      `json:"socket_count,omitempty"`
}

// InventoryMemory is the inventory's memory section: Total in bytes as
// the kernel sees it, PhysicalMB the installed memory in MiB.
type InventoryMemory struct {
	Total      int64 `json:"total"`
	PhysicalMB int   `json:"physical_mb,omitempty"`
}

// InventoryDisk is one block device of the inventory; Size is in bytes.
type InventoryDisk struct {
	Name       string `json:"name"`
	Model      string `json:"model,omitempty"`
	Size       int64  `json:"size"`
	Rotational bool   `json:"rotational"`
	WWN        string `json:"wwn,omitempty"`
	Serial     string `json:"serial,omitempty"`
	Vendor     string `json:"vendor,omitempty"`
	HCTL       string `json:"hctl,omitempty"`
	ByPath     string `json:"by_path,omitempty"`
}

// SystemVendor is the inventory's system_vendor section.
type SystemVendor struct {
	ProductName  string `json:"product_name,omitempty"`
	SerialNumber string `json:"serial_number,omitempty"`
	Manufacturer string `json:"manufacturer,omitempty"`
}

// BootInfo is the inventory's boot section.
type BootInfo struct {
	CurrentBootMode string `json:"current_boot_mode,omitempty"`
	PXEInterface    string `json:"pxe_interface,omitempty"`
}

// InspectionLookup is what a ramdisk posting inspection data is matched
// by: the node UUID from the node_uuid query parameter (API 1.84) when
// given, else the valid MAC addresses of the inventory's interfaces
// (lower case, colon separated) and its BMC addresses.
type InspectionLookup struct {
	NodeUUID     string
	Addresses    []string
	BMCAddresses []string
}

// InspectionData is inspection data that passed the handler's checks.
type InspectionData struct {
	// NodeUUID is the node the data belongs to (from the lookup).
	NodeUUID string
	// Inventory is the parsed inventory; RawInventory the document as
	// sent, for hooks that read fields Inventory does not type.
	Inventory    Inventory
	RawInventory []byte
	// PluginData is every other top-level key of the body (boot_interface,
	// root_disk, error, ...).
	PluginData map[string]any
	// ReceivedAt is when the handler accepted the data (UTC).
	ReceivedAt time.Time
}

// InspectionBackend is an optional capability of a Backend: when the
// backend implements it, the handler serves POST /v1/continue_inspection
// (Ironic's built-in in-band inspection, API 1.83/1.84); otherwise that
// endpoint answers 404.
type InspectionBackend interface {
	// LookupInspectedNode finds the node inspection data is about, by
	// q.NodeUUID when set, else by a port with one of q.Addresses or a
	// BMC address in driver_info matching one of q.BMCAddresses. A node
	// that is not waiting for inspection data ("inspect wait") is not
	// found: the error wraps ErrNodeNotFound, and the handler answers 404
	// either way.
	LookupInspectedNode(ctx context.Context, q InspectionLookup) (Node, error)
	// ContinueInspection durably hands the data over for processing by
	// the node's conductor and returns without waiting for it; the handler
	// answers 202. ErrNodeLocked becomes 409, ErrNodeNotFound 404.
	ContinueInspection(ctx context.Context, data InspectionData) error
}
