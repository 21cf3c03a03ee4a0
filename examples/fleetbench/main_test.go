package main

import (
	"context"
	"testing"
	"time"
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

// TestFleetbenchRetriesConcurrencyLimits runs more clients than the
// concurrency limits allow: the refused verbs are retried, counted, and no
// node fails.
func TestFleetbenchRetriesConcurrencyLimits(t *testing.T) {
	rep, err := run(context.Background(), config{nodes: 24, clients: 8, workers: 8, maxConcurrentDeploy: 1, maxConcurrentClean: 1, fakeDelay: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failures != 0 {
		t.Fatalf("%d failures: %+v", rep.Failures, rep.Phases)
	}
	retries := 0
	for _, p := range rep.Phases {
		switch p.Name {
		case "enroll", "manage":
			if p.LimitRetries != 0 {
				t.Errorf("phase %s retried %d verbs, but it has no limit", p.Name, p.LimitRetries)
			}
		default:
			retries += p.LimitRetries
		}
	}
	if retries == 0 {
		t.Errorf("8 clients with limits of 1 never met a limit: %+v", rep.Phases)
	}
}
