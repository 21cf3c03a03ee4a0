package agentdeploy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/driver"
)

// InspectName is the implementation name of the in-band inspect interface
// (Ironic's built-in "agent" inspect interface).
const InspectName = "agent"

// InspectionBootKey is the driver_internal_info flag InspectHardware sets:
// the node boots the ramdisk for inspection (the conductor passes the
// ipa-inspection-callback-url ramdisk parameter). Boot interfaces that
// pick a ramdisk configuration per purpose read it; ContinueInspection
// removes it.
const InspectionBootKey = "anvil_inspection_boot"

// The inspection hooks, by Ironic's [inspector]hooks names.
const (
	// HookRamdiskError fails the inspection when the ramdisk reported an
	// error (plugin data "error").
	HookRamdiskError = "ramdisk-error"
	// HookValidateInterfaces keeps the inventory interfaces with a valid
	// MAC address, filtered by InspectOptions.AddPorts.
	HookValidateInterfaces = "validate-interfaces"
	// HookPorts creates a port per kept interface and removes ports per
	// InspectOptions.KeepPorts. It needs validate-interfaces before it.
	HookPorts = "ports"
	// HookArchitecture sets properties.cpu_arch.
	HookArchitecture = "architecture"
	// HookMemory sets properties.memory_mb.
	HookMemory = "memory"
	// HookCPUs sets properties.cpus.
	HookCPUs = "cpus"
	// HookRootDevice sets properties.local_gb from the root disk.
	HookRootDevice = "root-device"
)

// IronicDefaultHooks returns Ironic's [inspector]default_hooks.
func IronicDefaultHooks() []string {
	return []string{HookRamdiskError, HookValidateInterfaces, HookPorts, HookArchitecture}
}

// DefaultHooks returns the hooks the agent inspect interface runs by
// default: Ironic's default hooks plus memory, cpus and root-device, so
// that the scheduling properties cpus, memory_mb, local_gb and cpu_arch
// are all filled (Ironic fills memory_mb and local_gb only when the memory
// and root-device hooks are added to [inspector]hooks, and has no cpus
// hook).
func DefaultHooks() []string {
	return append(IronicDefaultHooks(), HookMemory, HookCPUs, HookRootDevice)
}

// KnownHooks returns every hook name the interface implements.
func KnownHooks() []string {
	return []string{HookRamdiskError, HookValidateInterfaces, HookPorts, HookArchitecture, HookMemory, HookCPUs, HookRootDevice}
}

// Values of InspectOptions.AddPorts (Ironic's [inspector]add_ports).
const (
	AddPortsPXE    = "pxe"
	AddPortsActive = "active"
	AddPortsAll    = "all"
)

// Values of InspectOptions.KeepPorts (Ironic's [inspector]keep_ports).
const (
	KeepPortsAll     = "all"
	KeepPortsPresent = "present"
	KeepPortsAdded   = "added"
)

// InspectOptions configure the agent inspect interface. The zero value is
// the default configuration.
type InspectOptions struct {
	// Hooks are the inspection hooks, run in this order; nil means
	// DefaultHooks(). Ironic names; ports needs validate-interfaces
	// before it.
	Hooks []string
	// AddPorts says which interfaces get a port: "pxe" (default) only the
	// interface the node PXE-booted from, or every valid one when that is
	// unknown; "active" those with an IP address; "all" every valid one.
	AddPorts string
	// KeepPorts says which existing ports survive: "all" (default);
	// "present" those whose MAC the inventory lists; "added" those of the
	// interfaces validate-interfaces kept.
	KeepPorts string
	// Logger receives the hooks' warnings (no suitable root disk, unknown
	// PXE interface); nil means slog.Default(), as everywhere an embedder
	// configures logging.
	Logger *slog.Logger
}

// OptionError is a bad InspectOptions value: Field, the value given and
// what was expected.
type OptionError struct {
	Field    string
	Value    string
	Expected string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("inspect/%s: invalid option %s %q: expected %s", InspectName, e.Field, e.Value, e.Expected)
}

// Is matches driver.ErrInvalidParameter.
func (e *OptionError) Is(target error) bool { return target == driver.ErrInvalidParameter }

// HookError is an inspection hook's failure on a node; the conductor
// records its text as the node's last_error.
type HookError struct {
	Node string
	Hook string
	Msg  string
}

