package statemachine_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	sm "github.com/anvilmetal/anvil/statemachine"
)

// reachable returns the states reachable from start by any sequence of
// events.
func reachable(m *sm.Machine, start sm.State) map[sm.State]bool {
	seen := map[sm.State]bool{start: true}
	queue := []sm.State{start}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, ev := range m.Allowed(s) {
			next, _ := m.Next(s, ev)
			if !seen[next] {
				seen[next] = true
				queue = append(queue, next)
			}
		}
	}
	return seen
}

func TestEveryStateReachableFromEnroll(t *testing.T) {
	m := sm.NewProvisionMachine()
	seen := reachable(m, m.Initial())
	if m.Initial() != sm.Enroll {
		t.Fatalf("initial state = %q, want enroll", m.Initial())
	}
	for _, s := range m.States() {
		if !seen[s.Name] {
			t.Errorf("state %q is not reachable from enroll", s.Name)
		}
	}
	if len(seen) != 30 {
		t.Errorf("reached %d states, want 30", len(seen))
	}
}

func TestEveryNonStableStateReachesAStableState(t *testing.T) {
	m := sm.NewProvisionMachine()
	for _, s := range m.States() {
		if s.Stable {
			continue
		}
		found := false
		for r := range reachable(m, s.Name) {
			if m.IsStable(r) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no path leads from %q to a stable state", s.Name)
		}
		// The state's own default target must be reachable too: a node
		// is never aimed at a place it cannot get to.
		if s.Target != sm.NoState && !reachable(m, s.Name)[s.Target] {
			t.Errorf("state %q aims at %q, which it cannot reach", s.Name, s.Target)
		}
	}
}

func TestEveryStateHasAWayOut(t *testing.T) {
	m := sm.NewProvisionMachine()
	for _, s := range m.States() {
		if len(m.Allowed(s.Name)) == 0 {
			t.Errorf("state %q accepts no event", s.Name)
		}
	}
}

// walker drives a machine with arbitrary events and checks the invariants
// that must hold after every step, whatever the input.
type walker struct {
	t      testing.TB
	m      *sm.Machine
	state  sm.State
	target sm.State
}

func (w *walker) step(ev sm.Event, work bool, explicit sm.State) {
	w.t.Helper()
	before, beforeTarget := w.state, w.target
	allowedBefore := w.m.Allowed(before)
	state, target, err := w.m.Apply(sm.Move{State: before, Target: beforeTarget, Event: ev, WorkFollows: work, ExplicitTarget: explicit})
	if explicit != sm.NoState && !w.m.IsStable(explicit) {
		if !errors.Is(err, sm.ErrInvalidTarget) {
			w.t.Fatalf("Apply with explicit target %q = %v, want ErrInvalidTarget", explicit, err)
		}
		return
	}
	if err != nil {
		var te *sm.TransitionError
		if !errors.As(err, &te) {
			w.t.Fatalf("Apply(%q, %q) error %v is not a *TransitionError", before, ev, err)
		}
		if slices.Contains(allowedBefore, ev) {
			w.t.Fatalf("Apply(%q, %q) refused an allowed event", before, ev)
		}
		if te.State != before || te.Event != ev || !slices.Equal(te.Allowed, allowedBefore) {
			w.t.Fatalf("TransitionError %+v does not describe (%q, %q, %q)", te, before, ev, allowedBefore)
		}
		if te.UnknownEvent == w.m.HasEvent(ev) {
			w.t.Fatalf("TransitionError.UnknownEvent = %v for event %q", te.UnknownEvent, ev)
		}
		return
	}
	if !slices.Contains(allowedBefore, ev) {
		w.t.Fatalf("Apply(%q, %q) accepted an event Allowed does not list", before, ev)
	}
	if !w.m.Has(state) {
		w.t.Fatalf("Apply(%q, %q) produced unregistered state %q", before, ev, state)
	}
	if want, _ := w.m.Next(before, ev); want != state {
		w.t.Fatalf("Apply(%q, %q) = %q, Next says %q", before, ev, state, want)
	}
	if target != sm.NoState && !w.m.IsStable(target) {
		w.t.Fatalf("Apply(%q, %q) produced non-stable target %q", before, ev, target)
	}
	if !work && w.m.IsStable(state) && target != sm.NoState {
		w.t.Fatalf("Apply(%q, %q) reached stable %q without work but kept target %q", before, ev, state, target)
	}
	if !w.m.IsStable(state) && target == sm.NoState {
		w.t.Fatalf("Apply(%q, %q) reached non-stable %q with no target", before, ev, state)
	}
	if explicit != sm.NoState && (work || !w.m.IsStable(state)) && target != explicit {
		w.t.Fatalf("Apply(%q, %q) ignored explicit target %q (got %q)", before, ev, explicit, target)
	}
	w.state, w.target = state, target
}

