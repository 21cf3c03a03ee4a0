package conductor

import (
	"sync"
	"time"
)

// laterSet runs short real-time retries (a job queued again after a
// node's lock ends) on timers it owns: stop cancels those not yet fired
// and waits for those running, so none outlives the conductor's Stop.
type laterSet struct {
	mu      sync.Mutex
	timers  map[*time.Timer]struct{}
	stopped bool
	running sync.WaitGroup
}

// after runs f once d has passed, unless stop comes first. It reports
// false, and never runs f, once stop was called.
func (l *laterSet) after(d time.Duration, f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return false
	}
	if l.timers == nil {
		l.timers = map[*time.Timer]struct{}{}
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		l.mu.Lock()
		if _, ok := l.timers[t]; !ok {
			// stop took it (and found it already firing).
			l.mu.Unlock()
			return
		}
		delete(l.timers, t)
		l.running.Add(1)
		l.mu.Unlock()
		defer l.running.Done()
		f()
	})
	l.timers[t] = struct{}{}
	return true
}

// stop cancels the pending timers and waits for the callbacks already
// running; later calls of after do nothing.
func (l *laterSet) stop() {
	l.mu.Lock()
	l.stopped = true
	for t := range l.timers {
		t.Stop()
		delete(l.timers, t)
	}
	l.mu.Unlock()
	l.running.Wait()
}

// pending is how many timers have not fired yet.
func (l *laterSet) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.timers)
}
