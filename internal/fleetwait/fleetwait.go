// Package fleetwait tells the goroutines that drive many nodes through a
// conductor (the fleet and scale benchmarks) the state each node settles
// in, from one Watch subscription for the whole fleet rather than one
// WaitFor per node and verb.
package fleetwait

import (
	"sync"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/statemachine"
)

// Waiter delivers the stable or failure state a node's next transition
// reaches to whoever called Expect for it.
type Waiter struct {
	mu     sync.Mutex
	chans  map[string]chan string
	cancel func()
}

// New subscribes to c's transitions until Close.
func New(c *conductor.Conductor) *Waiter {
	w := &Waiter{chans: map[string]chan string{}}
	w.cancel = c.Subscribe(conductor.WatchFilter{Types: []conductor.EventType{conductor.EventTransition}}, func(e conductor.Event) {
		if !statemachine.IsStable(e.To) && !statemachine.IsFailure(e.To) {
			return
		}
		w.mu.Lock()
		ch := w.chans[e.NodeUUID]
		w.mu.Unlock()
		if ch != nil {
			select {
			case ch <- string(e.To):
			default:
			}
		}
	})
	return w
}

// Expect returns the channel that receives the node's next stable or
// failure state. Call it before the verb, so that a fast transition is
// not missed, and Forget afterwards.
func (w *Waiter) Expect(uuid string) <-chan string {
	ch := make(chan string, 1)
	w.mu.Lock()
	w.chans[uuid] = ch
	w.mu.Unlock()
	return ch
}

// Forget stops delivering the node's states.
func (w *Waiter) Forget(uuid string) {
	w.mu.Lock()
	delete(w.chans, uuid)
	w.mu.Unlock()
}

// Close ends the subscription.
func (w *Waiter) Close() { w.cancel() }
