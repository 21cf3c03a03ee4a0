package statemachine

import (
	"fmt"
	"slices"
)

// State is the name of a state, for example "clean wait". The empty State
// stands for "no state", Ironic's null target.
type State string

// Event is the name of an event, for example "deploy".
type Event string

// NoState is the empty state: a node with no target_provision_state has
// target NoState.
const NoState State = ""

// StateSpec declares one state of a machine.
type StateSpec struct {
	// Name is the state's exact string.
	Name State `json:"name"`
	// Stable marks a state a node rests in until someone asks for more;
	// only a stable state may be a target.
	Stable bool `json:"stable"`
	// Target is the default target a node gets on entering this state
	// (Ironic's target_provision_state). It must be empty for a stable
	// state and, when set, name a stable state.
	Target State `json:"target,omitempty"`
}

// Transition is one row of a transition table: in state From, event Event
// moves to state To.
type Transition struct {
	// From is the state the event is accepted in.
	From State `json:"from"`
	// Event is the accepted event.
	Event Event `json:"event"`
	// To is the state the event leads to.
	To State `json:"to"`
}

// StickyTarget keeps a caller's target while a node moves between the
// listed states. Ironic uses it for manual cleaning: a clean started from
// manageable keeps target manageable through cleaning, clean wait, clean
// hold and clean failed, where the states' own default target would be
// available.
type StickyTarget struct {
	// Target is the target that sticks. It must be a stable state.
	Target State `json:"target"`
	// Within lists the states between which it sticks; both ends of a
	// transition must be in the list.
	Within []State `json:"within"`
}

// Definition is the complete, serialisable description of a machine: what
// New builds from and what Machine.Definition and Machine.WriteJSON give
// back.
type Definition struct {
	// Name identifies the machine in errors and exports.
	Name string `json:"name"`
	// Initial is the state new objects start in.
	Initial State `json:"initial"`
	// States lists every state, in presentation order.
	States []StateSpec `json:"states"`
	// Events lists every event, in presentation order; Allowed and
	// TransitionError.Allowed follow this order.
	Events []Event `json:"events"`
	// Transitions is the table. A (From, Event) pair may appear once.
	Transitions []Transition `json:"transitions"`
	// Sticky lists the sticky-target rules, if any.
	Sticky []StickyTarget `json:"sticky_targets,omitempty"`
}

// Machine is an immutable finite state machine built by New. It holds no
// current state: callers pass the state they are in and get the next one
// back, so one Machine serves any number of objects and is safe for
// concurrent use.
type Machine struct {
	def        Definition
	stateIndex map[State]int
	eventIndex map[Event]int
	// next[state*len(events)+event] is the index of the destination
	// state, or -1 when the event is refused.
	next    []int16
	allowed [][]Event
	sticky  []stickyRule
}

type stickyRule struct {
	target State
	within []bool // indexed by state
}

