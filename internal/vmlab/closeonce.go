package vmlab

import "sync"

// closeOnce is the guard of a Close that runs once (Network, Lab and the
// machines embed it): mu also guards the owner's own fields, and closed
// is what the owner's other methods check, under mu, to refuse work once
// Close has begun.
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
