package driver

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/anvilmetal/anvil/statemachine"

	"github.com/anvilmetal/anvil/internal/jsonmap"
	"github.com/anvilmetal/anvil/internal/mask"
)

// Port is a network port of a node as a driver sees it.
type Port struct {
	UUID                string         `json:"uuid,omitempty"` // empty for a port a driver creates
	Address             string         `json:"address"`        // the MAC address
	PXEEnabled          bool           `json:"pxe_enabled"`
	PhysicalNetwork     string         `json:"physical_network,omitempty"`
	LocalLinkConnection map[string]any `json:"local_link_connection,omitempty"`
	Extra               map[string]any `json:"extra,omitempty"`
}

func (p Port) clone() Port {
	p.LocalLinkConnection = cloneMap(p.LocalLinkConnection)
	p.Extra = cloneMap(p.Extra)
	return p
}

// Task is the view of one node that a driver method receives: the node's
// identity, its resolved interfaces and the parts a driver may read. It
// never touches a database. A driver records what it changes through the
// Set and Delete methods; the caller collects those with Changes and
// persists them. Drivers must treat the exported maps as read-only and
// change them only through the methods, so that changes are tracked.
//
// A Task is not safe for concurrent use.
type Task struct {
	NodeUUID       string             `json:"node_uuid"`
	NodeName       string             `json:"node_name,omitempty"`
	HardwareType   string             `json:"hardware_type"`
	Interfaces     map[Kind]string    `json:"interfaces,omitempty"` // resolved implementation names
	ProvisionState statemachine.State `json:"provision_state,omitempty"`
	PowerState     PowerState         `json:"power_state,omitempty"` // last known, from the node record

	DriverInfo         map[string]any `json:"driver_info,omitempty"`
	DriverInternalInfo map[string]any `json:"driver_internal_info,omitempty"`
	InstanceInfo       map[string]any `json:"instance_info,omitempty"`
	Properties         map[string]any `json:"properties,omitempty"`
	Ports              []Port         `json:"ports,omitempty"`
	// TargetRAIDConfig is the node's target_raid_config, read-only: a
	// driver reads it (the deploy interface installs the boot loader on
	// a software RAID's holder disks) but never changes it; the
	// conductor's SetTargetRAIDConfig does.
	TargetRAIDConfig map[string]any `json:"target_raid_config,omitempty"`

	// drv is the node's composed driver, bound by the conductor (see
	// BindDriver); nil in a plugin process.
	drv   *Driver
	dirty dirtySet
}

// Driver returns the node's composed driver, as Ironic's task.driver: the
// way one interface reaches another (a boot interface sets the boot
// device through the node's management interface). The conductor binds
// it before every driver call. It is nil when nobody bound one: in a
// plugin process (a Task crosses the plugin boundary as data, so a
// plugin's implementation never sees the host's driver) and in a Task a
// test or tool builds by hand. Implementations that need it say so in
// their documentation and fail with a clear error when it is nil.
func (t *Task) Driver() *Driver { return t.drv }

// BindDriver binds d as the node's composed driver (see Driver). The
// conductor calls it before a driver call, and a test or tool building a
// Task by hand may; a driver implementation never does (the binding is
// the caller's). It is not a change of the node: Changes does not record
// it and it does not cross the plugin boundary.
func (t *Task) BindDriver(d *Driver) { t.drv = d }

type dirtySet struct {
	driverInfo, driverInternalInfo, instanceInfo, properties, ports bool
}

// Changes is what a driver method changed on a Task. Each non-nil map is
// the complete new value of that node field (an empty non-nil map means the
// field was emptied); nil means unchanged. PortsChanged says Ports is the
// complete new port list (ports without UUID are new).
type Changes struct {
	DriverInfo         map[string]any `json:"driver_info,omitempty"`
	DriverInternalInfo map[string]any `json:"driver_internal_info,omitempty"`
	InstanceInfo       map[string]any `json:"instance_info,omitempty"`
	Properties         map[string]any `json:"properties,omitempty"`
	PortsChanged       bool           `json:"ports_changed,omitempty"`
	Ports              []Port         `json:"ports,omitempty"`
}

// Empty reports whether c changes nothing.
func (c Changes) Empty() bool {
	return c.DriverInfo == nil && c.DriverInternalInfo == nil && c.InstanceInfo == nil &&
		c.Properties == nil && !c.PortsChanged
}

