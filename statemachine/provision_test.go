package statemachine_test

import (
	"testing"

	"github.com/anvilmetal/anvil/statemachine"
)

func TestProvisionMachineSize(t *testing.T) {
	m := statemachine.NewProvisionMachine()
	if got := len(m.States()); got != 30 {
		t.Errorf("states = %d, want 30", got)
	}
	if got := len(m.Events()); got != 18 {
		t.Errorf("events = %d, want 18", got)
	}
	if got := len(m.Transitions()); got != 93 {
		t.Errorf("transitions = %d, want 93", got)
	}
}
