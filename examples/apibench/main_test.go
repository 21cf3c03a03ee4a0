package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAPIBenchSmall runs both halves of the benchmark on a small fleet:
// every phase reported for both runs, no failure, read figures measured
// on a detail page holding every node.
func TestAPIBenchSmall(t *testing.T) {
	cfg := config{nodes: 6, clients: 3, workers: 8, poll: 5 * time.Millisecond, getRequests: 30, detailRequests: 3, apiVersion: "1.78"}
	rep, err := run(context.Background(), cfg)
	if errors.Is(err, ErrNotServed) {
		t.Skipf("the REST half needs an endpoint ironicapi does not serve yet: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Run{rep.GoAPI, rep.REST} {
		if r.Failures != 0 || len(r.Phases) != 5 {
			t.Fatalf("%s: %d failures, %d phases: %+v", r.Via, r.Failures, len(r.Phases), r.Phases)
		}
		for _, p := range r.Phases {
			if p.WallSec <= 0 || p.NodesPerS <= 0 {
				t.Errorf("%s: phase %s: wall %v rate %v", r.Via, p.Name, p.WallSec, p.NodesPerS)
			}
		}
	}
	for _, p := range rep.REST.Phases[1:] {
		// A verb and at least one GET per node.
		if p.Requests < 2*cfg.nodes {
			t.Errorf("REST phase %s sent %d requests for %d nodes", p.Name, p.Requests, cfg.nodes)
		}
	}
	if rep.WallRatio <= 0 || rep.Reads.DetailPageNodes != cfg.nodes || rep.Reads.GetNodePerS <= 0 || rep.Reads.DetailPerS <= 0 {
		t.Fatalf("ratio %v, reads %+v", rep.WallRatio, rep.Reads)
	}
}
