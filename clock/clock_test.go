package clock_test

import (
	"testing"
	"time"

	"github.com/anvilmetal/anvil/clock"
)

func TestSystemFollowsRealTime(t *testing.T) {
	c := clock.System()
	before := time.Now()
	if now := c.Now(); now.Before(before) || now.Sub(before) > time.Second {
		t.Fatalf("Now() = %v, real time %v", now, before)
	}
	select {
	case <-c.After(time.Millisecond):
	case <-time.After(5 * time.Second):
		t.Fatal("After(1ms) did not fire within 5s")
	}
}
