package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
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