func (e *HookError) Error() string {
	return fmt.Sprintf("inspection hook %s on node %s: %s", e.Hook, e.Node, e.Msg)
}

// Inspect is the agent inspect interface: InspectHardware asks the
// conductor to boot the node into the ramdisk with an inspection callback,
// and ContinueInspection processes the inventory the ramdisk posts,
// running the configured hooks. It is stateless and safe for concurrent
// use.
type Inspect struct {
	hooks     []string
	addPorts  string
	keepPorts string
	log       *slog.Logger
}

// NewInspect returns the agent inspect interface configured by o. An
// unknown hook or option value, a repeated hook, or ports without
// validate-interfaces before it give an *OptionError.
func NewInspect(o InspectOptions) (*Inspect, error) {
	in := &Inspect{hooks: o.Hooks, addPorts: o.AddPorts, keepPorts: o.KeepPorts, log: o.Logger}
	if in.hooks == nil {
		in.hooks = DefaultHooks()
	}
	in.hooks = slices.Clone(in.hooks)
	if in.addPorts == "" {
		in.addPorts = AddPortsPXE
	}
	if in.keepPorts == "" {
		in.keepPorts = KeepPortsAll
	}
	if in.log == nil {
		in.log = slog.Default()
	}
	switch in.addPorts {
	case AddPortsPXE, AddPortsActive, AddPortsAll:
	default:
		return nil, &OptionError{Field: "AddPorts", Value: in.addPorts, Expected: `"pxe", "active" or "all"`}
	}
	switch in.keepPorts {
	case KeepPortsAll, KeepPortsPresent, KeepPortsAdded:
	default:
		return nil, &OptionError{Field: "KeepPorts", Value: in.keepPorts, Expected: `"all", "present" or "added"`}
	}
	seen := map[string]bool{}
	for _, h := range in.hooks {
		if !slices.Contains(KnownHooks(), h) {
			return nil, &OptionError{Field: "Hooks", Value: h, Expected: "one of " + strings.Join(KnownHooks(), ", ")}
		}
		if seen[h] {
			return nil, &OptionError{Field: "Hooks", Value: h, Expected: "each hook listed once"}
		}
		if h == HookPorts && !seen[HookValidateInterfaces] {
			return nil, &OptionError{Field: "Hooks", Value: h, Expected: HookValidateInterfaces + " listed before " + HookPorts}
		}
		seen[h] = true
	}
	return in, nil
}

// Hooks returns the hooks the interface runs, in order.
func (in *Inspect) Hooks() []string { return slices.Clone(in.hooks) }

// Properties returns the driver_info properties the interface reads: none
// (root device hints are read from properties.root_device).
func (*Inspect) Properties() []driver.Property { return []driver.Property{} }

// Validate checks properties.root_device, the only node input the hooks
// read, when the root-device hook runs.
func (in *Inspect) Validate(ctx context.Context, t *driver.Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !slices.Contains(in.hooks, HookRootDevice) {
		return nil
	}
	_, err := parseRootHints(t)
	return err
}

// InspectHardware starts in-band inspection: it flags the ramdisk boot as
// an inspection boot and asks the conductor to boot the node into the
// ramdisk (with the inspection callback) and wait for its data.
func (*Inspect) InspectHardware(ctx context.Context, t *driver.Task) (driver.StepResult, error) {
	if err := ctx.Err(); err != nil {
		return driver.StepResult{}, err
	}
	t.SetDriverInternalInfo(InspectionBootKey, true)
	return driver.StepResult{Wait: true, RebootRequested: true}, nil
}

// inspection is the state the hooks share while processing one post.
type inspection struct {
	t          *driver.Task
	inv        agentclient.Inventory
	pluginData map[string]any
	// valid are the interfaces with a valid MAC (lower-case MAC); kept
	// those validate-interfaces selected for ports; pxeMAC the PXE
	// interface's MAC ("" when unknown).
	valid  []iface
	kept   []iface
	pxeMAC string
}

type iface struct {
	name, mac string
	hasIP     bool
}

