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

// TestFleetbenchThroughPlugin builds the fake plugin and runs the small
// fleet in process and through it, as -plugin does: both runs finish
// without failures and the comparison is reported.
func TestFleetbenchThroughPlugin(t *testing.T) {
	ctx := context.Background()
	bin, err := buildFakePlugin(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := comparePlugin(ctx, config{nodes: 4, clients: 2, workers: 8}, bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmp.InProcess) != 2 || len(cmp.Plugin) != 2 || cmp.TotalWallRatio <= 0 || cmp.TotalCPURatio <= 0 {
		t.Fatalf("comparison = %d in-process and %d plugin runs, ratios %v and %v", len(cmp.InProcess), len(cmp.Plugin), cmp.TotalWallRatio, cmp.TotalCPURatio)
	}
	for i, rep := range append(cmp.InProcess, cmp.Plugin...) {
		want := "fake"
		if i >= 2 {
			want = "fake+plugin"
		}
		if rep.Failures != 0 || len(rep.Phases) != 5 || rep.Mode != want {
			t.Fatalf("mode %s (want %s): %d failures, %d phases: %+v", rep.Mode, want, rep.Failures, len(rep.Phases), rep.Phases)
		}
	}
}

// TestFleetbenchPluginDelay checks that the fake delay reaches the plugin
// process (through driver_info), so the concurrency-limit test's
// workload means the same in both modes.
func TestFleetbenchPluginDelay(t *testing.T) {
	ctx := context.Background()
	bin, err := buildFakePlugin(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := run(ctx, config{nodes: 2, clients: 2, workers: 4, fakeDelay: 50 * time.Millisecond, pluginBin: bin})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failures != 0 {
		t.Fatalf("%d failures: %+v", rep.Failures, rep.Phases)
	}
	// Deploying runs several fake operations, each waiting 50 ms.
	for _, p := range rep.Phases {
		if p.Name == "deploy" && p.WallSec < 0.1 {
			t.Errorf("deploy took %v s: the plugin did not wait", p.WallSec)
		}
	}
}
