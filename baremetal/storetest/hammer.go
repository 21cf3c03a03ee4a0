package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
)

// HammerConfig sets up the lock stress workload.
type HammerConfig struct {
	// Nodes are the UUIDs of the (few) nodes every worker fights over.
	Nodes []string
	// Workers is the number of goroutines; each is its own lock holder.
	Workers int
	// Holder prefixes the workers' holder names; give every process its
	// own prefix.
	Holder string
	// Duration is how long the workers run at least.
	Duration time.Duration
	// MinSections keeps the workers going after Duration until this many
	// critical sections are done (a slow machine or the race detector
	// must not turn the run into a non-test), but never past MaxDuration.
	MinSections int64
	// MaxDuration bounds the run; 0 means five times Duration.
	MaxDuration time.Duration
	// Hold is how long a worker stays inside the critical section, to
	// widen the window in which an overlap would show; 0 means 200 µs.
	Hold time.Duration
}

// HammerResult is what one Hammer call observed.
type HammerResult struct {
	// Sections is the number of critical sections completed; each added
	// exactly one to a node's counter.
	Sections int64
	// Overlaps counts sections that found another holder inside (in this
	// process or, through the marker in the node row, in another one).
	Overlaps int64
	// Contended counts reservation attempts that found the node locked.
	Contended int64
}

// Counter keys in the nodes' Extra field.
const (
	hammerCounter = "hammer_counter"
	hammerInside  = "hammer_inside"
)

// Hammer runs the stress workload: every worker repeatedly takes a random
// node's exclusive lock, marks itself inside in the node row, checks
// nobody else is inside, waits, increments the node's counter and clears
// the mark in a second compare-and-swap write (both fenced by the
// reservation), then releases. A write that loses its compare-and-swap
// while holding the lock, or any other store error, ends the run with an
// error. Check the totals with HammerTotals afterwards.
func Hammer(ctx context.Context, s baremetal.Store, cfg HammerConfig) (HammerResult, error) {
	if len(cfg.Nodes) == 0 || cfg.Workers < 1 {
		return HammerResult{}, errors.New("storetest: hammer needs nodes and at least one worker")
	}
	hold := cfg.Hold
	if hold <= 0 {
		hold = 200 * time.Microsecond
	}
	maxDur := cfg.MaxDuration
	if maxDur <= 0 {
		maxDur = 5 * cfg.Duration
	}
	ctx, cancel := context.WithTimeout(ctx, max(maxDur, cfg.Duration))
	defer cancel()
	inside := make(map[string]*atomic.Int32, len(cfg.Nodes))
	for _, u := range cfg.Nodes {
		inside[u] = new(atomic.Int32)
	}
	var sections, overlaps, contended atomic.Int64
	// The run ends once Duration has passed and MinSections are done.
	go func() {
		t := time.NewTimer(cfg.Duration)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for sections.Load() < cfg.MinSections {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		cancel()
	}()
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			holder := fmt.Sprintf("%s-w%d", cfg.Holder, w)
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil {
				id := cfg.Nodes[rng.IntN(len(cfg.Nodes))]
				// The reservation gets a context of its own: a statement
				// cancelled mid-way may still have taken the lock, and the
				// worker would not know to release it.
				rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
				n, err := s.ReserveNode(rctx, id, holder)
				rcancel()
				if errors.Is(err, baremetal.ErrNodeLocked) {
					contended.Add(1)
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
					continue
				}
				if err != nil {
					fail(fmt.Errorf("storetest: %s reserving %s: %w", holder, id, err))
					return
				}
				if err := section(s, n, holder, hold, inside[id], &overlaps); err != nil {
					fail(err)
					return
				}
				sections.Add(1)
				// Release with a context of its own: a lock must never be
				// left behind because the run's time is up.
				rctx, rcancel = context.WithTimeout(context.Background(), 10*time.Second)
				err = s.ReleaseNode(rctx, id, holder)
				rcancel()
				if err != nil {
					fail(fmt.Errorf("storetest: %s releasing %s: %w", holder, id, err))
					return
				}
			}
		}(w)
	}
	wg.Wait()
	return HammerResult{Sections: sections.Load(), Overlaps: overlaps.Load(), Contended: contended.Load()}, firstErr
}

// section is one critical section on a locked node.
func section(s baremetal.Store, n *baremetal.Node, holder string, hold time.Duration, inside *atomic.Int32, overlaps *atomic.Int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if inside.Add(1) != 1 {
		overlaps.Add(1)
	}
	defer inside.Add(-1)
	if n.Extra == nil {
		n.Extra = map[string]any{}
	}
	if other, _ := n.Extra[hammerInside].(string); other != "" {
		overlaps.Add(1)
	}
	n.Extra[hammerInside] = holder
	if err := s.UpdateNode(ctx, n, holder); err != nil {
		return fmt.Errorf("storetest: %s marking %s inside: %w", holder, n.UUID, err)
	}
	time.Sleep(hold)
	c, _ := n.Extra[hammerCounter].(float64)
	n.Extra[hammerCounter] = c + 1
	n.Extra[hammerInside] = ""
	if err := s.UpdateNode(ctx, n, holder); err != nil {
		return fmt.Errorf("storetest: %s incrementing %s: %w", holder, n.UUID, err)
	}
	return nil
}

// HammerTotals sums the counters Hammer left in the nodes and checks that
// no node is still marked inside or reserved. Compare the sum with the
// Sections of every Hammer run (in every process): a smaller sum is a lost
// update.
func HammerTotals(ctx context.Context, s baremetal.Store, nodes []string) (int64, error) {
	var total int64
	for _, id := range nodes {
		n, err := s.GetNode(ctx, id)
		if err != nil {
			return 0, err
		}
		if in, _ := n.Extra[hammerInside].(string); in != "" {
			return 0, fmt.Errorf("storetest: node %s still marked inside by %s", id, in)
		}
		if n.Reservation != "" {
			return 0, fmt.Errorf("storetest: node %s still reserved by %s", id, n.Reservation)
		}
		c, _ := n.Extra[hammerCounter].(float64)
		total += int64(c)
	}
	return total, nil
}
