package main

import (
	"context"
	"testing"
)

// TestFleetbenchSmall runs the workload on a small fleet in both modes and
// checks every phase is reported without failures.
func TestFleetbenchSmall(t *testing.T) {
	for _, agent := range []bool{false, true} {
		rep, err := run(context.Background(), config{nodes: 4, clients: 2, workers: 8, agent: agent})
		if err != nil {
			t.Fatalf("agent=%t: %v", agent, err)
		}
		if rep.Failures != 0 || len(rep.Phases) != 5 {
			t.Fatalf("agent=%t: %d failures, %d phases: %+v", agent, rep.Failures, len(rep.Phases), rep.Phases)
		}
		for _, p := range rep.Phases {
			if p.WallSec <= 0 || p.NodesPerS <= 0 {
				t.Errorf("agent=%t: phase %s has wall %v, rate %v", agent, p.Name, p.WallSec, p.NodesPerS)
			}
		}
		if rep.PeakRSSMiB <= 0 {
			t.Errorf("peak RSS not measured")
		}
	}
}
