package baremetal_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/storetest"
)

// lockedStore is a ReservationStore whose node is held by "other" until
// freeAfter attempts have been made.
type lockedStore struct {
	baremetal.ReservationStore // nil: only ReserveNode is called
	mu                         sync.Mutex
	attempts                   int
	freeAfter                  int // 0: never free
	err                        error
}

func (s *lockedStore) ReserveNode(_ context.Context, id, holder string) (*baremetal.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.err != nil {
		return nil, s.err
	}
	if s.freeAfter > 0 && s.attempts > s.freeAfter {
		return &baremetal.Node{UUID: id, Reservation: holder}, nil
	}
	return nil, &baremetal.NodeLockedError{Node: id, Holder: "other"}
}

func (s *lockedStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// drive advances clock by step each time AcquireNode waits, until done.
func drive[T any](t *testing.T, clock *storetest.ManualClock, step time.Duration, done <-chan T) T {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case v := <-done:
			return v
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("AcquireNode did not finish")
		}
		if clock.Waiters() > 0 {
			clock.Advance(step)
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
}

type result struct {
	n   *baremetal.Node
	err error
}

func TestAcquireNodePolicies(t *testing.T) {
	cases := []struct {
		name         string
		policy       baremetal.LockPolicy
		freeAfter    int
		wantAttempts int
		wantErr      error
		wantWaited   time.Duration
	}{
		{"default is 3 attempts 1 s apart", baremetal.LockPolicy{}, 0, 3, baremetal.ErrNodeLocked, 2 * time.Second},
		{"DefaultLockPolicy", baremetal.DefaultLockPolicy(), 0, 3, baremetal.ErrNodeLocked, 2 * time.Second},
		{"configured attempts and interval", baremetal.LockPolicy{Attempts: 5, Interval: 250 * time.Millisecond}, 0, 5, baremetal.ErrNodeLocked, time.Second},
		{"no retry", baremetal.NoRetry(), 0, 1, baremetal.ErrNodeLocked, 0},
		{"freed before the budget ends", baremetal.LockPolicy{Attempts: 3}, 2, 3, nil, 2 * time.Second},
		{"patient outlasts the attempts", baremetal.LockPolicy{Attempts: 2, Patient: true}, 10, 11, nil, 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := storetest.NewManualClock(storetest.Epoch())
			tc.policy.Clock = clock
			s := &lockedStore{freeAfter: tc.freeAfter}
			done := make(chan result, 1)
			go func() {
				n, err := baremetal.AcquireNode(context.Background(), s, "node-1", "me", tc.policy)
				done <- result{n, err}
			}()
			step := tc.policy.Interval
			if step == 0 {
				step = baremetal.DefaultLockInterval
			}
			r := drive(t, clock, step, done)
			if s.count() != tc.wantAttempts {
				t.Fatalf("attempts = %d, want %d", s.count(), tc.wantAttempts)
			}
			if waited := clock.Now().Sub(storetest.Epoch()); waited != tc.wantWaited {
				t.Fatalf("waited %v, want %v", waited, tc.wantWaited)
			}
			if tc.wantErr == nil {
				if r.err != nil || r.n.Reservation != "me" {
					t.Fatalf("AcquireNode = %v, %v", r.n, r.err)
				}
				return
			}
			var nl *baremetal.NodeLockedError
			if !errors.As(r.err, &nl) || nl.Holder != "other" || nl.Node != "node-1" {
				t.Fatalf("AcquireNode error = %v, want NodeLocked naming the holder", r.err)
			}
		})
	}
}

func TestAcquireNodeStopsOnOtherErrors(t *testing.T) {
	s := &lockedStore{err: &baremetal.NotFoundError{Kind: "node", Ident: "node-1"}}
	_, err := baremetal.AcquireNode(context.Background(), s, "node-1", "me", baremetal.LockPolicy{Patient: true})
	if !errors.Is(err, baremetal.ErrNotFound) || s.count() != 1 {
		t.Fatalf("AcquireNode = %v after %d attempts, want ErrNotFound after 1", err, s.count())
	}
}

func TestAcquireNodeHonoursContext(t *testing.T) {
	clock := storetest.NewManualClock(storetest.Epoch())
	s := &lockedStore{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := baremetal.AcquireNode(ctx, s, "node-1", "me", baremetal.LockPolicy{Patient: true, Clock: clock})
		done <- err
	}()
	for clock.Waiters() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || !errors.Is(err, baremetal.ErrNodeLocked) {
		t.Fatalf("cancelled AcquireNode = %v, want context.Canceled and ErrNodeLocked", err)
	}
}
