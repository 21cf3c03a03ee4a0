package ironicapi_test

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/statemachine"
)

// This file holds what the portgroup, allocation, deploy template and
// runbook tests share.

// availableNode enrolls a fake-hardware node, applies change and brings
// it to available through the conductor.
func (l *lab) availableNode(t *testing.T, name string, change func(*baremetal.Node)) *baremetal.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := l.c.Enroll(ctx, &baremetal.Node{Name: name, Driver: "fake-hardware"})
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		if _, err := l.c.Update(ctx, n.UUID, func(n *baremetal.Node) error { change(n); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.c.Manage(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.WaitFor(ctx, n.UUID, statemachine.Manageable); err != nil {
		t.Fatal(err)
	}
	if err := l.c.Provide(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	n, err = l.c.WaitFor(ctx, n.UUID, statemachine.Available)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// deployed brings an available node to active.
func (l *lab) deployed(t *testing.T, uuid string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.c.Deploy(ctx, uuid, conductor.DeployOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.WaitFor(ctx, uuid, statemachine.Active); err != nil {
		t.Fatal(err)
	}
}

// bodyMap decodes a response body into a map.
func bodyMap(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("response %q: %v", body, err)
	}
	return m
}

// wantRaw checks a raw response's status, and that an error body
// names want.
func wantRaw(t *testing.T, what string, status, want int, body, text string) {
	t.Helper()
	if status != want {
		t.Fatalf("%s = %d %s, want %d", what, status, body, want)
	}
	if text != "" && !strings.Contains(faultString(t, body), text) {
		t.Fatalf("%s: error %q does not contain %q", what, faultString(t, body), text)
	}
}

// keys returns the sorted keys of m, joined.
func keys(m map[string]any) string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
