package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal/conductor"
)

// TestQuickstart runs the whole quickstart on a small fleet and checks it
// succeeds and reports every phase.
func TestQuickstart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	code, err := run(ctx, config{nodes: 3, out: &out})
	if err != nil || code != 0 {
		t.Fatalf("run = %d, %v\n%s", code, err, out.String())
	}
	for _, want := range []string{"enroll", "manage", "inspect", "provide", "deploy", "undeploy", "total", "All nodes went"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestQuickstartRejectsNoNodes(t *testing.T) {
	var out bytes.Buffer
	if code, err := run(context.Background(), config{nodes: 0, out: &out}); code == 0 || err == nil {
		t.Fatalf("run with 0 nodes = %d, %v; want a usage error", code, err)
	}
}

// TestQuickstartWaitsForConcurrencyLimits runs the quickstart with one
// node at a time allowed to deploy or clean: the verbs the limits refuse
// are retried until every node made it, and each limited phase says it
// waited.
func TestQuickstartWaitsForConcurrencyLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	code, err := run(ctx, config{nodes: 3, out: &out, maxConcurrentDeploy: 1, maxConcurrentClean: 1})
	if err != nil || code != 0 {
		t.Fatalf("run = %d, %v\n%s", code, err, out.String())
	}
	for _, phase := range []string{"provide", "deploy", "undeploy"} {
		found := false
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, phase+" ") && strings.Contains(line, "after a concurrency limit refusal") {
				found = true
			}
		}
		if !found {
			t.Errorf("phase %s does not report waiting for its limit:\n%s", phase, out.String())
		}
	}
	if !strings.Contains(out.String(), "All nodes went") {
		t.Errorf("output lacks the success line:\n%s", out.String())
	}
}

// TestIssueRetriesOnlyTheLimit: issue retries a verb refused by the
// concurrency limit and marks it and the nodes behind it waiting, and
// gives up at once on any other refusal.
func TestIssueRetriesOnlyTheLimit(t *testing.T) {
	tr := &tracker{state: map[string]string{}, pending: map[string]bool{}, waiting: map[string]bool{}, changed: make(chan struct{}, 1)}
	uuids := []string{"a", "b", "c"}
	tr.begin(uuids)
	calls := map[string]int{}
	sawWaiting := map[string]bool{}
	verb := func(_ context.Context, u string) error {
		calls[u]++
		tr.mu.Lock()
		for w := range tr.waiting {
			sawWaiting[w] = true
		}
		tr.mu.Unlock()
		switch {
		case u == "a" && calls[u] <= 2:
			return &conductor.ConcurrentActionLimitError{Node: u, Action: "provide", Option: "max_concurrent_clean", Limit: 1, Count: 1}
		case u == "b":
			return errors.New("refused for good")
		}
		return nil
	}
	res := issue(context.Background(), uuids, verb, tr)
	if res.waits != 2 || calls["a"] != 3 || calls["b"] != 1 || calls["c"] != 1 {
		t.Fatalf("waits %d, calls %v; want 2 waits, a called 3 times, b and c once", res.waits, calls)
	}
	if len(res.refused) != 1 || res.refused[0].uuid != "b" {
		t.Fatalf("refused = %v, want only b", res.refused)
	}
	if !sawWaiting["a"] || !sawWaiting["b"] || !sawWaiting["c"] {
		t.Errorf("nodes shown waiting = %v, want a and the nodes behind it", sawWaiting)
	}
	if len(tr.waiting) != 0 || tr.pending["b"] {
		t.Errorf("after issue: waiting %v, b pending %t; want none waiting and b abandoned", tr.waiting, tr.pending["b"])
	}
	if line := progressLine("provide", 0, 3, map[string]int{waitingLabel: 2}); !strings.Contains(line, "waiting (concurrency limit) 2") {
		t.Errorf("progress line %q does not show the waiting nodes", line)
	}
}
