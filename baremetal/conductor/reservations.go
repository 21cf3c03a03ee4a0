package conductor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
)

// reservations tracks the node reservations this conductor's goroutines
// hold or are taking, so that a reservation the database holds for this
// conductor while none of them does (a phantom) can be found and
// released without a restart. Phantoms come from database outages: a
// reservation whose statement committed while its answer was lost, or a
// release whose outcome is unknown.
type reservations struct {
	mu sync.Mutex
	// held counts, per node, the reservations this process holds or is
	// taking (a ReserveNode in flight counts).
	held map[string]int
	// sweeping has a channel, closed when done, for each node whose
	// possible phantom is being released; reservers of it wait.
	sweeping map[string]chan struct{}
	// suspects are nodes that may carry a phantom reservation.
	suspects map[string]bool
	// outage is set when a store call failed as unavailable: the next
	// sweep lists every node the database says this conductor holds.
	outage bool
}

func newReservations() *reservations {
	return &reservations{held: map[string]int{}, sweeping: map[string]chan struct{}{}, suspects: map[string]bool{}}
}

// begin counts a reservation being taken of uuid, after any sweep of it.
func (r *reservations) begin(ctx context.Context, uuid string) error {
	r.mu.Lock()
	for {
		ch, ok := r.sweeping[uuid]
		if !ok {
			break
		}
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		r.mu.Lock()
	}
	r.held[uuid]++
	r.mu.Unlock()
	return nil
}

// dec drops one count of uuid; r.mu is held.
func (r *reservations) dec(uuid string) {
	if r.held[uuid] <= 1 {
		delete(r.held, uuid)
		return
	}
	r.held[uuid]--
}

// end records the outcome of the reservation begin counted. A failed
// reservation whose outcome is unknown (the database went away, the
// context ended) or that found the node held by this very conductor with
// no goroutine holding it leaves the node a suspect; end reports the
// latter, a phantom for certain.
func (r *reservations) end(uuid, host string, err error) (phantom bool) {
	if err == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dec(uuid)
	var locked *baremetal.NodeLockedError
	switch {
	case baremetal.IsStoreUnavailable(err):
		r.suspects[uuid], r.outage = true, true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		r.suspects[uuid] = true
	case errors.As(err, &locked) && strings.EqualFold(locked.Holder, host) && r.held[uuid] == 0:
		r.suspects[uuid] = true
		return true
	}
	return false
}

// released drops a reservation of uuid that was released (or found
// gone).
func (r *reservations) released(uuid string) {
	r.mu.Lock()
	r.dec(uuid)
	r.mu.Unlock()
}

// unavailable notes a store call that failed as unavailable.
func (r *reservations) unavailable() {
	r.mu.Lock()
	r.outage = true
	r.mu.Unlock()
}

// claim marks uuid as being swept, when nothing of this process holds
// it; it returns the channel to close when the sweep of it ends.
func (r *reservations) claim(uuid string) (chan struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held[uuid] > 0 || r.sweeping[uuid] != nil {
		return nil, false
	}
	ch := make(chan struct{})
	r.sweeping[uuid] = ch
	return ch, true
}

func (r *reservations) unclaim(uuid string, ch chan struct{}, settled bool) {
	r.mu.Lock()
	delete(r.sweeping, uuid)
	if settled {
		delete(r.suspects, uuid)
	}
	r.mu.Unlock()
	close(ch)
}

// takeSweep returns the suspects and whether a full sweep is due,
// clearing the outage mark.
func (r *reservations) takeSweep() ([]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.suspects))
	for u := range r.suspects {
		out = append(out, u)
	}
	full := r.outage
	r.outage = false
	return out, full
}

// reserve takes node uuid's reservation (one attempt), tracking it. A
// node it finds reserved in this conductor's name with none of its
// goroutines holding it (a phantom an outage left) it releases at once
// and reserves again: the work retrying this reserve would otherwise
// keep the sweep from ever finding the node unheld, and the node would
// wait, refusing its verbs, until the retries happened to leave a gap.
func (c *Conductor) reserve(ctx context.Context, uuid string) (*baremetal.Node, error) {
	for again := true; ; again = false {
		if err := c.resv.begin(ctx, uuid); err != nil {
			return nil, err
		}
		n, err := c.store.ReserveNode(ctx, uuid, c.host)
		if phantom := c.resv.end(uuid, c.host, err); !phantom || !again {
			return n, err
		}
		c.sweepOne(ctx, uuid)
	}
}

// lockStore is the store as baremetal.AcquireNode sees it: reservations
// go through Conductor.reserve.
type lockStore struct {
	baremetal.ReservationStore
	c *Conductor
}

func (l lockStore) ReserveNode(ctx context.Context, uuid, _ string) (*baremetal.Node, error) {
	return l.c.reserve(ctx, uuid)
}

func (c *Conductor) locks() baremetal.ReservationStore {
	return lockStore{ReservationStore: c.store, c: c}
}

// sweepInterval paces the phantom sweep; a sweep with nothing suspect
// and no outage seen costs no store call.
const sweepInterval = time.Second

// sweepReservations releases phantom reservations until ctx ends: the
// suspects, and, after an outage, every node the database says this
// conductor holds that none of its goroutines holds. A phantom would
// otherwise refuse the node's verbs (409) and agent until a restart.
// Once the database answers again after an outage it also picks up the
// intents accepted meanwhile.
func (c *Conductor) sweepReservations(ctx context.Context) {
	defer c.loops.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(sweepInterval):
		}
		suspects, full := c.resv.takeSweep()
		back := false
		if full {
			nodes, err := c.listReservedBySelf(ctx)
			if err != nil {
				// Still away: look again next time.
				c.resv.unavailable()
			} else {
				back = true
			}
			suspects = append(suspects, nodes...)
		}
		for _, uuid := range suspects {
			if ctx.Err() != nil {
				return
			}
			c.sweepOne(ctx, uuid)
		}
		if back {
			// A verb whose intent committed while its answer was lost,
			// or whose job could not reserve its node, waits in the
			// database: pick such intents up now rather than at the
			// next intent poll.
			c.pollIntents(ctx)
		}
	}
}

// listReservedBySelf lists the nodes the database says this conductor
// holds.
func (c *Conductor) listReservedBySelf(ctx context.Context) ([]string, error) {
	var out []string
	page := baremetal.Page{Limit: 1000}
	for {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		nodes, err := c.store.ListNodes(lctx, baremetal.NodeFilter{ReservedBy: c.host}, page)
		cancel()
		if err != nil {
			return out, err
		}
		for _, n := range nodes {
			out = append(out, n.UUID)
		}
		if len(nodes) < page.Limit {
			return out, nil
		}
		page.Marker = nodes[len(nodes)-1].UUID
	}
}

// sweepOne releases uuid's reservation if this conductor's name is on it
// and none of its goroutines holds it.
func (c *Conductor) sweepOne(ctx context.Context, uuid string) {
	ch, ok := c.resv.claim(uuid)
	if !ok {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := c.store.ReleaseNode(rctx, uuid, c.host)
	cancel()
	settled := err == nil || errors.Is(err, baremetal.ErrNodeNotLocked) || errors.Is(err, baremetal.ErrNotFound) || errors.Is(err, baremetal.ErrNodeLocked)
	c.resv.unclaim(uuid, ch, settled)
	switch {
	case err == nil:
		c.log.Warn("released a reservation no operation of this conductor held (left by a database outage)", "node", uuid)
		c.metrics.phantomReleases.Inc()
		c.recheckIntent(uuid)
	case !settled:
		c.resv.unavailable()
	}
}