// New validates def and builds a Machine from a private copy of it. A
// mistake in def is returned as a *DefinitionError naming the field.
func New(def Definition) (*Machine, error) {
	def = cloneDefinition(def)
	m := &Machine{
		def:        def,
		stateIndex: make(map[State]int, len(def.States)),
		eventIndex: make(map[Event]int, len(def.Events)),
	}
	if len(def.States) == 0 {
		return nil, &DefinitionError{Field: "states", Value: "", Reason: "a machine needs at least one state"}
	}
	if len(def.States) > 1<<15-1 {
		return nil, &DefinitionError{Field: "states", Value: fmt.Sprint(len(def.States)), Reason: "too many states"}
	}
	for i, s := range def.States {
		field := fmt.Sprintf("states[%d].name", i)
		if s.Name == NoState {
			return nil, &DefinitionError{Field: field, Value: "", Reason: "a state needs a non-empty name"}
		}
		if _, dup := m.stateIndex[s.Name]; dup {
			return nil, &DefinitionError{Field: field, Value: string(s.Name), Reason: "state declared twice"}
		}
		m.stateIndex[s.Name] = i
	}
	for i, s := range def.States {
		if s.Target == NoState {
			continue
		}
		field := fmt.Sprintf("states[%d].target", i)
		if s.Stable {
			return nil, &DefinitionError{Field: field, Value: string(s.Target), Reason: "a stable state has no default target"}
		}
		if !m.stableIndex(s.Target) {
			return nil, &DefinitionError{Field: field, Value: string(s.Target), Reason: "a target must be a registered stable state"}
		}
	}
	if _, ok := m.stateIndex[def.Initial]; !ok {
		return nil, &DefinitionError{Field: "initial", Value: string(def.Initial), Reason: "the initial state must be registered"}
	}
	for i, ev := range def.Events {
		field := fmt.Sprintf("events[%d]", i)
		if ev == "" {
			return nil, &DefinitionError{Field: field, Value: "", Reason: "an event needs a non-empty name"}
		}
		if _, dup := m.eventIndex[ev]; dup {
			return nil, &DefinitionError{Field: field, Value: string(ev), Reason: "event declared twice"}
		}
		m.eventIndex[ev] = i
	}
	ns, ne := len(def.States), len(def.Events)
	m.next = make([]int16, ns*ne)
	for i := range m.next {
		m.next[i] = -1
	}
	for i, t := range def.Transitions {
		from, ok := m.stateIndex[t.From]
		if !ok {
			return nil, &DefinitionError{Field: fmt.Sprintf("transitions[%d].from", i), Value: string(t.From), Reason: "not a registered state"}
		}
		ev, ok := m.eventIndex[t.Event]
		if !ok {
			return nil, &DefinitionError{Field: fmt.Sprintf("transitions[%d].event", i), Value: string(t.Event), Reason: "not a registered event"}
		}
		to, ok := m.stateIndex[t.To]
		if !ok {
			return nil, &DefinitionError{Field: fmt.Sprintf("transitions[%d].to", i), Value: string(t.To), Reason: "not a registered state"}
		}
		cell := from*ne + ev
		if m.next[cell] >= 0 {
			return nil, &DefinitionError{
				Field:  fmt.Sprintf("transitions[%d]", i),
				Value:  string(t.From) + " --" + string(t.Event) + "-->",
				Reason: "this state already has a transition for this event",
			}
		}
		m.next[cell] = int16(to)
	}
	m.allowed = make([][]Event, ns)
	for s := range ns {
		for e := range ne {
			if m.next[s*ne+e] >= 0 {
				m.allowed[s] = append(m.allowed[s], def.Events[e])
			}
		}
	}
	for i, r := range def.Sticky {
		if !m.stableIndex(r.Target) {
			return nil, &DefinitionError{Field: fmt.Sprintf("sticky_targets[%d].target", i), Value: string(r.Target), Reason: "a sticky target must be a registered stable state"}
		}
		rule := stickyRule{target: r.Target, within: make([]bool, ns)}
		for j, s := range r.Within {
			idx, ok := m.stateIndex[s]
			if !ok {
				return nil, &DefinitionError{Field: fmt.Sprintf("sticky_targets[%d].within[%d]", i, j), Value: string(s), Reason: "not a registered state"}
			}
			rule.within[idx] = true
		}
		m.sticky = append(m.sticky, rule)
	}
	return m, nil
}

func (m *Machine) stableIndex(s State) bool {
	i, ok := m.stateIndex[s]
	return ok && m.def.States[i].Stable
}

func cloneDefinition(def Definition) Definition {
	out := def
	out.States = slices.Clone(def.States)
	out.Events = slices.Clone(def.Events)
	out.Transitions = slices.Clone(def.Transitions)
	out.Sticky = make([]StickyTarget, len(def.Sticky))
	for i, r := range def.Sticky {
		out.Sticky[i] = StickyTarget{Target: r.Target, Within: slices.Clone(r.Within)}
	}
	if len(out.Sticky) == 0 {
		out.Sticky = nil
	}
	return out
}

// Name returns the machine's name.
func (m *Machine) Name() string { return m.def.Name }

// Initial returns the state new objects start in.
func (m *Machine) Initial() State { return m.def.Initial }

// Definition returns a copy of the definition the machine was built from;
// the caller owns it.
func (m *Machine) Definition() Definition { return cloneDefinition(m.def) }

// States returns the registered states in declaration order; the caller
// owns the slice.
func (m *Machine) States() []StateSpec { return slices.Clone(m.def.States) }

// Events returns the registered events in declaration order; the caller
// owns the slice.
func (m *Machine) Events() []Event { return slices.Clone(m.def.Events) }

// Transitions returns the transition table in declaration order; the
// caller owns the slice.
func (m *Machine) Transitions() []Transition { return slices.Clone(m.def.Transitions) }

// Has reports whether s is a registered state.
func (m *Machine) Has(s State) bool {
	_, ok := m.stateIndex[s]
	return ok
}

// HasEvent reports whether ev is a registered event.
func (m *Machine) HasEvent(ev Event) bool {
	_, ok := m.eventIndex[ev]
	return ok
}

// IsStable reports whether s is a registered stable state.
func (m *Machine) IsStable(s State) bool { return m.stableIndex(s) }

// DefaultTarget returns the target a node gets on entering s, NoState for a
// stable or unregistered state.
func (m *Machine) DefaultTarget(s State) State {
	i, ok := m.stateIndex[s]
	if !ok {
		return NoState
	}
	return m.def.States[i].Target
}

// Allows reports whether event ev is accepted in state s. It is the cheap
// check an API runs before accepting a request (Ironic's
// is_actionable_event) and does not allocate.
func (m *Machine) Allows(s State, ev Event) bool {
	_, ok := m.Next(s, ev)
	return ok
}

