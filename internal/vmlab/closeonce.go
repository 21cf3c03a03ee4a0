package vmlab

import (
	"errors"
	"io"
	"sync"
)

// closeOnce is the guard of a Close that runs once (Network, Lab, the
// machines and a Redfish machine's QEMU embed it): mu also guards the
// owner's own fields, and the owner's other methods take mu with
// lockOpen, which refuses their work once Close has begun.
type closeOnce struct {
	mu     sync.Mutex
	closed bool
}

// begin marks the owner closed and reports whether this is the first
// Close; a later one returns nil at once. take, when not nil, runs under
// mu on the first call, to hand Close what it is to stop.
func (o *closeOnce) begin(take func()) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.closed = true
	if take != nil {
		take()
	}
	return true
}

// lockOpen locks mu unless Close has begun; then it returns an error
// with the text closedMsg and mu unlocked. On nil the caller unlocks mu.
func (o *closeOnce) lockOpen(closedMsg string) error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return errors.New(closedMsg)
	}
	return nil
}

// closeUnless closes c unless *started, deferred by a start (StartLab,
// StartBMCMachine, StartRedfishMachine) that sets *started last: one that
// failed or panicked part way leaves what it made to the owner's Close,
// which copes with a partial start.
func closeUnless(started *bool, c io.Closer) {
	if !*started {
		_ = c.Close()
	}
}