func TestRandomEventSequences(t *testing.T) {
	m := sm.NewProvisionMachine()
	events := append(m.Events(), "", "bogus", "DEPLOY", "deleted")
	stable := sm.StableStates()
	rng := rand.New(rand.NewPCG(2026, 11))
	walks, length := 500, 200
	if testing.Short() {
		walks = 50
	}
	for range walks {
		w := &walker{t: t, m: m, state: m.Initial()}
		for range length {
			var explicit sm.State
			switch rng.IntN(20) {
			case 0:
				explicit = stable[rng.IntN(len(stable))]
			case 1:
				explicit = sm.CleanWait // not stable: must be refused
			}
			if rng.IntN(3) == 0 {
				// Bias towards accepted events so that walks go deep.
				allowed := m.Allowed(w.state)
				w.step(allowed[rng.IntN(len(allowed))], rng.IntN(2) == 0, explicit)
			} else {
				w.step(events[rng.IntN(len(events))], rng.IntN(2) == 0, explicit)
			}
		}
	}
}

// FuzzEventSequence feeds arbitrary byte strings to the machine as event
// sequences. Each byte picks an event (values past the registered events
// give unregistered names) and its high bit says whether work follows.
// The seeds are Ironic's main journeys, so plain `go test` runs them.
func FuzzEventSequence(f *testing.F) {
	m := sm.NewProvisionMachine()
	events := append(m.Events(), "", "bogus")
	encode := func(evs ...sm.Event) []byte {
		out := make([]byte, len(evs))
		for i, ev := range evs {
			out[i] = byte(slices.Index(events, ev))
		}
		return out
	}
	f.Add(encode(sm.EventManage, sm.EventDone, sm.EventProvide, sm.EventWait, sm.EventResume, sm.EventDone,
		sm.EventDeploy, sm.EventWait, sm.EventResume, sm.EventDone, sm.EventDelete, sm.EventClean, sm.EventDone))
	f.Add(encode(sm.EventManage, sm.EventDone, sm.EventClean, sm.EventWait, sm.EventHold, sm.EventUnhold,
		sm.EventAbort, sm.EventManage, sm.EventInspect, sm.EventWait, sm.EventAbort, sm.EventManage))
	f.Add(encode(sm.EventManage, sm.EventFail, sm.EventManage, sm.EventDone, sm.EventAdopt, sm.EventFail,
		sm.EventAdopt, sm.EventDone, sm.EventRescue, sm.EventWait, sm.EventFail, sm.EventUnrescue, sm.EventDone))
	f.Add(encode(sm.EventManage, sm.EventDone, sm.EventAdopt, sm.EventDone, sm.EventService, sm.EventHold,
		sm.EventFail, sm.EventWait, sm.EventAbort, sm.EventService, sm.EventFail, sm.EventAbort))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0x80, 0x13, 0x12, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		w := &walker{t: t, m: m, state: m.Initial()}
		for _, b := range data {
			ev := events[int(b&0x7f)%len(events)]
			w.step(ev, b&0x80 != 0, sm.NoState)
		}
	})
}
