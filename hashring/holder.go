package hashring

import "sync/atomic"

// Holder publishes the current ring (or set of group rings) to concurrent
// readers. Readers call Load on every lookup and never block; a rebuild
// builds a new immutable value off to the side and Stores it, after which
// new Loads see it while lookups already holding the old value finish
// against the old one. The zero Holder is ready to use and Loads nil,
// which both ring types treat as empty.
type Holder[T Ring | GroupRings] struct {
	p atomic.Pointer[T]
}

// NewHolder returns a Holder publishing v.
func NewHolder[T Ring | GroupRings](v *T) *Holder[T] {
	h := &Holder[T]{}
	h.p.Store(v)
	return h
}

// Load returns the current value. It allocates nothing and never blocks.
func (h *Holder[T]) Load() *T { return h.p.Load() }

// Store publishes v.
func (h *Holder[T]) Store(v *T) { h.p.Store(v) }

// Swap publishes v and returns the value it replaced, so the caller can
// compute Moves between them.
func (h *Holder[T]) Swap(v *T) (old *T) { return h.p.Swap(v) }
