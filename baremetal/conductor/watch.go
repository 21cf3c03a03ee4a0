package conductor

import (
	"context"
	"sync"
	"time"
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
	From   string
	To     string
	Target string
	// Trigger is the state machine event of a transition ("deploy",
	// "done", "fail", ...).
	Trigger string
	// StepKind and Step name the step for step events ("clean",
	// "deploy.erase_devices").
	StepKind string
	Step     string
	// PowerState is the node's power state after a power event.
	PowerState string
	// Error is the failure, for transitions into failure states and
	// failed steps or power actions.
	Error string
	// Conductor is the hostname of the conductor that did it.
	Conductor string
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

// watchHub fans events out to subscribers. Each subscriber has its own
// unbounded queue drained by its own goroutine, so a slow subscriber never
// blocks the engine and never loses an event; the goroutine ends when the
// subscription is cancelled or the hub is closed. close (called by
// Conductor.Stop) ends every subscription and every Watch, so no goroutine
// outlives the conductor that started it.
type watchHub struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
	// done is closed by close; every Watch forwarder selects on it.
	done chan struct{}
	// watches counts the running Watch forwarders, so close can wait for
	// them to end.
	watches sync.WaitGroup
}

type subscriber struct {
	filter   WatchFilter
	fn       func(Event)
	mu       sync.Mutex
	queue    []Event
	wake     chan struct{}
	done     chan struct{}
	finished chan struct{}
	closed   bool
	once     sync.Once
}

func newWatchHub() *watchHub {
	return &watchHub{subs: make(map[*subscriber]struct{}), done: make(chan struct{})}
}

func (h *watchHub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if !s.filter.match(&e) {
			continue
		}
		s.mu.Lock()
		if !s.closed {
			s.queue = append(s.queue, e)
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
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

func (s *subscriber) run() {
	defer close(s.finished)
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, e := range batch {
			select {
			case <-s.done:
				return
			default:
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
		s.queue = nil
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
// to return). fn must not call cancel or Stop itself. Events are queued for
// a slow fn, never dropped while the conductor runs. cancel waits for a
// running fn to return; after Stop, Subscribe registers nothing.
func (c *Conductor) Subscribe(f WatchFilter, fn func(Event)) (cancel func()) {
	return c.hub.subscribe(f, fn)
}

// Watch returns a channel of the events matching f until ctx ends or the
// conductor stops, when the channel is closed (after Stop, Watch returns a
// closed channel). Events are buffered without bound while the reader is
// slow, so none is lost while the conductor runs; those not yet received
// when Stop returns are dropped.
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
	inner := make(chan Event, 64)
	stopped := make(chan struct{})
	cancel := h.subscribe(f, func(e Event) {
		select {
		case inner <- e:
		case <-stopped:
		}
	})
	go func() {
		defer h.watches.Done()
		defer close(out)
		defer func() {
			close(stopped)
			cancel()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.done:
				return
			case e := <-inner:
				select {
				case out <- e:
				case <-ctx.Done():
					return
				case <-h.done:
					return
				}
			}
		}
	}()
	return out
}
