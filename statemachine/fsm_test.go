package statemachine_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	sm "github.com/anvilmetal/anvil/statemachine"
)

// doorDefinition is a small machine unrelated to Ironic, to show the
// generic part works on its own.
func doorDefinition() sm.Definition {
	return sm.Definition{
		Name:    "door",
		Initial: "closed",
		States: []sm.StateSpec{
			{Name: "closed", Stable: true},
			{Name: "open", Stable: true},
			{Name: "locked", Stable: true},
			{Name: "opening", Target: "open"},
			{Name: "jammed"},
		},
		Events: []sm.Event{"open", "close", "lock", "unlock", "done", "fail"},
		Transitions: []sm.Transition{
			{From: "closed", Event: "open", To: "opening"},
			{From: "opening", Event: "done", To: "open"},
			{From: "opening", Event: "fail", To: "jammed"},
			{From: "open", Event: "close", To: "closed"},
			{From: "closed", Event: "lock", To: "locked"},
			{From: "locked", Event: "unlock", To: "closed"},
		},
	}
}

func TestGenericMachine(t *testing.T) {
	m, err := sm.New(doorDefinition())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if m.Name() != "door" || m.Initial() != "closed" {
		t.Errorf("name, initial = %q, %q", m.Name(), m.Initial())
	}
	state, target, err := m.Process("closed", "open")
	if err != nil || state != "opening" || target != "open" {
		t.Errorf("Process(closed, open) = %q, %q, %v", state, target, err)
	}
	state, target, err = m.Apply(sm.Move{State: "opening", Target: "open", Event: "fail"})
	if err != nil || state != "jammed" || target != "open" {
		t.Errorf("Apply(opening -fail->) = %q, %q, %v; want jammed, open", state, target, err)
	}
	if got := m.Allowed("closed"); !slices.Equal(got, []sm.Event{"open", "lock"}) {
		t.Errorf("Allowed(closed) = %q, want [open lock] in event order", got)
	}
	if got := m.Allowed("jammed"); len(got) != 0 {
		t.Errorf("Allowed(jammed) = %q, want none", got)
	}
	if got := m.Allowed("nowhere"); got != nil {
		t.Errorf("Allowed(unregistered) = %q, want nil", got)
	}
	if !m.Has("jammed") || m.Has("nowhere") || !m.HasEvent("lock") || m.HasEvent("kick") {
		t.Error("Has/HasEvent disagree with the definition")
	}
	if m.IsStable("opening") || !m.IsStable("locked") || m.IsStable("nowhere") {
		t.Error("IsStable disagrees with the definition")
	}
	if m.DefaultTarget("nowhere") != sm.NoState {
		t.Error("DefaultTarget of an unregistered state must be NoState")
	}

	_, _, err = m.Process("jammed", "open")
	var te *sm.TransitionError
	if !errors.As(err, &te) {
		t.Fatalf("Process(jammed, open) error = %v, want *TransitionError", err)
	}
	if !strings.Contains(err.Error(), "no events are allowed") {
		t.Errorf("error %q should say that nothing is allowed", err)
	}
}

func TestMachineIsIsolatedFromItsInputs(t *testing.T) {
	def := doorDefinition()
	m, err := sm.New(def)
	if err != nil {
		t.Fatal(err)
	}
	def.Transitions[0].To = "jammed"
	def.States[0].Name = "renamed"
	if to, _ := m.Next("closed", "open"); to != "opening" {
		t.Fatalf("changing the Definition after New changed the machine: %q", to)
	}
	allowed := m.Allowed("closed")
	allowed[0] = "tampered"
	if m.Allowed("closed")[0] != "open" {
		t.Fatal("changing a slice returned by Allowed changed the machine")
	}
	got := m.Definition()
	got.Transitions[0].Event = "tampered"
	got.Events[0] = "tampered"
	if m.Definition().Transitions[0].Event != "open" || m.Events()[0] != "open" {
		t.Fatal("changing a Definition returned by the machine changed the machine")
	}
	p := sm.ProvisionDefinition()
	p.Sticky[0].Within[0] = sm.Active
	q := sm.ProvisionDefinition()
	if q.Sticky[0].Within[0] != sm.Cleaning {
		t.Fatal("ProvisionDefinition returned shared storage")
	}
}

