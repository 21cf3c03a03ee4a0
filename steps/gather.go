package steps

import (
	"sort"
	"strconv"
)

// Source is where a node's steps come from: the steps declared by each
// interface implementation of the node's driver, and the in-band steps the
// agent reported (Ironic's agent_cached_<kind>_steps).
type Source struct {
	// Driver maps an interface type ("deploy", "raid", ...) to the steps
	// its implementation for this node declares. Interfaces that
	// contribute no steps of the kind are ignored.
	Driver map[string][]Step `json:"driver,omitempty"`
	// Agent maps an interface type to the in-band steps the agent
	// reported for it. Which of them a plan reads is decided by InBand
	// and Contributes.
	Agent map[string][]Step `json:"agent,omitempty"`
	// InBand names the interfaces whose implementation for this node is
	// agent-based: the deploy interface when it is one of the agent deploy
	// interfaces (direct, custom-agent...), the RAID interface when it is
	// the agent RAID interface. Agent steps of other interfaces are never
	// read, as Ironic reads agent RAID steps only through its agent RAID
	// interface.
	InBand []string `json:"in_band,omitempty"`
	// AgentPriorities overrides the priority of agent steps, keyed by
	// "interface.step" or by bare step name, as [deploy]erase_devices_priority
	// and friends do; any value present applies, 0 included.
	AgentPriorities map[string]int `json:"agent_priorities,omitempty"`
}

// Contribution says which steps one interface of a node adds to a plan.
type Contribution int

// The contributions of Contributes.
const (
	// FromDriver takes the steps the implementation declares (out of
	// band) and ignores the agent's.
	FromDriver Contribution = iota + 1
	// FromAgent takes the agent's in-band steps for the interface and
	// ignores the steps the implementation declares.
	FromAgent
	// FromDriverThenAgent takes the declared steps, then the agent's
	// steps that no declared step of the same name shadows (an
	// out-of-band step such as deploy.write_image that proxies to the
	// in-band step of its name).
	FromDriverThenAgent
)

func (c Contribution) String() string {
	switch c {
	case FromDriver:
		return "driver"
	case FromAgent:
		return "agent"
	case FromDriverThenAgent:
		return "driver+agent"
	}
	return "contribution(" + strconv.Itoa(int(c)) + ")"
}

// Contributes is the decision table of Ironic's agent-based interfaces
// (its AgentBaseMixin, CustomAgentDeploy and AgentRAID): which steps of
// kind an interface adds, given whether its implementation for the node is
// agent-based.
//
//	implementation     kind                    contributes
//	not agent-based    any                     FromDriver
//	agent-based        verify                  FromDriver (the agent has no verify steps)
//	agent deploy       deploy steps            FromDriverThenAgent
//	agent deploy       clean, service steps    FromAgent
//	agent RAID, other  clean, deploy, service  FromAgent
//
// An interface outside the kind's tie-break table contributes nothing;
// Gather never asks about it.
func Contributes(kind Kind, iface string, agentBased bool) Contribution {
	switch {
	case !agentBased || kind == Verify:
		return FromDriver
	case kind == Deploy && iface == InterfaceDeploy:
		return FromDriverThenAgent
	default:
		return FromAgent
	}
}

// GatherOptions selects how Gather filters and orders steps.
type GatherOptions struct {
	// EnabledOnly drops steps whose priority is exactly 0 after
	// overrides, as automated runs do.
	EnabledOnly bool
	// Sorted orders the result by priority, then the interface tie-break
	// of the kind, descending; stable for equal keys.
	Sorted bool
	// Overrides replaces priorities, keyed "interface.step". Every value
	// present applies, 0 included: an override of 0 disables the step for
	// automated runs and is the priority a manual clean copies, as
	// Ironic's [conductor]clean_step_priority_override does (its values
	// are strings, so "0" is a set value there too).
	Overrides map[string]int
}

// Gather collects the node's steps of one kind, in Ironic's order: for
// each interface of the kind's table (in table order) the steps
// Contributes gives it (the driver's, the agent's, or the driver's then
// the agent's it does not shadow); then priority overrides, the enabled
// filter and the sort. The result shares no memory with src.
func Gather(kind Kind, src Source, opts GatherOptions) []Step {
	n := 0
	for _, row := range kind.table() {
		n += len(src.Driver[row.iface]) + len(src.Agent[row.iface])
	}
	out := make([]Step, 0, n)
	for _, row := range kind.table() {
		from := Contributes(kind, row.iface, containsString(src.InBand, row.iface))
		var driver []Step
		if from != FromAgent {
			driver = src.Driver[row.iface]
		}
		for _, s := range driver {
			s = s.clone()
			s.Interface = row.iface
			out = append(out, s)
		}
		if from == FromDriver {
			continue
		}
		for _, s := range src.Agent[row.iface] {
			if findStep(driver, row.iface, s.Name) >= 0 {
				continue
			}
			s = s.clone()
			s.Interface = row.iface
			if kind == Clean || kind == Service {
				// In-band steps always need the ramdisk.
				s.RequiresRamdisk = true
			}
			if p, ok := src.AgentPriorities[s.Key()]; ok {
				s.Priority = p
			} else if p, ok := src.AgentPriorities[s.Name]; ok {
				s.Priority = p
			}
			out = append(out, s)
		}
	}
	for i := range out {
		if p, ok := opts.Overrides[out[i].Key()]; ok {
			out[i].Priority = p
		}
	}
	if opts.EnabledOnly {
		kept := out[:0]
		for _, s := range out {
			if s.Priority != 0 {
				kept = append(kept, s)
			}
		}
		out = kept
	}
	if opts.Sorted {
		sortSteps(kind, out)
	}
	return out
}

// sortSteps sorts by (priority, interface priority) descending, keeping
// the collection order of equal keys.
func sortSteps(kind Kind, list []Step) {
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		pa, _ := kind.InterfacePriority(a.Interface)
		pb, _ := kind.InterfacePriority(b.Interface)
		return pa > pb
	})
}

func findStep(list []Step, iface, name string) int {
	for i, s := range list {
		if s.Interface == iface && s.Name == name {
			return i
		}
	}
	return -1
}

// AgentSteps turns the step list of an agent's get_<kind>_steps answer
// (hardware manager name → steps) into the per-interface cache Ironic
// keeps in agent_cached_<kind>_steps. Steps of interfaces that contribute
// no steps of the kind are dropped; clean and service steps are marked as
// requiring the ramdisk. Hardware managers are read in name order so the
// result is deterministic.
func AgentSteps(kind Kind, byManager map[string][]Step) map[string][]Step {
	managers := make([]string, 0, len(byManager))
	for m := range byManager {
		managers = append(managers, m)
	}
	sort.Strings(managers)
	out := map[string][]Step{}
	for _, m := range managers {
		for _, s := range byManager[m] {
			if _, ok := kind.InterfacePriority(s.Interface); !ok {
				continue
			}
			s = s.clone()
			if kind == Clean || kind == Service {
				s.RequiresRamdisk = true
			}
			out[s.Interface] = append(out[s.Interface], s)
		}
	}
	return out
}