// ContinueInspection parses the inventory the ramdisk posted and runs the
// configured hooks in order; the first failing hook fails the inspection
// with a *HookError (what the hooks recorded until then is on t, and the
// conductor drops it).
func (in *Inspect) ContinueInspection(ctx context.Context, t *driver.Task, data driver.InspectionData) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var inv agentclient.Inventory
	if len(data.Inventory) == 0 {
		return &HookError{Node: t.NodeUUID, Hook: "inventory", Msg: "the ramdisk sent no inventory"}
	}
	if err := json.Unmarshal(data.Inventory, &inv); err != nil {
		return &HookError{Node: t.NodeUUID, Hook: "inventory", Msg: fmt.Sprintf("the inventory is not a valid IPA inventory document: %v", err)}
	}
	s := &inspection{t: t, inv: inv, pluginData: data.PluginData}
	for _, h := range in.hooks {
		var err error
		switch h {
		case HookRamdiskError:
			err = hookRamdiskError(s)
		case HookValidateInterfaces:
			err = in.hookValidateInterfaces(s)
		case HookPorts:
			in.hookPorts(s)
		case HookArchitecture:
			hookArchitecture(s)
		case HookMemory:
			err = hookMemory(s)
		case HookCPUs:
			err = hookCPUs(s)
		case HookRootDevice:
			err = in.hookRootDevice(s)
		}
		if err != nil {
			return &HookError{Node: t.NodeUUID, Hook: h, Msg: err.Error()}
		}
	}
	t.DeleteDriverInternalInfo(InspectionBootKey)
	return nil
}

func hookRamdiskError(s *inspection) error {
	v, ok := s.pluginData["error"]
	if !ok || v == nil {
		return nil
	}
	msg := strings.TrimSpace(fmt.Sprint(v))
	if msg == "" {
		return nil
	}
	return fmt.Errorf("Ramdisk reported error: %s", msg)
}

// normalizeMAC is agentclient.NormalizeMAC with ok false where that
// returns "": Ironic's rule (internal/macaddr), a PXE BOOTIF prefix
// allowed, the zero address refused.
func normalizeMAC(mac string) (string, bool) {
	m := agentclient.NormalizeMAC(mac)
	return m, m != ""
}

// pxeMAC is the MAC of the interface the node PXE-booted from: plugin
// data boot_interface, else inventory boot.pxe_interface ("" if neither
// is a MAC).
func pxeMAC(s *inspection) string {
	if v, ok := s.pluginData["boot_interface"].(string); ok {
		if m, ok := normalizeMAC(v); ok {
			return m
		}
	}
	if s.inv.Boot != nil {
		if m, ok := normalizeMAC(s.inv.Boot.PXEInterface); ok {
			return m
		}
		// IPA may report the interface name.
		for _, i := range s.inv.Interfaces {
			if i.Name != "" && i.Name == s.inv.Boot.PXEInterface {
				if m, ok := normalizeMAC(i.MACAddress); ok {
					return m
				}
			}
		}
	}
	return ""
}

func (in *Inspect) hookValidateInterfaces(s *inspection) error {
	if len(s.inv.Interfaces) == 0 {
		return fmt.Errorf("no interfaces supplied by the ramdisk")
	}
	seen := map[string]bool{}
	for _, i := range s.inv.Interfaces {
		mac, ok := normalizeMAC(i.MACAddress)
		if !ok || seen[mac] {
			continue
		}
		seen[mac] = true
		s.valid = append(s.valid, iface{name: i.Name, mac: mac, hasIP: i.IPv4Address != "" || i.IPv6Address != ""})
	}
	if len(s.valid) == 0 {
		return fmt.Errorf("no interface with a valid MAC address in the inventory (%d interfaces)", len(s.inv.Interfaces))
	}
	s.pxeMAC = pxeMAC(s)
	switch in.addPorts {
	case AddPortsAll:
		s.kept = s.valid
	case AddPortsActive:
		for _, i := range s.valid {
			if i.hasIP {
				s.kept = append(s.kept, i)
			}
		}
	default:
		for _, i := range s.valid {
			if i.mac == s.pxeMAC {
				s.kept = append(s.kept, i)
			}
		}
		if s.pxeMAC == "" || len(s.kept) == 0 {
			in.log.Warn("PXE interface unknown or not in the inventory; keeping every valid interface",
				"node", s.t.NodeUUID, "pxe_mac", s.pxeMAC)
			s.kept = s.valid
		}
	}
	if len(s.kept) == 0 {
		return fmt.Errorf("no suitable interface in the inventory for add_ports=%s", in.addPorts)
	}
	// all_interfaces, valid_interfaces and macs, as Ironic's hook records
	// them (each NIC with its pxe_enabled flag).
	if s.pluginData != nil {
		maps.Copy(s.pluginData, agentclient.InterfacesPluginData(&s.inv, s.pxeMAC))
	}
	return nil
}

