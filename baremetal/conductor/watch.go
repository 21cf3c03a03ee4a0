package conductor

import (
	"context"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/statemachine"
)

// EventType classifies an engine event.
type EventType string

// The kinds of events the conductor publishes.
const (
	// EventTransition is a provision state change.
	EventTransition EventType = "transition"
	// EventStepStart is the start of a clean, deploy, service or verify
	// step.
	EventStepStart EventType = "step_start"
	// EventStepEnd is the end of a step (Error is set when it failed).
	EventStepEnd EventType = "step_end"
	// EventPower is a power state change or a failed power action.
	EventPower EventType = "power"
	// EventMaintenance is maintenance being set or cleared.
	EventMaintenance EventType = "maintenance"
	// EventNodeDeleted is a node removed from the store.
	EventNodeDeleted EventType = "node_deleted"
	// EventNodeEnrolled is a node created by Enroll.
	EventNodeEnrolled EventType = "node_enrolled"
	// EventBootStage is a network boot stage the node reached (BootStage,
	// Detail): from the boot server (ObserveBootStage) or the conductor
	// (boot prepared, agent lookup, first heartbeat).
	EventBootStage EventType = "boot_stage"
)

// Event is one thing the conductor did to a node, as published to watchers
// and written to node history. It never carries secrets.
type Event struct {
	// Time is when it happened, from the conductor's clock.
	Time time.Time
	// Type says what happened.
	Type EventType
	// NodeUUID and NodeName identify the node.
	NodeUUID string
	NodeName string
	// From, To and Target are the provision states before and after a
	// transition and the new target; To is the node's current state for
	// the other event types.
	From   statemachine.State
	To     statemachine.State
	Target statemachine.State
	// Trigger is the state machine event of a transition ("deploy",
	// "done", "fail", ...).
	Trigger statemachine.Event
	// StepKind and Step name the step for step events ("clean",
	// "deploy.erase_devices").
	StepKind string
	Step     string
	// PowerState is the node's power state after a power event.
	PowerState statemachine.PowerState
	// BootStage is the stage of an EventBootStage, and Detail says what
	// happened ("DHCP offered 192.0.2.23, boot file undionly.kpxe"), as
	// the node's history entry of the stage does; both are empty in
	// events of other types.
	BootStage stage.Stage
	Detail    string
	// Error is the failure, for transitions into failure states and
	// failed steps or power actions.
	Error string
	// Conductor is the hostname of the conductor that did it.
	Conductor string
	// Dropped is how many events matching this watcher's filter were
	// dropped, because its buffer was full, between the event it received
	// before this one and this one; zero for a reader that keeps up. It
	// is set only on events delivered by Watch and Subscribe.
	Dropped int
}

// WatchFilter selects the events a watcher receives. The zero value
// selects everything.
type WatchFilter struct {
	// Nodes restricts events to these node UUIDs when not empty.
	Nodes []string
	// Types restricts events to these types when not empty.
	Types []EventType
}

