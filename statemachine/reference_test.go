package statemachine_test

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/anvilmetal/anvil/statemachine"
)

// reference is the part of testdata/ironic-transitions.json (the team's
// transcription of Ironic's state_machine.py and states.py) the tests
// compare against. The package's own table is written independently in
// provision.go; these tests check the two agree.
type reference struct {
	StableStates          []string           `json:"stable_states"`
	AllStates             []string           `json:"all_states"`
	StateTargets          map[string]*string `json:"state_targets"`
	UnstableStates        []string           `json:"unstable_states"`
	FailureStates         []string           `json:"failure_states"`
	StuckStates           []string           `json:"stuck_states_treated_as_fail"`
	UpdateAllowedStates   []string           `json:"update_allowed_states"`
	DeleteAllowedStates   []string           `json:"delete_allowed_states"`
	LookupAllowedStates   []string           `json:"lookup_allowed_states"`
	FastTrackLookupStates []string           `json:"fasttrack_lookup_allowed_states"`
	Events                []string           `json:"events"`
	Transitions           []struct {
		From  string `json:"from"`
		Event string `json:"event"`
		To    string `json:"to"`
	} `json:"transitions"`
	PowerStates          map[string]*string `json:"power_states"`
	APIMinMicroversion   map[string]*int    `json:"api_verb_min_microversion"`
	APITargetToEvent     map[string]string  `json:"api_target_to_event"`
	NonStateConstantKeys map[string]string  `json:"non_state_constants"`
}

func loadReference(t testing.TB) reference {
	t.Helper()
	raw, err := os.ReadFile("testdata/ironic-transitions.json")
	if err != nil {
		t.Fatalf("read reference: %v", err)
	}
	var ref reference
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatalf("decode reference: %v", err)
	}
	return ref
}

func states(names []string) []statemachine.State {
	out := make([]statemachine.State, len(names))
	for i, n := range names {
		out[i] = statemachine.State(n)
	}
	return out
}

