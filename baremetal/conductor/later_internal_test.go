package conductor

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestLaterSetStop: a retry scheduled on the set runs once its pause
// passed; stop cancels those still pending, waits for one that is
// running, and refuses new ones.
func TestLaterSetStop(t *testing.T) {
	var l laterSet
	fired := make(chan struct{})
	if !l.after(time.Millisecond, func() { close(fired) }) {
		t.Fatal("after refused before stop")
	}
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the retry never ran")
	}

	var late atomic.Bool
	l.after(time.Hour, func() { late.Store(true) })
	entered, finished := make(chan struct{}), atomic.Bool{}
	l.after(time.Millisecond, func() {
		close(entered)
		time.Sleep(50 * time.Millisecond)
		finished.Store(true)
	})
	<-entered
	l.stop()
	if !finished.Load() {
		t.Fatal("stop returned while a retry was running")
	}
	if n := l.pending(); n != 0 {
		t.Fatalf("%d retries pending after stop", n)
	}
	if l.after(time.Millisecond, func() { late.Store(true) }) {
		t.Fatal("after accepted a retry after stop")
	}
	time.Sleep(20 * time.Millisecond)
	if late.Load() {
		t.Fatal("a retry ran after stop")
	}
}
