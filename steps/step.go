package steps

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/anvilmetal/anvil/internal/jsonexact"
	"github.com/anvilmetal/anvil/internal/jsonmap"
)

// Kind names a family of steps: the operation a step list belongs to.
type Kind string

// The step kinds Ironic knows.
const (
	Clean   Kind = "clean"
	Deploy  Kind = "deploy"
	Service Kind = "service"
	Verify  Kind = "verify"
)

// ArgInfo describes one argument a step accepts, as Ironic's argsinfo does.
type ArgInfo struct {
	Description string `json:"description"`
	Required    bool   `json:"required,omitempty"`
}

// Step is one step: the metadata an interface declares for it and, in a
// plan, the arguments it is run with. The JSON shape is the one Ironic
// keeps in driver_internal_info and exchanges with the agent.
type Step struct {
	Interface string             `json:"interface"`
	Name      string             `json:"step"`
	Priority  int                `json:"priority"`
	Args      map[string]any     `json:"args,omitempty"`
	ArgsInfo  map[string]ArgInfo `json:"argsinfo,omitempty"`
	// ArgsOrder is the order in which the step's arguments were declared
	// (Ironic keeps argsinfo as an ordered dictionary and lists missing
	// arguments in that order). Decoding a step from JSON fills it from
	// the order of the argsinfo object's keys, encoding writes argsinfo in
	// it, and WithArg builds it; names of ArgsInfo missing from it come
	// after, sorted (ArgNames).
	ArgsOrder       []string `json:"-"`
	Abortable       bool     `json:"abortable"`
	RequiresRamdisk bool     `json:"requires_ramdisk,omitempty"`
	RebootRequested bool     `json:"reboot_requested,omitempty"`

	// AbortAfter is set on the running step when an abort was requested
	// while a non-abortable step ran: the operation is aborted once the
	// step finishes (Ironic's "abort_after" key of the current step).
	AbortAfter bool `json:"abort_after,omitempty"`
	// ExecuteOnChildNodes asks the conductor to run a user step on the
	// node's child nodes; such steps are not validated against the
	// parent's driver.
	ExecuteOnChildNodes bool `json:"execute_on_child_nodes,omitempty"`
	// LimitChildNodeExecution restricts ExecuteOnChildNodes to the named
	// child nodes.
	LimitChildNodeExecution []string `json:"limit_child_node_execution,omitempty"`
}