func sortedStates(s []statemachine.State) []statemachine.State {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestProvisionMachineMatchesReference(t *testing.T) {
	ref := loadReference(t)
	m := statemachine.NewProvisionMachine()

	if len(ref.AllStates) != 30 || len(ref.Transitions) != 93 || len(ref.Events) != 18 {
		t.Fatalf("reference has %d states, %d events, %d transitions; want 30, 18, 93",
			len(ref.AllStates), len(ref.Events), len(ref.Transitions))
	}

	var gotStates []statemachine.State
	for _, s := range m.States() {
		gotStates = append(gotStates, s.Name)
		wantStable := slices.Contains(ref.StableStates, string(s.Name))
		if s.Stable != wantStable {
			t.Errorf("state %q: stable = %v, want %v", s.Name, s.Stable, wantStable)
		}
		want, ok := ref.StateTargets[string(s.Name)]
		if !ok {
			t.Errorf("state %q has no target entry in the reference", s.Name)
			continue
		}
		wantTarget := statemachine.NoState
		if want != nil {
			wantTarget = statemachine.State(*want)
		}
		if s.Target != wantTarget {
			t.Errorf("state %q: default target = %q, want %q", s.Name, s.Target, wantTarget)
		}
		if m.DefaultTarget(s.Name) != wantTarget {
			t.Errorf("DefaultTarget(%q) = %q, want %q", s.Name, m.DefaultTarget(s.Name), wantTarget)
		}
	}
	if !slices.Equal(gotStates, states(ref.AllStates)) {
		t.Errorf("states = %q\nwant %q", gotStates, ref.AllStates)
	}

	var gotEvents []string
	for _, ev := range m.Events() {
		gotEvents = append(gotEvents, string(ev))
	}
	if !slices.Equal(gotEvents, ref.Events) {
		t.Errorf("events = %q\nwant %q", gotEvents, ref.Events)
	}

	got := m.Transitions()
	if len(got) != len(ref.Transitions) {
		t.Fatalf("transitions = %d, want %d", len(got), len(ref.Transitions))
	}
	for i, want := range ref.Transitions {
		w := statemachine.Transition{From: statemachine.State(want.From), Event: statemachine.Event(want.Event), To: statemachine.State(want.To)}
		if got[i] != w {
			t.Errorf("transition #%d = %v, want %v", i+1, got[i], w)
		}
		if to, ok := m.Next(w.From, w.Event); !ok || to != w.To {
			t.Errorf("Next(%q, %q) = %q, %v; want %q", w.From, w.Event, to, ok, w.To)
		}
	}

	// Every pair the reference does not list is refused.
	listed := make(map[statemachine.Transition]bool)
	for _, tr := range got {
		listed[statemachine.Transition{From: tr.From, Event: tr.Event}] = true
	}
	refused := 0
	for _, s := range m.States() {
		for _, ev := range m.Events() {
			if listed[statemachine.Transition{From: s.Name, Event: ev}] {
				continue
			}
			refused++
			if m.Allows(s.Name, ev) {
				t.Errorf("Allows(%q, %q) = true for a pair the reference does not list", s.Name, ev)
			}
		}
	}
	if want := 30*18 - 93; refused != want {
		t.Errorf("refused pairs = %d, want %d", refused, want)
	}
}

func TestDerivedStateSetsMatchReference(t *testing.T) {
	ref := loadReference(t)
	// Every registered state plus the unregistered constants Ironic lists
	// somewhere, so that membership is checked on both sides.
	universe := statemachine.ProvisionDefinition().States
	candidates := []statemachine.State{statemachine.Service, "deleted", "deploy complete", "rebuild", statemachine.NoState, "bogus"}
	for _, s := range universe {
		candidates = append(candidates, s.Name)
	}
	sets := []struct {
		name string
		want []string
		list []statemachine.State
		is   func(statemachine.State) bool
	}{
		{"stable", ref.StableStates, statemachine.StableStates(), statemachine.IsStable},
		{"unstable", ref.UnstableStates, statemachine.UnstableStates(), statemachine.IsUnstable},
		{"failure", ref.FailureStates, statemachine.FailureStates(), statemachine.IsFailure},
		{"stuck treated as fail", ref.StuckStates, statemachine.StuckTreatedAsFailStates(), statemachine.IsStuckTreatedAsFail},
		{"update allowed", ref.UpdateAllowedStates, statemachine.UpdateAllowedStates(), statemachine.UpdateAllowed},
		{"delete allowed", ref.DeleteAllowedStates, statemachine.DeleteAllowedStates(),
			func(s statemachine.State) bool { return statemachine.DeleteAllowed(s, false) }},
		{"lookup allowed", ref.LookupAllowedStates, statemachine.LookupAllowedStates(), statemachine.LookupAllowed},
		{"fast-track lookup allowed", ref.FastTrackLookupStates, statemachine.FastTrackLookupAllowedStates(), statemachine.FastTrackLookupAllowed},
		// The JSON transcription has no key for SYNC_EXCLUDED_STATES; the
		// reference document (§1.1) lists these four.
		{"power sync excluded", []string{"wait call-back", "clean wait", "enroll", "adopt failed"},
			statemachine.PowerSyncExcludedStates(), statemachine.PowerSyncExcluded},
	}
	for _, set := range sets {
		t.Run(set.name, func(t *testing.T) {
			want := states(set.want)
			if !slices.Equal(sortedStates(set.list), sortedStates(want)) {
				t.Errorf("list = %q, want %q", set.list, want)
			}
			for _, s := range candidates {
				if got := set.is(s); got != slices.Contains(want, s) {
					t.Errorf("predicate(%q) = %v, want %v", s, got, !got)
				}
			}
		})
	}

	m := statemachine.NewProvisionMachine()
	for _, s := range universe {
		if m.IsStable(s.Name) != statemachine.IsStable(s.Name) {
			t.Errorf("machine and IsStable disagree on %q", s.Name)
		}
	}
}

func TestDeleteAllowedAvailableOption(t *testing.T) {
	if !statemachine.DeleteAllowed(statemachine.Available, true) {
		t.Error("available must be deletable when allow_deleting_available_nodes is true")
	}
	if statemachine.DeleteAllowed(statemachine.Available, false) {
		t.Error("available must not be deletable when allow_deleting_available_nodes is false")
	}
	if statemachine.DeleteAllowed(statemachine.Active, true) {
		t.Error("active must never be deletable")
	}
}

func TestNodeUpdatable(t *testing.T) {
	cases := []struct {
		state, target statemachine.State
		want          bool
	}{
		{statemachine.Active, statemachine.NoState, true},
		{statemachine.Deploying, statemachine.Active, false},
		{statemachine.CleanWait, statemachine.Available, false},
		{statemachine.DeployFailed, statemachine.Active, true},
		{statemachine.InspectWait, statemachine.Manageable, true},
		{statemachine.ServiceHold, statemachine.Active, true},
		{statemachine.Error, statemachine.Available, true},
	}
	for _, c := range cases {
		if got := statemachine.NodeUpdatable(c.state, c.target); got != c.want {
			t.Errorf("NodeUpdatable(%q, %q) = %v, want %v", c.state, c.target, got, c.want)
		}
	}
}

func TestInternalEvents(t *testing.T) {
	internal := []statemachine.Event{statemachine.EventDone, statemachine.EventFail, statemachine.EventWait, statemachine.EventResume, statemachine.EventHold}
	verbEvents := make(map[statemachine.Event]bool)
	for _, v := range statemachine.Verbs() {
		verbEvents[v.Event] = true
	}
	for _, ev := range statemachine.NewProvisionMachine().Events() {
		want := slices.Contains(internal, ev)
		if got := statemachine.IsInternalEvent(ev); got != want {
			t.Errorf("IsInternalEvent(%q) = %v, want %v", ev, got, want)
		}
		// An event is internal exactly when no API verb raises it.
		if verbEvents[ev] == want {
			t.Errorf("event %q: raised by a verb = %v, internal = %v", ev, verbEvents[ev], want)
		}
	}
}
