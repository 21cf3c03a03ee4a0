// Package clock is the one time source Anvil's packages take by injection:
// the store (keepalives, reservation ages), lock retries, the conductor's
// timers and periodic tasks, the agent client and handler, and the test
// doubles. Tests pass a clock they move by hand (storetest.ManualClock), so
// timeouts and periodic work run in milliseconds and deterministically.
package clock

import "time"

// Clock is a source of the current time and of timers. Implementations
// must be safe for concurrent use.
type Clock interface {
	Now() time.Time
	// After behaves like time.After: the channel receives the time once d
	// has passed on this clock.
	After(d time.Duration) <-chan time.Time
}

// System returns the Clock of the real time (time.Now, time.After).
func System() Clock { return system{} }

type system struct{}

func (system) Now() time.Time                         { return time.Now() }
func (system) After(d time.Duration) <-chan time.Time { return time.After(d) }