// Changes returns what has been changed on t through its Set, Delete and
// Apply methods since it was built. The returned maps are copies.
func (t *Task) Changes() Changes {
	var c Changes
	if t.dirty.driverInfo {
		c.DriverInfo = nonNil(cloneMap(t.DriverInfo))
	}
	if t.dirty.driverInternalInfo {
		c.DriverInternalInfo = nonNil(cloneMap(t.DriverInternalInfo))
	}
	if t.dirty.instanceInfo {
		c.InstanceInfo = nonNil(cloneMap(t.InstanceInfo))
	}
	if t.dirty.properties {
		c.Properties = nonNil(cloneMap(t.Properties))
	}
	if t.dirty.ports {
		c.PortsChanged = true
		c.Ports = clonePorts(t.Ports)
	}
	return c
}

// Apply applies c to t and records it as changed, so that t.Changes()
// reports it too. The plugin host uses it to carry a remote driver's
// changes back into the caller's Task; such values went through JSON, so
// numbers arrive as float64, exactly as they read back from the store.
func (t *Task) Apply(c Changes) {
	if c.DriverInfo != nil {
		t.DriverInfo = cloneMap(c.DriverInfo)
		t.dirty.driverInfo = true
	}
	if c.DriverInternalInfo != nil {
		t.DriverInternalInfo = cloneMap(c.DriverInternalInfo)
		t.dirty.driverInternalInfo = true
	}
	if c.InstanceInfo != nil {
		t.InstanceInfo = cloneMap(c.InstanceInfo)
		t.dirty.instanceInfo = true
	}
	if c.Properties != nil {
		t.Properties = cloneMap(c.Properties)
		t.dirty.properties = true
	}
	if c.PortsChanged {
		t.Ports = clonePorts(c.Ports)
		t.dirty.ports = true
	}
}

// Clone returns a deep copy of t without its change record; the bound
// driver (Driver) is kept, as it is shared and immutable.
func (t *Task) Clone() *Task {
	n := &Task{
		NodeUUID: t.NodeUUID, NodeName: t.NodeName, HardwareType: t.HardwareType,
		ProvisionState: t.ProvisionState, PowerState: t.PowerState,
		DriverInfo: cloneMap(t.DriverInfo), DriverInternalInfo: cloneMap(t.DriverInternalInfo),
		InstanceInfo: cloneMap(t.InstanceInfo), Properties: cloneMap(t.Properties),
		Ports: clonePorts(t.Ports), TargetRAIDConfig: cloneMap(t.TargetRAIDConfig),
		drv: t.drv,
	}
	if t.Interfaces != nil {
		n.Interfaces = maps.Clone(t.Interfaces)
	}
	return n
}

// SetDriverInfo sets driver_info[key] = value.
func (t *Task) SetDriverInfo(key string, value any) {
	t.DriverInfo = setKey(t.DriverInfo, key, value)
	t.dirty.driverInfo = true
}

// DeleteDriverInfo removes driver_info[key].
func (t *Task) DeleteDriverInfo(key string) {
	if _, ok := t.DriverInfo[key]; ok {
		delete(t.DriverInfo, key)
		t.dirty.driverInfo = true
	}
}

// SetDriverInternalInfo sets driver_internal_info[key] = value.
func (t *Task) SetDriverInternalInfo(key string, value any) {
	t.DriverInternalInfo = setKey(t.DriverInternalInfo, key, value)
	t.dirty.driverInternalInfo = true
}

// DeleteDriverInternalInfo removes driver_internal_info[key].
func (t *Task) DeleteDriverInternalInfo(key string) {
	if _, ok := t.DriverInternalInfo[key]; ok {
		delete(t.DriverInternalInfo, key)
		t.dirty.driverInternalInfo = true
	}
}

// SetInstanceInfo sets instance_info[key] = value.
func (t *Task) SetInstanceInfo(key string, value any) {
	t.InstanceInfo = setKey(t.InstanceInfo, key, value)
	t.dirty.instanceInfo = true
}

// DeleteInstanceInfo removes instance_info[key].
func (t *Task) DeleteInstanceInfo(key string) {
	if _, ok := t.InstanceInfo[key]; ok {
		delete(t.InstanceInfo, key)
		t.dirty.instanceInfo = true
	}
}

// SetProperty sets properties[key] = value.
func (t *Task) SetProperty(key string, value any) {
	t.Properties = setKey(t.Properties, key, value)
	t.dirty.properties = true
}

