package statemachine_test

import (
	"testing"

	sm "github.com/anvilmetal/anvil/statemachine"
)

// BenchmarkAllows measures one transition check (Ironic's
// is_actionable_event), cycling through every (state, event) pair so that
// accepted and refused pairs are both measured.
func BenchmarkAllows(b *testing.B) {
	m := sm.NewProvisionMachine()
	var pairs []sm.Transition
	for _, s := range m.States() {
		for _, ev := range m.Events() {
			pairs = append(pairs, sm.Transition{From: s.Name, Event: ev})
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := pairs[i]
		_ = m.Allows(p.From, p.Event) // b.Loop keeps the call alive
		i++
		if i == len(pairs) {
			i = 0
		}
	}
}

// BenchmarkProcess measures one processed event with the full target
// rules, cycling through the 93 transitions.
func BenchmarkProcess(b *testing.B) {
	m := sm.NewProvisionMachine()
	moves := make([]sm.Move, 0, 93)
	for _, tr := range m.Transitions() {
		moves = append(moves, sm.Move{State: tr.From, Target: m.DefaultTarget(tr.From), Event: tr.Event, WorkFollows: true})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, _, err := m.Apply(moves[i]); err != nil {
			b.Fatal(err)
		}
		i++
		if i == len(moves) {
			i = 0
		}
	}
}

// BenchmarkProcessRefused measures a refused event, which builds a
// *TransitionError (the only path that allocates).
func BenchmarkProcessRefused(b *testing.B) {
	m := sm.NewProvisionMachine()
	b.ReportAllocs()
	for b.Loop() {
		_, _, err := m.Process(sm.CleanFailed, sm.EventProvide)
		if err == nil {
			b.Fatal("expected a refusal")
		}
	}
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation changes allocation counts")
	}
	m := sm.NewProvisionMachine()
	move := sm.Move{State: sm.CleanWait, Target: sm.Manageable, Event: sm.EventResume, WorkFollows: true}
	if n := testing.AllocsPerRun(1000, func() { _, _, _ = m.Apply(move) }); n != 0 {
		t.Errorf("Apply allocates %v times per call, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { _ = m.Allows(sm.Active, sm.EventDelete) }); n != 0 {
		t.Errorf("Allows allocates %v times per call, want 0", n)
	}
}
