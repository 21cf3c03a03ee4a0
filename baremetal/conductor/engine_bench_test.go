package conductor_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// BenchmarkLifecycle takes b.N fake-hardware nodes through Ironic's fleet
// workload (enroll, manage, provide, deploy, undeploy) with 16 concurrent
// clients on a SQLite file, and reports the whole-lifecycle rate.
//
//	go test -run '^$' -bench Lifecycle -benchtime 500x ./baremetal/
func BenchmarkLifecycle(b *testing.B) {
	store := openStoreB(b)
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		b.Fatal(err)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "bench", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Launch(ctx); err != nil {
		b.Fatal(err)
	}
	defer c.Stop(ctx)
	var mu sync.Mutex
	waiting := map[string]chan string{}
	cancel := c.Subscribe(conductor.WatchFilter{Types: []conductor.EventType{conductor.EventTransition}}, func(e conductor.Event) {
		if st := e.To; !statemachine.IsStable(st) && !statemachine.IsFailure(st) {
			return
		}
		mu.Lock()
		ch := waiting[e.NodeUUID]
		mu.Unlock()
		if ch != nil {
			ch <- string(e.To)
		}
	})
	defer cancel()
	run := func(uuid string, verb func() error, want statemachine.State) {
		ch := make(chan string, 1)
		mu.Lock()
		waiting[uuid] = ch
		mu.Unlock()
		if err := verb(); err != nil {
			b.Error(err)
			return
		}
		if got := <-ch; got != string(want) {
			b.Errorf("node %s ended in %s, want %s", uuid, got, want)
		}
		mu.Lock()
		delete(waiting, uuid)
		mu.Unlock()
	}
	b.ResetTimer()
	start := time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				n, err := c.Enroll(ctx, &baremetal.Node{Name: fmt.Sprintf("bench-%d-%d", start.UnixNano(), i), Driver: builtin.FakeHardware})
				if err != nil {
					b.Error(err)
					continue
				}
				u := n.UUID
				run(u, func() error { return c.Manage(ctx, u) }, statemachine.Manageable)
				run(u, func() error { return c.Provide(ctx, u) }, statemachine.Available)
				run(u, func() error { return c.Deploy(ctx, u, conductor.DeployOptions{}) }, statemachine.Active)
				run(u, func() error { return c.Undeploy(ctx, u) }, statemachine.Available)
			}
		}()
	}
	for i := 0; i < b.N; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "nodes/s")
}
