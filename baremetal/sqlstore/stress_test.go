package sqlstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/baremetal/storetest"
)

// Environment of the stress child process (this test binary, re-executed).
const (
	envChildDialect = "ANVIL_STRESS_CHILD_DIALECT"
	envChildTarget  = "ANVIL_STRESS_CHILD_TARGET"
	envChildNodes   = "ANVIL_STRESS_CHILD_NODES"
)

const (
	stressWorkers     = 6
	stressNodes       = 3
	stressDuration    = 2 * time.Second
	stressMinSections = 40
	stressMaxDuration = 20 * time.Second
)

func openTarget(t testing.TB, dialect, target string) *sqlstore.Store {
	t.Helper()
	var s *sqlstore.Store
	var err error
	if dialect == "postgres" {
		s, err = sqlstore.OpenPostgres(context.Background(), target, sqlstore.Options{MaxOpenConns: stressWorkers + 2})
	} else {
		s, err = sqlstore.OpenSQLite(context.Background(), target, sqlstore.Options{})
	}
	if err != nil {
		t.Fatalf("opening %s store: %v", dialect, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestStressChild is the second process of the multi-process stress
// tests; it does nothing unless started by one of them.
func TestStressChild(t *testing.T) {
	dialect := os.Getenv(envChildDialect)
	if dialect == "" {
		t.Skip("stress child: only runs when re-executed by a stress test")
	}
	s := openTarget(t, dialect, os.Getenv(envChildTarget))
	res, err := storetest.Hammer(context.Background(), s, storetest.HammerConfig{
		Nodes: strings.Split(os.Getenv(envChildNodes), ","), Workers: stressWorkers, Holder: "child",
		Duration: stressDuration, MinSections: stressMinSections, MaxDuration: stressMaxDuration,
	})
	if err != nil {
		t.Fatalf("child hammer: %v", err)
	}
	fmt.Printf("STRESS-CHILD sections=%d overlaps=%d contended=%d\n", res.Sections, res.Overlaps, res.Contended)
}

// stress creates the nodes, runs the workload in this process and, when
// twoProcesses, at the same time in a re-executed child, then checks that
// no holders overlapped and no increment was lost.
func stress(t *testing.T, dialect, target string, twoProcesses bool) {
	s := openTarget(t, dialect, target)
	ctx := context.Background()
	var nodes []string
	for i := 0; i < stressNodes; i++ {
		n := &baremetal.Node{Name: fmt.Sprintf("stress-%d", i), Driver: "fake-hardware"}
		if err := s.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n.UUID)
	}
	var child *exec.Cmd
	var childOut bytes.Buffer
	if twoProcesses {
		child = exec.Command(os.Args[0], "-test.run=^TestStressChild$", "-test.count=1", "-test.v")
		child.Env = append(os.Environ(), envChildDialect+"="+dialect, envChildTarget+"="+target, envChildNodes+"="+strings.Join(nodes, ","))
		child.Stdout, child.Stderr = &childOut, &childOut
		if err := child.Start(); err != nil {
			t.Fatalf("starting the child process: %v", err)
		}
	}
	res, err := storetest.Hammer(ctx, s, storetest.HammerConfig{Nodes: nodes, Workers: stressWorkers, Holder: "parent",
		Duration: stressDuration, MinSections: stressMinSections, MaxDuration: stressMaxDuration})
	if err != nil {
		if child != nil {
			_ = child.Wait()
		}
		t.Fatalf("hammer: %v", err)
	}
	sections, overlaps := res.Sections, res.Overlaps
	if child != nil {
		if err := child.Wait(); err != nil {
			t.Fatalf("child process failed: %v\n%s", err, childOut.String())
		}
		var cs, co, cc int64
		idx := strings.Index(childOut.String(), "STRESS-CHILD ")
		if idx < 0 {
			t.Fatalf("child printed no result:\n%s", childOut.String())
		}
		if _, err := fmt.Sscanf(childOut.String()[idx:], "STRESS-CHILD sections=%d overlaps=%d contended=%d", &cs, &co, &cc); err != nil {
			t.Fatalf("parsing the child's result: %v\n%s", err, childOut.String())
		}
		if cs == 0 {
			t.Fatal("the child process completed no critical section")
		}
		t.Logf("child: %d sections, %d contended", cs, cc)
		sections += cs
		overlaps += co
	}
	total, err := storetest.HammerTotals(ctx, s, nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d critical sections (%d contended attempts in this process), counters sum to %d", dialect, sections, res.Contended, total)
	if overlaps != 0 {
		t.Fatalf("%d critical sections overlapped", overlaps)
	}
	if total != sections {
		t.Fatalf("counters sum to %d but %d increments were made: lost updates", total, sections)
	}
	if res.Sections < stressMinSections || res.Contended == 0 {
		t.Fatalf("too little contention to prove anything: %+v", res)
	}
}

func TestStressSQLite(t *testing.T) {
	stress(t, "sqlite", filepath.Join(t.TempDir(), "stress.db"), false)
}

func TestStressSQLiteTwoProcesses(t *testing.T) {
	stress(t, "sqlite", filepath.Join(t.TempDir(), "stress.db"), true)
}

func TestStressPostgres(t *testing.T) {
	stress(t, "postgres", sqlstoretest.PostgresDSN(t), false)
}

func TestStressPostgresTwoProcesses(t *testing.T) {
	stress(t, "postgres", sqlstoretest.PostgresDSN(t), true)
}

// brokenLocks is a store whose locks exclude nobody: reserving only reads
// the node, releasing does nothing and writes ignore the holder.
type brokenLocks struct{ baremetal.Store }

func (b brokenLocks) ReserveNode(ctx context.Context, id, _ string) (*baremetal.Node, error) {
	return b.GetNode(ctx, id)
}
func (b brokenLocks) ReleaseNode(context.Context, string, string) error { return nil }
func (b brokenLocks) UpdateNode(ctx context.Context, n *baremetal.Node, _ string) error {
	return b.Store.UpdateNode(ctx, n, "")
}

// TestStressDetectsBrokenLocks is the control experiment: the same
// workload on a store without mutual exclusion must notice.
func TestStressDetectsBrokenLocks(t *testing.T) {
	s := sqlstoretest.OpenSQLite(t, nil)
	n := &baremetal.Node{Driver: "fake-hardware"}
	if err := s.CreateNode(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	res, err := storetest.Hammer(context.Background(), brokenLocks{s}, storetest.HammerConfig{
		Nodes: []string{n.UUID}, Workers: 4, Holder: "p", Duration: 500 * time.Millisecond,
	})
	if err == nil && res.Overlaps == 0 {
		t.Fatalf("a store without locks passed the stress workload: %+v", res)
	}
	t.Logf("detected: overlaps=%d err=%v", res.Overlaps, err)
}