func TestDefinitionErrors(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*sm.Definition)
		field string
	}{
		{"no states", func(d *sm.Definition) { d.States = nil }, "states"},
		{"empty state name", func(d *sm.Definition) { d.States[1].Name = "" }, "states[1].name"},
		{"duplicate state", func(d *sm.Definition) { d.States[2].Name = "closed" }, "states[2].name"},
		{"stable state with target", func(d *sm.Definition) { d.States[0].Target = "open" }, "states[0].target"},
		{"target not stable", func(d *sm.Definition) { d.States[3].Target = "jammed" }, "states[3].target"},
		{"target unregistered", func(d *sm.Definition) { d.States[3].Target = "ajar" }, "states[3].target"},
		{"initial unregistered", func(d *sm.Definition) { d.Initial = "ajar" }, "initial"},
		{"initial empty", func(d *sm.Definition) { d.Initial = "" }, "initial"},
		{"empty event", func(d *sm.Definition) { d.Events[2] = "" }, "events[2]"},
		{"duplicate event", func(d *sm.Definition) { d.Events[3] = "open" }, "events[3]"},
		{"transition from unregistered", func(d *sm.Definition) { d.Transitions[1].From = "ajar" }, "transitions[1].from"},
		{"transition to unregistered", func(d *sm.Definition) { d.Transitions[2].To = "ajar" }, "transitions[2].to"},
		{"transition on unregistered event", func(d *sm.Definition) { d.Transitions[4].Event = "kick" }, "transitions[4].event"},
		{"duplicate transition", func(d *sm.Definition) {
			d.Transitions = append(d.Transitions, sm.Transition{From: "closed", Event: "open", To: "jammed"})
		}, "transitions[6]"},
		{"sticky target not stable", func(d *sm.Definition) {
			d.Sticky = []sm.StickyTarget{{Target: "opening", Within: []sm.State{"opening"}}}
		}, "sticky_targets[0].target"},
		{"sticky within unregistered", func(d *sm.Definition) {
			d.Sticky = []sm.StickyTarget{{Target: "open", Within: []sm.State{"opening", "ajar"}}}
		}, "sticky_targets[0].within[1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			def := doorDefinition()
			c.edit(&def)
			m, err := sm.New(def)
			if err == nil {
				t.Fatalf("New accepted the definition: %v", m)
			}
			var de *sm.DefinitionError
			if !errors.As(err, &de) || !errors.Is(err, sm.ErrInvalidDefinition) {
				t.Fatalf("error = %v, want *DefinitionError", err)
			}
			if de.Field != c.field {
				t.Errorf("field = %q, want %q (error: %v)", de.Field, c.field, err)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("error %q does not name the field", err)
			}
		})
	}
}

func TestDefinitionRoundTripsThroughJSON(t *testing.T) {
	m := sm.NewProvisionMachine()
	var buf strings.Builder
	if err := m.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var def sm.Definition
	if err := json.Unmarshal([]byte(buf.String()), &def); err != nil {
		t.Fatalf("decode exported JSON: %v", err)
	}
	again, err := sm.New(def)
	if err != nil {
		t.Fatalf("New(exported JSON): %v", err)
	}
	if !slices.Equal(again.Transitions(), m.Transitions()) || !slices.Equal(again.States(), m.States()) || !slices.Equal(again.Events(), m.Events()) {
		t.Fatal("the machine rebuilt from its JSON differs")
	}
	for _, s := range m.States() {
		for _, ev := range m.Events() {
			a1, t1, e1 := m.Apply(sm.Move{State: s.Name, Target: sm.Manageable, Event: ev})
			a2, t2, e2 := again.Apply(sm.Move{State: s.Name, Target: sm.Manageable, Event: ev})
			if a1 != a2 || t1 != t2 || (e1 == nil) != (e2 == nil) {
				t.Errorf("(%q, %q): original (%q, %q, %v), rebuilt (%q, %q, %v)", s.Name, ev, a1, t1, e1, a2, t2, e2)
			}
		}
	}
}