// DeleteProperty removes properties[key].
func (t *Task) DeleteProperty(key string) {
	if _, ok := t.Properties[key]; ok {
		delete(t.Properties, key)
		t.dirty.properties = true
	}
}

// SetPorts replaces the node's port list. Ports without a UUID are created
// by the caller; ports missing from the list are left to the caller's
// policy (Ironic's inspection only adds and updates ports).
func (t *Task) SetPorts(ports []Port) {
	t.Ports = clonePorts(ports)
	t.dirty.ports = true
}

// AddPort adds a port with the given MAC address unless one with that
// address (compared case-insensitively) exists, and reports whether it
// added one.
func (t *Task) AddPort(p Port) bool {
	for _, existing := range t.Ports {
		if strings.EqualFold(existing.Address, p.Address) {
			return false
		}
	}
	t.Ports = append(clonePorts(t.Ports), p.clone())
	t.dirty.ports = true
	return true
}

// DriverInfoString returns driver_info[key] as a string; ok is false when
// the key is absent or empty. Numbers are formatted without a fraction when
// whole.
func (t *Task) DriverInfoString(key string) (string, bool) { return stringValue(t.DriverInfo, key) }

// InternalString returns driver_internal_info[key] as a string; ok is false
// when the key is absent or empty.
func (t *Task) InternalString(key string) (string, bool) {
	return stringValue(t.DriverInternalInfo, key)
}

// InstanceString returns instance_info[key] as a string; ok is false when
// the key is absent or empty.
func (t *Task) InstanceString(key string) (string, bool) { return stringValue(t.InstanceInfo, key) }

// RequireDriverInfo checks that every required property in props is present
// and non-empty in driver_info, and returns a *MissingParameterError naming
// the node, kind, implementation and all missing keys otherwise.
// Implementations call it from Validate.
func (t *Task) RequireDriverInfo(kind Kind, impl string, props []Property) error {
	var missing []string
	for _, p := range props {
		if !p.Required {
			continue
		}
		if _, ok := t.DriverInfoString(p.Name); !ok {
			missing = append(missing, p.Name)
		}
	}
	if len(missing) > 0 {
		return &MissingParameterError{Node: t.NodeUUID, Kind: kind, Impl: impl, Field: "driver_info", Missing: missing}
	}
	return nil
}

// LogValue implements slog.LogValuer. It logs the node identity and the
// driver_info keys, never their values, so secrets stay out of logs.
func (t *Task) LogValue() slog.Value {
	keys := slices.Sorted(maps.Keys(t.DriverInfo))
	return slog.GroupValue(
		slog.String("node", t.NodeUUID),
		slog.String("name", t.NodeName),
		slog.String("hardware_type", t.HardwareType),
		slog.Any("driver_info_keys", keys),
	)
}

// String returns the node identity; it never includes driver_info values.
func (t *Task) String() string {
	if t.NodeName != "" {
		return fmt.Sprintf("node %s (%s)", t.NodeUUID, t.NodeName)
	}
	return "node " + t.NodeUUID
}

// Mask returns a deep copy of m with the value of every secret key
// replaced by "******" (nil values stay nil), recursively through nested
// maps and lists, and secrets written inside other strings masked too.
// The key list and the text rules are Anvil's one masker's (oslo.utils'
// mask_dict_password list plus passwd, pass as a last word, credential,
// api_key and the like; see baremetal.IsSensitiveKey), so a driver's log
// hides what a node view hides. Mask(nil) is nil.
func Mask(m map[string]any) map[string]any { return mask.Map(m) }

func stringValue(m map[string]any, key string) (string, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", false
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case float64:
		if x == float64(int64(x)) {
			s = fmt.Sprintf("%d", int64(x))
		} else {
			s = fmt.Sprint(x)
		}
	default:
		s = fmt.Sprint(x)
	}
	return s, s != ""
}

func setKey(m map[string]any, key string, value any) map[string]any {
	if m == nil {
		m = make(map[string]any)
	}
	m[key] = value
	return m
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// cloneMap deep-copies JSON-like maps (nested maps and slices are copied).
func cloneMap(m map[string]any) map[string]any { return jsonmap.Clone(m) }

func clonePorts(ps []Port) []Port {
	if ps == nil {
		return nil
	}
	out := make([]Port, len(ps))
	for i, p := range ps {
		out[i] = p.clone()
	}
	return out
}