// ArgNames returns the names of the step's declared arguments in
// declaration order: those of ArgsOrder that ArgsInfo holds, then the
// remaining ones sorted.
func (s Step) ArgNames() []string {
	names := make([]string, 0, len(s.ArgsInfo))
	seen := make(map[string]bool, len(s.ArgsInfo))
	for _, n := range s.ArgsOrder {
		if _, ok := s.ArgsInfo[n]; ok && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	rest := len(names)
	for n := range s.ArgsInfo {
		if !seen[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names[rest:])
	return names
}

// stepJSON is Step without its methods, for the JSON codec.
type stepJSON Step

// MarshalJSON encodes the step in Ironic's shape, with argsinfo's keys in
// declaration order (ArgNames).
func (s Step) MarshalJSON() ([]byte, error) {
	if len(s.ArgsInfo) == 0 {
		return json.Marshal(stepJSON(s))
	}
	var info bytes.Buffer
	info.WriteByte('{')
	for i, n := range s.ArgNames() {
		if i > 0 {
			info.WriteByte(',')
		}
		k, err := json.Marshal(n)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(s.ArgsInfo[n])
		if err != nil {
			return nil, err
		}
		info.Write(k)
		info.WriteByte(':')
		info.Write(v)
	}
	info.WriteByte('}')
	return json.Marshal(struct {
		stepJSON
		ArgsInfo json.RawMessage `json:"argsinfo"`
	}{stepJSON(s), info.Bytes()})
}

// UnmarshalJSON decodes a step and records the order of its argsinfo
// keys in ArgsOrder. Numbers in Args are kept exactly (see
// internal/jsonexact): float64 when float64 writes back the same text,
// json.Number otherwise, so 9007199254740993 and 1.0 stay what they are,
// as in Ironic and IPA, which are Python.
func (s *Step) UnmarshalJSON(data []byte) error {
	var p stepJSON
	if err := jsonexact.Unmarshal(data, &p); err != nil {
		return err
	}
	if p.Args != nil {
		jsonexact.Normalize(p.Args)
	}
	p.ArgsOrder = nil
	if len(p.ArgsInfo) > 0 {
		var raw struct {
			ArgsInfo json.RawMessage `json:"argsinfo"`
		}
		if err := json.Unmarshal(data, &raw); err != nil {
			return err
		}
		p.ArgsOrder = objectKeys(raw.ArgsInfo)
	}
	*s = Step(p)
	return nil
}

// objectKeys returns the keys of a JSON object in the order they appear
// (a repeated key is listed once); nil if data is not an object.
func objectKeys(data []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		if !containsString(keys, k) {
			keys = append(keys, k)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
	}
	return keys
}

// Key returns the step's identity, "<interface>.<step>", the form used by
// priority overrides, disallow lists and duplicate detection.
func (s Step) Key() string { return s.Interface + "." + s.Name }

// IsZero reports whether s is the empty step ({} in Ironic), the value of
// a node's current-step column when no step runs.
func (s Step) IsZero() bool { return s.Interface == "" && s.Name == "" }

// IsReserved reports whether the step's name is one the conductor handles
// itself (power_on, power_off, reboot, hold, wait) rather than a driver.
func (s Step) IsReserved() bool { return IsReservedName(s.Name) }

// Reserved step names: steps with these names are executed by the
// conductor, whatever their interface, and skip validation.
const (
	StepPowerOn  = "power_on"
	StepPowerOff = "power_off"
	StepReboot   = "reboot"
	StepHold     = "hold"
	StepWait     = "wait"
)

// IsReservedName reports whether name is a reserved step name.
func IsReservedName(name string) bool {
	switch name {
	case StepPowerOn, StepPowerOff, StepReboot, StepHold, StepWait:
		return true
	}
	return false
}

// clone returns a copy of s that shares no maps or slices with it.
func (s Step) clone() Step {
	c := s
	if s.Args != nil {
		c.Args = jsonmap.CloneValue(s.Args).(map[string]any)
	}
	if s.ArgsInfo != nil {
		c.ArgsInfo = make(map[string]ArgInfo, len(s.ArgsInfo))
		for k, v := range s.ArgsInfo {
			c.ArgsInfo[k] = v
		}
	}
	if s.ArgsOrder != nil {
		c.ArgsOrder = append([]string(nil), s.ArgsOrder...)
	}
	if s.LimitChildNodeExecution != nil {
		c.LimitChildNodeExecution = append([]string(nil), s.LimitChildNodeExecution...)
	}
	return c
}

func cloneSteps(in []Step) []Step {
	if in == nil {
		return nil
	}
	out := make([]Step, len(in))
	for i, s := range in {
		out[i] = s.clone()
	}
	return out
}

// Interface types, as Ironic names them.
const (
	InterfaceBIOS       = "bios"
	InterfaceBoot       = "boot"
	InterfaceConsole    = "console"
	InterfaceDeploy     = "deploy"
	InterfaceFirmware   = "firmware"
	InterfaceInspect    = "inspect"
	InterfaceManagement = "management"
	InterfaceNetwork    = "network"
	InterfacePower      = "power"
	InterfaceRAID       = "raid"
	InterfaceRescue     = "rescue"
	InterfaceStorage    = "storage"
	InterfaceVendor     = "vendor"
)

// ifacePrio is one row of a kind's tie-break table.
type ifacePrio struct {
	iface string
	prio  int
}

// The tie-break tables of §3.2, in Ironic's collection order (the order of
// its priority dictionaries), higher priority first.
var (
	cleanTable = []ifacePrio{
		{InterfaceVendor, 7}, {InterfacePower, 6}, {InterfaceManagement, 5},
		{InterfaceFirmware, 4}, {InterfaceDeploy, 3}, {InterfaceBIOS, 2}, {InterfaceRAID, 1},
	}
	serviceTable = []ifacePrio{
		{InterfaceNetwork, 8}, {InterfaceVendor, 7}, {InterfacePower, 6}, {InterfaceManagement, 5},
		{InterfaceFirmware, 4}, {InterfaceDeploy, 3}, {InterfaceBIOS, 2}, {InterfaceRAID, 1},
	}
	verifyTable = []ifacePrio{
		{InterfacePower, 13}, {InterfaceManagement, 12}, {InterfaceFirmware, 11},
		{InterfaceInspect, 10}, {InterfaceDeploy, 9}, {InterfaceBoot, 8}, {InterfaceBIOS, 7},
		{InterfaceRAID, 6}, {InterfaceVendor, 5}, {InterfaceNetwork, 4}, {InterfaceStorage, 3},
		{InterfaceConsole, 2}, {InterfaceRescue, 1},
	}
)

func (k Kind) table() []ifacePrio {
	switch k {
	case Clean, Deploy:
		// Ironic keeps two tables with identical content for clean and deploy.
		return cleanTable
	case Service:
		return serviceTable
	case Verify:
		return verifyTable
	}
	return nil
}

// Valid reports whether k is one of the four step kinds.
func (k Kind) Valid() bool { return k.table() != nil }

// InterfacePriority returns the tie-break priority of an interface for
// this kind (higher runs first among steps of equal priority), and false
// when the interface contributes no steps of this kind.
func (k Kind) InterfacePriority(iface string) (int, bool) {
	for _, r := range k.table() {
		if r.iface == iface {
			return r.prio, true
		}
	}
	return 0, false
}

// Interfaces returns the interfaces that contribute steps of this kind, in
// Ironic's collection order.
func (k Kind) Interfaces() []string {
	t := k.table()
	out := make([]string, len(t))
	for i, r := range t {
		out[i] = r.iface
	}
	return out
}

// userInterfaces returns the interfaces the API accepts in user steps of
// this kind: the cleaning table for clean and service steps, the
// deploying table for deploy steps.
func (k Kind) userInterfaces() []string {
	switch k {
	case Clean, Service, Deploy:
		return Clean.Interfaces()
	}
	return nil
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// splitKey splits "interface.step" at the first dot.
func splitKey(key string) (iface, name string, ok bool) {
	iface, name, ok = strings.Cut(key, ".")
	return iface, name, ok && iface != "" && name != ""
}