// hookPorts creates the missing ports of the kept interfaces (pxe_enabled
// for the PXE one; for all when the PXE interface is unknown, a port's
// default) and drops ports as KeepPorts says.
func (in *Inspect) hookPorts(s *inspection) {
	pxe := func(mac string) bool { return s.pxeMAC == "" || mac == s.pxeMAC }
	var keep map[string]bool
	switch in.keepPorts {
	case KeepPortsPresent:
		keep = map[string]bool{}
		for _, i := range s.inv.Interfaces {
			if m, ok := normalizeMAC(i.MACAddress); ok {
				keep[m] = true
			}
		}
	case KeepPortsAdded:
		keep = map[string]bool{}
		for _, i := range s.kept {
			keep[i.mac] = true
		}
	}
	ports := make([]driver.Port, 0, len(s.t.Ports))
	changed := false
	have := map[string]bool{}
	for _, p := range s.t.Ports {
		m, ok := normalizeMAC(p.Address)
		if !ok {
			m = strings.ToLower(p.Address)
		}
		if keep != nil && !keep[m] {
			changed = true
			continue
		}
		have[m] = true
		ports = append(ports, p)
	}
	for _, i := range s.kept {
		if have[i.mac] {
			continue
		}
		have[i.mac] = true
		ports = append(ports, driver.Port{Address: i.mac, PXEEnabled: pxe(i.mac), Extra: map[string]any{"interface_name": i.name}})
		changed = true
	}
	if changed {
		s.t.SetPorts(ports)
	}
}

func hookArchitecture(s *inspection) {
	if a := strings.TrimSpace(s.inv.CPU.Architecture); a != "" {
		s.t.SetProperty("cpu_arch", a)
	}
}

const mib = 1 << 20
const gib = 1 << 30

func hookMemory(s *inspection) error {
	mb := int64(s.inv.Memory.PhysicalMB)
	if mb <= 0 && s.inv.Memory.Total > 0 {
		mb = s.inv.Memory.Total / mib
	}
	if mb <= 0 {
		return fmt.Errorf("no memory information in the inventory (memory.physical_mb and memory.total are missing)")
	}
	s.t.SetProperty("memory_mb", float64(mb))
	return nil
}

func hookCPUs(s *inspection) error {
	if s.inv.CPU.Count <= 0 {
		return fmt.Errorf("no CPU count in the inventory (cpu.count is missing)")
	}
	s.t.SetProperty("cpus", float64(s.inv.CPU.Count))
	return nil
}

// minRootDisk is the size below which a disk is not a root disk candidate
// (IPA's default root device selection skips disks under 4 GiB).
const minRootDisk = 4 * gib

// hookRootDevice sets local_gb to the root disk's size in GiB minus one
// (ironic-inspector's partitioning spacing). The root disk is the first
// disk matching properties.root_device hints, else the smallest disk of
// at least 4 GiB; without one local_gb is 0 and a warning is logged.
func (in *Inspect) hookRootDevice(s *inspection) error {
	hints, err := parseRootHints(s.t)
	if err != nil {
		return err
	}
	var root *agentclient.InventoryDisk
	for i := range s.inv.Disks {
		d := &s.inv.Disks[i]
		if hints != nil {
			if hints.match(d) {
				root = d
				break
			}
			continue
		}
		if d.Size >= minRootDisk && (root == nil || d.Size < root.Size) {
			root = d
		}
	}
	if root == nil {
		why := "no disk of at least 4 GiB"
		if hints != nil {
			why = "no disk matches the root device hints"
		}
		in.log.Warn("no suitable root disk; local_gb set to 0", "node", s.t.NodeUUID, "reason", why, "disks", len(s.inv.Disks))
		s.t.SetProperty("local_gb", float64(0))
		return nil
	}
	gb := root.Size/gib - 1
	if gb < 0 {
		gb = 0
	}
	s.t.SetProperty("local_gb", float64(gb))
	return nil
}

