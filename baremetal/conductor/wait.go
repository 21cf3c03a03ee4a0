package conductor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/statemachine"
)

// ErrNodeFailed is matched by the *WaitError of a WaitFor that saw the node
// land in a failure state it was not waiting for.
var ErrNodeFailed = errors.New("conductor: node reached a failure state")

// waitRecheck is how often WaitFor reads the node again between events: a
// transition made by another conductor sharing the store publishes no
// event here.
const waitRecheck = time.Second

// WaitError says why WaitFor returned without the node reaching one of the
// states it waited for. It matches ErrNodeFailed when the node landed in a
// failure state, and unwraps to the context's error when ctx ended first.
type WaitError struct {
	// Node is the UUID of the node waited for.
	Node string
	// Want are the states waited for.
	Want []statemachine.State
	// State is the node's provision state when WaitFor returned.
	State statemachine.State
	// LastError is the node's last error, which says why it failed.
	LastError string
	// Err is ctx.Err() when the context ended; nil when the node failed.
	Err error
}

func (e *WaitError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("waiting for node %s to reach %q: still in %q: %v", e.Node, e.Want, e.State, e.Err)
	}
	return fmt.Sprintf("waiting for node %s to reach %q: it failed in %q: %s", e.Node, e.Want, e.State, e.LastError)
}

// Is reports whether target is ErrNodeFailed and the node failed.
func (e *WaitError) Is(target error) bool { return target == ErrNodeFailed && e.Err == nil }

// Unwrap returns the context's error, if that is why WaitFor returned.
func (e *WaitError) Unwrap() error { return e.Err }

// failed reports whether a node in s will not move on by itself: one of
// Ironic's failure states, or error.
func failed(s statemachine.State) bool {
	return statemachine.IsFailure(s) || s == statemachine.Error
}

// WaitFor blocks until node ident (UUID or name) is in one of states and
// returns it. It returns a *WaitError matching ErrNodeFailed when the node
// lands in a failure state (deploy failed, clean failed, ..., error) that
// is not among states, and one wrapping ctx.Err() when ctx ends first; an
// unknown node gives the store's *baremetal.NotFoundError. Verbs return
// once their intent is stored, so WaitFor is how a caller waits for the
// result:
//
//	if err := cond.Deploy(ctx, "n1", conductor.DeployOptions{}); err != nil { ... }
//	n, err := cond.WaitFor(ctx, "n1", statemachine.Active)
//
// It follows the conductor's transition events and rereads the node every
// second as well, so a transition made by another conductor sharing the
// store is seen too. It is safe to call from any goroutine, also before
// Launch or Run (it then waits for transitions made by others).
func (c *Conductor) WaitFor(ctx context.Context, ident string, states ...statemachine.State) (*baremetal.Node, error) {
	if len(states) == 0 {
		return nil, &baremetal.InvalidFieldError{Kind: "node", Ident: ident, Field: "states", Expected: "at least one provision state to wait for"}
	}
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return nil, err
	}
	// Subscribe before the next read, so that a transition between the
	// read and the subscription is not missed.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the Watch and its goroutine
	events := c.Watch(wctx, WatchFilter{Nodes: []string{n.UUID}, Types: []EventType{EventTransition, EventNodeDeleted}})
	for {
		n, err = c.store.GetNode(wctx, n.UUID)
		if err != nil {
			if ctx.Err() != nil {
				return nil, &WaitError{Node: ident, Want: states, Err: ctx.Err()}
			}
			return nil, err
		}
		s := n.ProvisionState
		if slices.Contains(states, s) {
			return n, nil
		}
		if failed(s) {
			return n, &WaitError{Node: n.UUID, Want: states, State: n.ProvisionState, LastError: n.LastError}
		}
		select {
		case <-ctx.Done():
			return n, &WaitError{Node: n.UUID, Want: states, State: n.ProvisionState, Err: ctx.Err()}
		case _, ok := <-events:
			if !ok {
				// The conductor stopped: rereading on the timer is all
				// that is left.
				events = nil
			}
		case <-c.clock.After(waitRecheck):
		}
	}
}
