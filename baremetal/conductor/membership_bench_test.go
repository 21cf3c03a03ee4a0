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
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// benchFleet enrolls n fake-hardware nodes in state directly through the
// store, with every interface resolved.
func benchFleet(b *testing.B, s baremetal.Store, n int, state statemachine.State) []string {
	b.Helper()
	return fleetNodes(b, s, n, state, "power off")
}

// fleetNodes creates n fake-hardware nodes in state, recorded powered off,
// whose (fake) hardware is in hwPower.
func fleetNodes(b testing.TB, s baremetal.Store, n int, state statemachine.State, hwPower string) []string {
	b.Helper()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		b.Fatal(err)
	}
	ifs, err := reg.FillDefaults(driver.NodeInterfaces{HardwareType: builtin.FakeHardware})
	if err != nil {
		b.Fatal(err)
	}
	nodes := make([]*baremetal.Node, n)
	for i := range nodes {
		nd := &baremetal.Node{Name: fmt.Sprintf("bench-%05d", i), Driver: builtin.FakeHardware, ProvisionState: state,
			PowerState: "power off", DriverInternalInfo: map[string]any{fake.PowerStateKey: hwPower}}
		nd.SetInterfaces(ifs)
		nodes[i] = nd
	}
	ctx := context.Background()
	for i := 0; i < n; i += 1000 {
		if err := s.CreateNodes(ctx, nodes[i:min(i+1000, n)]); err != nil {
			b.Fatal(err)
		}
	}
	out := make([]string, n)
	for i, nd := range nodes {
		out[i] = nd.UUID
	}
	return out
}

// benchConductors starts k cluster conductors on the database of dsn, each
// with its own store (its own connection pool, as separate processes
// have), with every periodic task off: the benchmark calls them.
func benchConductors(b *testing.B, dsn string, k int) []*conductor.Conductor {
	b.Helper()
	ctx := context.Background()
	notifier, err := sqlstore.NewNotifier(ctx, dsn, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { notifier.Close() })
	out := make([]*conductor.Conductor, k)
	for i := range out {
		s, err := sqlstore.OpenPostgres(ctx, dsn, sqlstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
		if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
			b.Fatal(err)
		}
		c, err := conductor.New(s, reg, conductor.Options{
			Hostname: fmt.Sprintf("bench-%d", i), SyncPowerStateInterval: -1, PowerFailureRecoveryInterval: -1,
			CheckProvisionStateInterval: -1, IntentPollInterval: -1, Logger: slog.New(slog.DiscardHandler),
			LockPolicy: &baremetal.LockPolicy{Attempts: 100, Interval: 10 * time.Millisecond},
			Cluster: &conductor.ClusterOptions{Notifier: notifier, OrphanCheckInterval: -1, SyncLocalStateInterval: -1,
				Ring: conductor.RingOptions{ResetInterval: -1}},
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Launch(ctx); err != nil {
			b.Fatal(err)
		}
		out[i] = c
		b.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = c.Stop(sctx)
			_ = s.Close()
		})
	}
	for _, c := range out {
		if _, err := c.Ownership().Refresh(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// BenchmarkClusterPowerSync measures one full power-sync cycle over a
// fleet of 10,000 fake-hardware nodes on PostgreSQL, by one conductor and
// by three conductors each syncing only the nodes it owns (run at once).
// nodes/s is the fleet size over the cycle's wall time.
func BenchmarkClusterPowerSync(b *testing.B) {
	for _, k := range []int{1, 3} {
		b.Run(fmt.Sprintf("conductors=%d", k), func(b *testing.B) {
			dsn := clusterDSN(b)
			ctx := context.Background()
			s, err := sqlstore.OpenPostgres(ctx, dsn, sqlstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			const fleet = 10000
			benchFleet(b, s, fleet, "available")
			cs := benchConductors(b, dsn, k)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				for _, c := range cs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						c.SyncPowerStates(ctx)
					}()
				}
				wg.Wait()
			}
			b.StopTimer()
			per := time.Since(start) / time.Duration(b.N)
			b.ReportMetric(per.Seconds(), "s/cycle")
			b.ReportMetric(float64(fleet)/per.Seconds(), "nodes/s")
		})
	}
}

// BenchmarkClusterLifecycle takes 1,000 fake-hardware nodes from
// manageable through provide, deploy and undeploy back to available, with
// the verbs spread over the conductors (any conductor accepts a verb; the
// owner executes it), on one conductor and on three.
func BenchmarkClusterLifecycle(b *testing.B) {
	for _, k := range []int{1, 3} {
		b.Run(fmt.Sprintf("conductors=%d", k), func(b *testing.B) {
			dsn := clusterDSN(b)
			ctx := context.Background()
			s, err := sqlstore.OpenPostgres(ctx, dsn, sqlstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			cs := benchConductors(b, dsn, k)
			const fleet = 1000
			var total time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				uuids := benchFleet(b, s, fleet, "manageable")
				b.StartTimer()
				start := time.Now()
				phases := []struct {
					verb string
					want string
					call func(c *conductor.Conductor, id string) error
				}{
					{"provide", "available", func(c *conductor.Conductor, id string) error { return c.Provide(ctx, id) }},
					{"deploy", "active", func(c *conductor.Conductor, id string) error {
						return c.Deploy(ctx, id, conductor.DeployOptions{})
					}},
					{"undeploy", "available", func(c *conductor.Conductor, id string) error { return c.Undeploy(ctx, id) }},
				}
				for _, ph := range phases {
					for j, id := range uuids {
						if err := ph.call(cs[j%len(cs)], id); err != nil {
							b.Fatalf("%s %s: %v", ph.verb, id, err)
						}
					}
					waitCount(b, s, ph.want, uuids)
				}
				total += time.Since(start)
				b.StopTimer()
				for _, id := range uuids {
					if err := s.DeleteNode(ctx, id); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
			per := total / time.Duration(b.N)
			b.ReportMetric(per.Seconds(), "s/lifecycle")
			b.ReportMetric(float64(fleet)/per.Seconds(), "nodes/s")
		})
	}
}

func waitCount(b *testing.B, s baremetal.Store, state string, uuids []string) {
	b.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		n, err := s.CountNodes(ctx, baremetal.NodeFilter{ProvisionStates: []statemachine.State{statemachine.State(state)}, Reserved: new(false)})
		if err != nil {
			b.Fatal(err)
		}
		if n >= len(uuids) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d nodes %s after 5 minutes", n, len(uuids), state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
