package conductor_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/prometheus/client_golang/prometheus"
)

// newWatchConductor returns a conductor (not started) whose metrics are
// registered in the returned registry; it is stopped when the test ends.
func newWatchConductor(t *testing.T, o conductor.Options) (*conductor.Conductor, *prometheus.Registry) {
	t.Helper()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	c, err := conductor.New(openStore(t, false), reg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	pr := prometheus.NewPedanticRegistry()
	if err := pr.Register(c.Metrics()); err != nil {
		t.Fatal(err)
	}
	return c, pr
}

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestWatchBufferIsBoundedForAReaderThatNeverReads publishes 100k events
// to a Watch nobody reads: the heap stays within a few MiB (the default
// 1024-event buffer, not 100k events), and once the reader wakes it gets
// the one event in hand plus the newest 1024, with the 98,975 dropped
// ones counted in Event.Dropped and in
// anvil_conductor_watch_events_dropped_total.
func TestWatchBufferIsBoundedForAReaderThatNeverReads(t *testing.T) {
	const published = 100_000
	c, pr := newWatchConductor(t, conductor.Options{Hostname: "watch-bound"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := c.Watch(ctx, conductor.WatchFilter{})
	before := heapAfterGC()
	for i := range published {
		c.Publish(conductor.Event{Type: conductor.EventPower, NodeUUID: "node-" + strconv.Itoa(i), Error: "power failure number " + strconv.Itoa(i)})
	}
	after := heapAfterGC()
	growth := int64(after) - int64(before)
	t.Logf("heap growth with %d unread events: %d bytes", published, growth)
	if growth > 4<<20 {
		t.Errorf("heap grew by %d bytes for an unread Watch; want the buffer bounded (< 4 MiB)", growth)
	}

	// The reader gets the buffer, plus the one event the forwarder may
	// already hold; every other event is counted as dropped.
	var got, dropped int
	var last conductor.Event
	for last.NodeUUID != "node-"+strconv.Itoa(published-1) {
		select {
		case e := <-w:
			got++
			dropped += e.Dropped
			last = e
		case <-time.After(10 * time.Second):
			t.Fatalf("received %d events without the newest one", got)
		}
	}
	select {
	case e := <-w:
		t.Fatalf("extra event %+v after the newest", e)
	case <-time.After(50 * time.Millisecond):
	}
	if got != conductor.DefaultWatchBuffer && got != conductor.DefaultWatchBuffer+1 {
		t.Errorf("received %d events, want the %d buffered (+1 in hand)", got, conductor.DefaultWatchBuffer)
	}
	if got+dropped != published {
		t.Errorf("received %d + Event.Dropped %d = %d, want every one of %d accounted for", got, dropped, got+dropped, published)
	}
	if m := metricValue(t, pr, "anvil_conductor_watch_events_dropped_total", map[string]string{"conductor": "watch-bound"}); m != float64(dropped) {
		t.Errorf("anvil_conductor_watch_events_dropped_total = %v, want %d", m, dropped)
	}
}

// TestSubscribeDropsOldestBeyondWatchBuffer blocks a Subscribe callback
// while 100 events arrive with WatchBuffer 10: once released it sees the
// event it was handed, then the newest 10, the first of them carrying the
// 89 dropped before it.
func TestSubscribeDropsOldestBeyondWatchBuffer(t *testing.T) {
	c, pr := newWatchConductor(t, conductor.Options{Hostname: "subscribe-bound", WatchBuffer: 10})
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	got := make(chan conductor.Event, 200)
	cancel := c.Subscribe(conductor.WatchFilter{}, func(e conductor.Event) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		got <- e
	})
	defer cancel()
	c.Publish(conductor.Event{Type: conductor.EventPower, NodeUUID: "0"})
	<-entered
	for i := 1; i < 100; i++ {
		c.Publish(conductor.Event{Type: conductor.EventPower, NodeUUID: strconv.Itoa(i)})
	}
	close(release)
	var seen []conductor.Event
	for len(seen) < 11 {
		select {
		case e := <-got:
			seen = append(seen, e)
		case <-time.After(10 * time.Second):
			t.Fatalf("received %d events, want 11", len(seen))
		}
	}
	for i, want := range []struct {
		node    string
		dropped int
	}{{"0", 0}, {"90", 89}, {"91", 0}, {"99", 0}} {
		idx := []int{0, 1, 2, 10}[i]
		if e := seen[idx]; e.NodeUUID != want.node || e.Dropped != want.dropped {
			t.Errorf("event %d = node %s dropped %d, want node %s dropped %d", idx, e.NodeUUID, e.Dropped, want.node, want.dropped)
		}
	}
	if m := metricValue(t, pr, "anvil_conductor_watch_events_dropped_total", map[string]string{"conductor": "subscribe-bound"}); m != 89 {
		t.Errorf("anvil_conductor_watch_events_dropped_total = %v, want 89", m)
	}
}