func (f WatchFilter) match(e *Event) bool {
	if len(f.Nodes) > 0 {
		found := false
		for _, n := range f.Nodes {
			if n == e.NodeUUID {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if len(f.Types) > 0 {
		for _, t := range f.Types {
			if t == e.Type {
				return true
			}
		}
		return false
	}
	return true
}

// DefaultWatchBuffer is the default of Options.WatchBuffer: how many
// events each Watch or Subscribe holds for a slow consumer before it
// drops the oldest.
const DefaultWatchBuffer = 1024

// watchHub fans events out to subscribers. Each subscriber has its own
// queue, bounded to size events, drained by its own goroutine, so a slow
// subscriber never blocks the engine and never grows memory without
// limit: when its queue is full the oldest event is dropped, counted in
// the next event it receives (Event.Dropped) and in onDrop (the
// conductor's watch_events_dropped_total). The goroutine ends when the
// subscription is cancelled or the hub is closed. close (called by
// Conductor.Stop) ends every subscription and every Watch, so no goroutine
// outlives the conductor that started it.
type watchHub struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
	// size bounds each subscriber's queue.
	size int
	// onDrop is called with the number of events dropped, under no lock
	// of the hub's.
	onDrop func(n int)
	// done is closed by close; every Watch forwarder selects on it.
	done chan struct{}
	// watches counts the running Watch forwarders, so close can wait for
	// them to end.
	watches sync.WaitGroup
}

type subscriber struct {
	filter WatchFilter
	fn     func(Event)
	mu     sync.Mutex
	queue  eventRing
	// dropped counts the events dropped since the last one handed to fn.
	dropped  int
	wake     chan struct{}
	done     chan struct{}
	finished chan struct{}
	closed   bool
	once     sync.Once
}

// newWatchHub returns a hub whose subscribers hold at most size events
// each (DefaultWatchBuffer when size <= 0); onDrop may be nil.
func newWatchHub(size int, onDrop func(n int)) *watchHub {
	if size <= 0 {
		size = DefaultWatchBuffer
	}
	if onDrop == nil {
		onDrop = func(int) {}
	}
	return &watchHub{subs: make(map[*subscriber]struct{}), size: size, onDrop: onDrop, done: make(chan struct{})}
}

func (h *watchHub) publish(e Event) {
	dropped := 0
	h.mu.Lock()
	for s := range h.subs {
		if !s.filter.match(&e) {
			continue
		}
		s.mu.Lock()
		if !s.closed {
			// A full queue drops its oldest: a watcher that falls behind
			// cares more about where nodes are now than where they were.
			if s.queue.push(e, h.size) {
				s.dropped++
				dropped++
			}
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	h.mu.Unlock()
	if dropped > 0 {
		h.onDrop(dropped)
	}
}

// subscribe registers fn; after close it registers nothing and returns a
// cancel that does nothing.
func (h *watchHub) subscribe(f WatchFilter, fn func(Event)) (cancel func()) {
	s := &subscriber{filter: f, fn: fn, wake: make(chan struct{}, 1), done: make(chan struct{}), finished: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return func() {}
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	go s.run()
	return func() { s.stop(h) }
}

// eventRing is a FIFO of events that grows by doubling up to a limit and
// then overwrites its oldest, so a subscriber that keeps up holds a few
// events and one that does not holds at most the limit.
type eventRing struct {
	buf     []Event
	head, n int
}

// push appends e, dropping the oldest event when limit events are already
// held; it reports whether it dropped one.
func (r *eventRing) push(e Event, limit int) (dropped bool) {
	if r.n == len(r.buf) {
		if len(r.buf) >= limit {
			r.buf[r.head] = e
			r.head = (r.head + 1) % len(r.buf)
			return true
		}
		grown := make([]Event, min(max(2*len(r.buf), 8), limit))
		for i := range r.n {
			grown[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = grown, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = e
	r.n++
	return false
}

// pop removes and returns the oldest event, or reports that there is none.
func (r *eventRing) pop() (Event, bool) {
	if r.n == 0 {
		return Event{}, false
	}
	e := r.buf[r.head]
	r.buf[r.head] = Event{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return e, true
}

// next takes the oldest queued event, with the count of events dropped
// before it, or reports that the queue is empty.
func (s *subscriber) next() (Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.queue.pop()
	if !ok {
		return Event{}, false
	}
	e.Dropped = s.dropped
	s.dropped = 0
	return e, true
}

func (s *subscriber) run() {
	defer close(s.finished)
	for {
		for {
			select {
			case <-s.done:
				return
			default:
			}
			e, ok := s.next()
			if !ok {
				break
			}
			s.fn(e)
		}
		select {
		case <-s.wake:
		case <-s.done:
			return
		}
	}
}

// stop ends the subscription (once) and waits for its goroutine, and so
// for a running fn, to return.
func (s *subscriber) stop(h *watchHub) {
	s.once.Do(func() {
		h.mu.Lock()
		delete(h.subs, s)
		h.mu.Unlock()
		s.mu.Lock()
		s.closed = true
		s.queue = eventRing{}
		s.mu.Unlock()
		close(s.done)
	})
	<-s.finished
}

// close ends every subscription and every Watch (their channels are
// closed; events not yet received are dropped) and waits until their
// goroutines have returned. Later subscriptions and Watches end at once.
func (h *watchHub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.done)
	subs := make([]*subscriber, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	h.mu.Unlock()
	for _, s := range subs {
		s.stop(h)
	}
	h.watches.Wait()
}

// Subscribe calls fn with every event that matches f, in order, on a
// goroutine owned by the subscription, until cancel is called or the
// conductor stops (Stop ends every subscription and waits for a running fn
// to return). fn must not call cancel or Stop itself. At most
// Options.WatchBuffer events wait for a slow fn; beyond that the oldest
// are dropped, and the next event fn receives says how many in its
// Dropped field. cancel waits for a running fn to return; after Stop,
// Subscribe registers nothing.
func (c *Conductor) Subscribe(f WatchFilter, fn func(Event)) (cancel func()) {
	return c.hub.subscribe(f, fn)
}

// Watch returns a channel of the events matching f until ctx ends or the
// conductor stops, when the channel is closed (after Stop, Watch returns a
// closed channel). It is Subscribe for a select loop: at most
// Options.WatchBuffer events wait for a slow reader, the oldest beyond
// that are dropped and counted in the Dropped field of the next event
// received, and those not yet received when Stop returns are dropped.
func (c *Conductor) Watch(ctx context.Context, f WatchFilter) <-chan Event {
	h := c.hub
	out := make(chan Event)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		close(out)
		return out
	}
	h.watches.Add(1)
	h.mu.Unlock()
	stopped := make(chan struct{})
	// The subscription's goroutine hands each event straight to the
	// reader, so the subscriber's bounded queue is the only buffer.
	cancel := h.subscribe(f, func(e Event) {
		select {
		case out <- e:
		case <-ctx.Done():
		case <-h.done:
		case <-stopped:
		}
	})
	go func() {
		defer h.watches.Done()
		select {
		case <-ctx.Done():
		case <-h.done:
		}
		close(stopped)
		cancel()
		close(out)
	}()
	return out
}