// Next returns the state event ev leads to from state s, and whether the
// transition exists. It applies no target rules.
func (m *Machine) Next(s State, ev Event) (State, bool) {
	si, ok := m.stateIndex[s]
	if !ok {
		return NoState, false
	}
	ei, ok := m.eventIndex[ev]
	if !ok {
		return NoState, false
	}
	to := m.next[si*len(m.def.Events)+ei]
	if to < 0 {
		return NoState, false
	}
	return m.def.States[to].Name, true
}

// Allowed returns the events accepted in state s, in the machine's event
// order, or nil when s is not registered. The caller owns the slice.
func (m *Machine) Allowed(s State) []Event {
	i, ok := m.stateIndex[s]
	if !ok {
		return nil
	}
	return slices.Clone(m.allowed[i])
}

// Check validates a stored pair of current state and target, as Ironic
// does when it loads a node into its machine: the state must be registered
// (else *UnknownStateError) and the target, when set, must be a registered
// stable state (else *TargetError). It does not allocate when the pair is
// valid.
func (m *Machine) Check(state, target State) error {
	if _, ok := m.stateIndex[state]; !ok {
		return &UnknownStateError{Machine: m.def.Name, Field: "state", State: state}
	}
	if target != NoState && !m.stableIndex(target) {
		return m.targetError("target", target)
	}
	return nil
}

// Move is everything Apply needs to process one event the way Ironic's
// TaskManager.process_event does.
type Move struct {
	// State is the current state (provision_state).
	State State
	// Target is the current target (target_provision_state), NoState when
	// there is none. When set it must be a registered stable state.
	Target State
	// Event is the event to process.
	Event Event
	// ExplicitTarget, when set, overrides every other target rule; it
	// must be a registered stable state. Ironic's manual clean passes
	// manageable here.
	ExplicitTarget State
	// WorkFollows is true when the caller schedules work after the move
	// (Ironic passes a callback). Without work, reaching a stable state
	// clears the target.
	WorkFollows bool
}

// Apply processes mv.Event from mv.State and returns the new state and the
// new target. The target is computed by these rules, in order:
//
//  1. a current target equal to the new state is cleared (the node got
//     where it was going);
//  2. a new state that declares a default target sets it;
//  3. a sticky-target rule keeps the current target while the node moves
//     between the rule's states (manual cleaning keeps manageable);
//  4. an explicit target overrides all of the above;
//  5. without follow-up work, reaching a stable state clears the target.
//
// A refused event is a *TransitionError (errors.Is ErrInvalidTransition);
// an unregistered state is a *UnknownStateError; a target that is not a
// registered stable state is a *TargetError. Apply does not allocate
// unless it returns an error.
func (m *Machine) Apply(mv Move) (State, State, error) {
	if err := m.Check(mv.State, mv.Target); err != nil {
		return NoState, NoState, err
	}
	from := m.stateIndex[mv.State]
	if mv.ExplicitTarget != NoState && !m.stableIndex(mv.ExplicitTarget) {
		return NoState, NoState, m.targetError("explicit target", mv.ExplicitTarget)
	}
	ei, known := m.eventIndex[mv.Event]
	to := int16(-1)
	if known {
		to = m.next[from*len(m.def.Events)+ei]
	}
	if to < 0 {
		return NoState, NoState, &TransitionError{
			Machine:      m.def.Name,
			State:        mv.State,
			Event:        mv.Event,
			Allowed:      slices.Clone(m.allowed[from]),
			UnknownEvent: !known,
		}
	}
	next := m.def.States[to]
	target := mv.Target
	if target == next.Name {
		target = NoState
	}
	if next.Target != NoState {
		target = next.Target
	}
	for i := range m.sticky {
		r := &m.sticky[i]
		if mv.Target == r.target && r.within[from] && r.within[to] {
			target = r.target
		}
	}
	if mv.ExplicitTarget != NoState {
		target = mv.ExplicitTarget
	}
	if !mv.WorkFollows && next.Stable {
		target = NoState
	}
	return next.Name, target, nil
}

func (m *Machine) targetError(field string, target State) error {
	reason := "not a registered state"
	if m.Has(target) {
		reason = "not a stable state; only stable states can be targets"
	}
	return &TargetError{Machine: m.def.Name, Field: field, Target: target, Reason: reason}
}

// Process processes event ev from state s with no current target, no
// explicit target and no follow-up work, and returns the new state and the
// new target: the new state's default target, or NoState for a stable
// state. Use Apply to carry a node's current target along. Process does not
// allocate unless it returns an error.
func (m *Machine) Process(s State, ev Event) (State, State, error) {
	return m.Apply(Move{State: s, Event: ev})
}
