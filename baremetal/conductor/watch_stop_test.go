package conductor_test

import (
	"context"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"go.uber.org/goleak"
)

// TestStopClosesWatchesAndEndsTheirGoroutines proves that Stop ends every
// Watch (its channel is closed) and every Subscribe, and that no goroutine
// of either outlives the conductor; Watch and Subscribe after Stop end at
// once.
func TestStopClosesWatchesAndEndsTheirGoroutines(t *testing.T) {
	store := openStore(t, false)
	// Goroutines of the store (and of the test runner) were there before
	// the conductor and stay after it.
	ignore := []goleak.Option{goleak.IgnoreCurrent(), goleak.IgnoreTopFunction("database/sql.(*DB).connectionCleaner")}
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "watch-stop"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	// Watches that nobody reads, one that is read, and subscriptions: each
	// must end at Stop although its context never does.
	var watches []<-chan conductor.Event
	for i := 0; i < 5; i++ {
		watches = append(watches, c.Watch(ctx, conductor.WatchFilter{}))
	}
	got := make(chan conductor.Event, 16)
	for i := 0; i < 3; i++ {
		c.Subscribe(conductor.WatchFilter{}, func(e conductor.Event) { got <- e })
	}
	if _, err := c.Enroll(ctx, &baremetal.Node{Driver: builtin.FakeHardware, Name: "watched"}); err != nil {
		t.Fatal(err)
	}
	if e := <-watches[0]; e.Type != conductor.EventNodeEnrolled {
		t.Fatalf("first event %v, want %s", e.Type, conductor.EventNodeEnrolled)
	}
	<-got
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	for i, w := range watches {
		if !closedSoon(w) {
			t.Fatalf("Watch %d still open after Stop", i)
		}
	}
	if !closedSoon(c.Watch(ctx, conductor.WatchFilter{})) {
		t.Fatal("Watch after Stop returned an open channel")
	}
	c.Subscribe(conductor.WatchFilter{}, func(conductor.Event) {})()
	if err := goleak.Find(ignore...); err != nil {
		t.Fatalf("goroutines left after Stop: %v", err)
	}
}

// closedSoon drains w and reports whether it is closed within a second.
func closedSoon(w <-chan conductor.Event) bool {
	deadline := time.After(time.Second)
	for {
		select {
		case _, ok := <-w:
			if !ok {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// TestStopBeforeStartClosesWatches checks a conductor stopped before it
// ever started ends its Watches too, and refuses a later Start.
func TestStopBeforeStartClosesWatches(t *testing.T) {
	store := openStore(t, false)
	ignore := []goleak.Option{goleak.IgnoreCurrent(), goleak.IgnoreTopFunction("database/sql.(*DB).connectionCleaner")}
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "never-started"})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Watch(context.Background(), conductor.WatchFilter{})
	c.Subscribe(conductor.WatchFilter{}, func(conductor.Event) {})
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !closedSoon(w) {
		t.Fatal("Watch still open after Stop of a conductor never started")
	}
	if err := goleak.Find(ignore...); err != nil {
		t.Fatalf("goroutines left after Stop: %v", err)
	}
	if err := c.Launch(context.Background()); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
}
