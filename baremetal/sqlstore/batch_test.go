package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
)

// TestGroupCommitIsolatesFailures runs many concurrent writes, half of
// them doomed (stale versions, foreign reservations, and renames onto
// another node's name, which fail inside the statement after it matched
// the row), so that batches mix failures with successes: every failure
// must come back typed and write nothing, and every success must be
// stored.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "batch.db"), nil)
	ctx := context.Background()
	const workers, rounds = 8, 40
	nodes := make([]*baremetal.Node, workers)
	for i := range nodes {
		nodes[i] = &baremetal.Node{Name: fmt.Sprintf("b%d", i)}
	}
	if err := s.CreateNodes(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(n *baremetal.Node, holder, taken string) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				locked, err := s.ReserveNode(ctx, n.UUID, holder)
				if err != nil {
					t.Errorf("reserve: %v", err)
					return
				}
				stale := locked.Clone()
				stale.Version--
				stale.Extra = map[string]any{"stale": true}
				if err := s.UpdateNode(ctx, stale, holder); !errors.Is(err, baremetal.ErrConflict) {
					t.Errorf("stale write = %v, want ErrConflict", err)
					return
				}
				dup := locked.Clone()
				dup.Name, dup.Extra = taken, map[string]any{"dup": true}
				if err := s.UpdateNode(ctx, dup, holder); !errors.Is(err, baremetal.ErrDuplicate) {
					t.Errorf("rename onto %s = %v, want ErrDuplicate", taken, err)
					return
				}
				if err := s.UpdateNode(ctx, locked.Clone(), "someone-else"); !errors.Is(err, baremetal.ErrConflict) {
					t.Errorf("write under a foreign reservation = %v, want ErrConflict", err)
					return
				}
				locked.Extra = map[string]any{"round": float64(r)}
				if err := s.UpdateNode(ctx, locked, holder); err != nil {
					t.Errorf("good write: %v", err)
					return
				}
				if err := s.ReleaseNode(ctx, n.UUID, holder); err != nil {
					t.Errorf("release: %v", err)
					return
				}
				if err := s.ReleaseNode(ctx, n.UUID, holder); !errors.Is(err, baremetal.ErrNodeNotLocked) {
					t.Errorf("second release = %v, want ErrNodeNotLocked", err)
					return
				}
			}
		}(nodes[w], fmt.Sprintf("h%d", w), nodes[(w+1)%workers].Name)
	}
	wg.Wait()
	for _, n := range nodes {
		got, err := s.GetNode(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != rounds+1 || got.Extra["round"] != float64(rounds-1) || got.Extra["stale"] != nil || got.Extra["dup"] != nil ||
			got.Name != n.Name || got.Reservation != "" {
			t.Fatalf("node %s after the run: version %d extra %v reservation %q", got.Name, got.Version, got.Extra, got.Reservation)
		}
	}
}

// TestWritesAfterCancel checks a cancelled context stops a write before it
// runs and leaves the store usable.
func TestWritesAfterCancel(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "cancel.db"), nil)
	n := &baremetal.Node{Name: "c"}
	if err := s.CreateNode(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.ReserveNode(ctx, n.UUID, "h"); !errors.Is(err, context.Canceled) {
		t.Fatalf("reserve with a cancelled context = %v", err)
	}
	got, err := s.GetNode(context.Background(), n.UUID)
	if err != nil || got.Reservation != "" {
		t.Fatalf("cancelled reserve wrote: %v, %v", got, err)
	}
	if _, err := s.ReserveNode(context.Background(), n.UUID, "h"); err != nil {
		t.Fatalf("store unusable after a cancelled write: %v", err)
	}
}