// rootHints are the supported properties.root_device hints.
type rootHints struct {
	strs       map[string]string // name, serial, wwn, model, vendor, hctl, by_path
	sizeOp     string
	sizeGiB    int64
	hasSize    bool
	rotational *bool
}

var stringHints = []string{"name", "serial", "wwn", "model", "vendor", "hctl", "by_path"}

// parseRootHints reads properties.root_device; nil when unset or empty.
func parseRootHints(t *driver.Task) (*rootHints, error) {
	raw, ok := t.Properties["root_device"]
	if !ok || raw == nil {
		return nil, nil
	}
	bad := func(key, expected string) error {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindInspect, Impl: InspectName,
			Field: "properties", Key: "root_device" + key, Expected: expected}
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, bad("", "an object of root device hints")
	}
	if len(m) == 0 {
		return nil, nil
	}
	h := &rootHints{strs: map[string]string{}}
	for k, v := range m {
		switch {
		case slices.Contains(stringHints, k):
			sv, ok := v.(string)
			if !ok || sv == "" {
				return nil, bad("."+k, "a non-empty string")
			}
			h.strs[k] = sv
		case k == "size":
			op, n, err := parseSizeHint(v)
			if err != nil {
				return nil, bad(".size", "a size in GiB, optionally prefixed by ==, !=, >=, <=, > or <")
			}
			h.sizeOp, h.sizeGiB, h.hasSize = op, n, true
		case k == "rotational":
			var b bool
			switch x := v.(type) {
			case bool:
				b = x
			case string:
				pb, err := strconv.ParseBool(x)
				if err != nil {
					return nil, bad(".rotational", "a boolean")
				}
				b = pb
			default:
				return nil, bad(".rotational", "a boolean")
			}
			h.rotational = &b
		default:
			return nil, bad("."+k, "a supported hint: name, size, rotational, serial, wwn, model, vendor, hctl, by_path")
		}
	}
	return h, nil
}

func parseSizeHint(v any) (string, int64, error) {
	switch x := v.(type) {
	case float64:
		if x != float64(int64(x)) || x < 0 {
			return "", 0, fmt.Errorf("not a whole size")
		}
		return "==", int64(x), nil
	case int:
		return "==", int64(x), nil
	case int64:
		return "==", x, nil
	case string:
		s := strings.TrimSpace(x)
		op := "=="
		for _, o := range []string{"==", "!=", ">=", "<=", ">", "<"} {
			if strings.HasPrefix(s, o) {
				op, s = o, strings.TrimSpace(s[len(o):])
				break
			}
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return "", 0, fmt.Errorf("not a size")
		}
		return op, n, nil
	}
	return "", 0, fmt.Errorf("not a size")
}

func (h *rootHints) match(d *agentclient.InventoryDisk) bool {
	for k, want := range h.strs {
		var got string
		switch k {
		case "name":
			got = d.Name
			if !strings.HasPrefix(want, "/dev/") {
				want = "/dev/" + want
			}
			if !strings.HasPrefix(got, "/dev/") {
				got = "/dev/" + got
			}
		case "serial":
			got = d.Serial
		case "wwn":
			got = d.WWN
		case "model":
			got = d.Model
		case "vendor":
			got = d.Vendor
		case "hctl":
			got = d.HCTL
		case "by_path":
			got = d.ByPath
		}
		if !strings.EqualFold(strings.TrimSpace(got), strings.TrimSpace(want)) {
			return false
		}
	}
	if h.rotational != nil && d.Rotational != *h.rotational {
		return false
	}
	if h.hasSize {
		g := d.Size / gib
		ok := false
		switch h.sizeOp {
		case "==":
			ok = g == h.sizeGiB
		case "!=":
			ok = g != h.sizeGiB
		case ">=":
			ok = g >= h.sizeGiB
		case "<=":
			ok = g <= h.sizeGiB
		case ">":
			ok = g > h.sizeGiB
		case "<":
			ok = g < h.sizeGiB
		}
		if !ok {
			return false
		}
	}
	return true
}

var (
	_ driver.InspectInterface = (*Inspect)(nil)
	_ driver.InbandInspector  = (*Inspect)(nil)
)