func TestTransitionError(t *testing.T) {
	m := sm.NewProvisionMachine()
	_, _, err := m.Process(sm.CleanFailed, sm.EventProvide)
	if !errors.Is(err, sm.ErrInvalidTransition) {
		t.Fatalf("error = %v, want ErrInvalidTransition", err)
	}
	if errors.Is(err, sm.ErrUnknownEvent) {
		t.Error("a registered event must not match ErrUnknownEvent")
	}
	var te *sm.TransitionError
	if !errors.As(err, &te) {
		t.Fatalf("error %T is not a *TransitionError", err)
	}
	if te.State != sm.CleanFailed || te.Event != sm.EventProvide || te.Machine != sm.ProvisionMachineName || te.UnknownEvent {
		t.Errorf("error fields = %+v", te)
	}
	if !slices.Equal(te.Allowed, []sm.Event{sm.EventManage}) {
		t.Errorf("allowed = %q, want [manage]", te.Allowed)
	}
	want := `statemachine: ironic-provision: event "provide" is not allowed in state "clean failed" (allowed: manage)`
	if err.Error() != want {
		t.Errorf("message = %q\nwant %q", err.Error(), want)
	}

	_, _, err = m.Process(sm.Active, "hold")
	if !errors.As(err, &te) || !slices.Equal(te.Allowed, []sm.Event{sm.EventDelete, sm.EventRebuild, sm.EventRescue, sm.EventService}) {
		t.Errorf("Process(active, hold) = %v, want allowed [delete rebuild rescue service]", err)
	}

	_, _, err = m.Process(sm.Active, "explode")
	if !errors.Is(err, sm.ErrUnknownEvent) || !errors.Is(err, sm.ErrInvalidTransition) {
		t.Errorf("unknown event error = %v, want ErrUnknownEvent and ErrInvalidTransition", err)
	}
	if !strings.Contains(err.Error(), `unknown event "explode" in state "active"`) {
		t.Errorf("unknown event message = %q", err)
	}

	_, _, err = m.Process("deleted", sm.EventClean)
	var ue *sm.UnknownStateError
	if !errors.As(err, &ue) || !errors.Is(err, sm.ErrUnknownState) || ue.State != "deleted" || ue.Field != "state" {
		t.Errorf("unknown state error = %#v", err)
	}
	if errors.Is(err, sm.ErrInvalidTransition) {
		t.Error("an unknown state must not match ErrInvalidTransition")
	}
	if !strings.Contains(err.Error(), `"deleted"`) {
		t.Errorf("unknown state message = %q", err)
	}
}

func TestAllowedMatchesNext(t *testing.T) {
	m := sm.NewProvisionMachine()
	total := 0
	for _, s := range m.States() {
		allowed := m.Allowed(s.Name)
		total += len(allowed)
		for _, ev := range m.Events() {
			_, ok := m.Next(s.Name, ev)
			if ok != slices.Contains(allowed, ev) || ok != m.Allows(s.Name, ev) {
				t.Errorf("state %q event %q: Next ok = %v, Allowed = %q, Allows = %v", s.Name, ev, ok, allowed, m.Allows(s.Name, ev))
			}
		}
	}
	if total != 93 {
		t.Errorf("sum of allowed events = %d, want 93", total)
	}
	if m.Allows("nowhere", sm.EventDone) || m.Allows(sm.Active, "nothing") {
		t.Error("Allows accepted an unregistered state or event")
	}
}

func TestCheck(t *testing.T) {
	m := sm.NewProvisionMachine()
	valid := [][2]sm.State{
		{sm.Enroll, sm.NoState},
		{sm.CleanWait, sm.Manageable},
		{sm.DeployWait, sm.Active},
		{sm.Error, sm.Available},
	}
	for _, p := range valid {
		if err := m.Check(p[0], p[1]); err != nil {
			t.Errorf("Check(%q, %q) = %v, want nil", p[0], p[1], err)
		}
	}
	invalid := []struct {
		state, target sm.State
		want          error
	}{
		{"deleted", sm.NoState, sm.ErrUnknownState},
		{sm.NoState, sm.NoState, sm.ErrUnknownState},
		{sm.Cleaning, sm.CleanWait, sm.ErrInvalidTarget},
		{sm.Cleaning, "deploy complete", sm.ErrInvalidTarget},
	}
	for _, c := range invalid {
		if err := m.Check(c.state, c.target); !errors.Is(err, c.want) {
			t.Errorf("Check(%q, %q) = %v, want %v", c.state, c.target, err, c.want)
		}
	}
	var te *sm.TargetError
	if err := m.Check(sm.Cleaning, sm.CleanWait); !errors.As(err, &te) || !strings.Contains(te.Reason, "not a stable state") {
		t.Errorf("non-stable target error = %v", err)
	}
	if err := m.Check(sm.Cleaning, "nowhere"); !errors.As(err, &te) || !strings.Contains(te.Reason, "not a registered state") {
		t.Errorf("unregistered target error = %v", err)
	}
}
