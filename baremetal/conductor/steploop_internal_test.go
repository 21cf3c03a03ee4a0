package conductor

import (
	"testing"

	"github.com/anvilmetal/anvil/steps"
)

// TestWritesProgressFirst is the decision table of the progress write
// hoisted out of runActions' switch: every action records its progress
// before it acts but the two agent step refreshes, which record it (the
// restart) or leave it to the next action (the re-run) only once the
// refresh worked.
func TestWritesProgressFirst(t *testing.T) {
	for k, want := range map[steps.ActionKind]bool{
		steps.RunStep: true, steps.PowerOn: true, steps.PowerOff: true, steps.PowerReboot: true,
		steps.Hold: true, steps.Sleep: true, steps.Wait: true, steps.RebootToFinishStep: true,
		steps.RefreshAndRestart: false, steps.RefreshAndRerun: false,
		steps.Finish: true, steps.Fail: true, steps.Abort: true, steps.AbortAfterStep: true,
		steps.ActionKind(0): false,
	} {
		if got := writesProgressFirst(k); got != want {
			t.Errorf("writesProgressFirst(%v) = %v, want %v", k, got, want)
		}
	}
}
