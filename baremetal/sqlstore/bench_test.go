//go:build unix

package sqlstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/statemachine"
)

// cpuTime returns the CPU time (user and system) this process has used.
// The machine the benchmarks run on may be shared, so besides wall-clock
// rates the benchmarks report CPU per operation, which load does not
// inflate.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchStores returns the stores a benchmark runs on: a SQLite file in WAL
// mode always, PostgreSQL when ANVIL_TEST_POSTGRES_DSN is set.
func benchStores(b *testing.B) map[string]func(b *testing.B) *sqlstore.Store {
	out := map[string]func(b *testing.B) *sqlstore.Store{
		"sqlite": func(b *testing.B) *sqlstore.Store {
			return openSQLite(b, filepath.Join(b.TempDir(), "bench.db"), nil)
		},
		"sqlite-single-process": func(b *testing.B) *sqlstore.Store {
			return openSQLiteOpts(b, filepath.Join(b.TempDir(), "bench.db"), sqlstore.Options{SingleProcess: true})
		},
	}
	if os.Getenv(sqlstoretest.EnvPostgresDSN) != "" {
		out["postgres"] = func(b *testing.B) *sqlstore.Store {
			// The test DSN turns synchronous_commit off to speed schema
			// set-up; the benchmarks measure durable commits.
			dsn := strings.Replace(sqlstoretest.PostgresDSN(b), "synchronous_commit=off", "synchronous_commit=on", 1)
			s, err := sqlstore.OpenPostgres(context.Background(), dsn, sqlstore.Options{MaxOpenConns: 16})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}
	}
	return out
}

// benchNode is a node shaped like a real enrollment.
func benchNode(i int) *baremetal.Node {
	states := []statemachine.State{"available", "active", "manageable", "enroll"}
	return &baremetal.Node{
		Name: fmt.Sprintf("rack%03d-u%02d", i/40, i%40), Driver: "ipmi", ProvisionState: states[i%len(states)],
		PowerInterface: "ipmitool", ManagementInterface: "ipmitool", BootInterface: "ipxe", DeployInterface: "direct",
		DriverInfo: map[string]any{"ipmi_address": fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255),
			"ipmi_username": "admin", "ipmi_password": "secret"},
		Properties:     map[string]any{"cpu_arch": "x86_64", "cpus": 64, "memory_mb": 262144, "local_gb": 1800},
		ResourceClass:  "baremetal.large",
		ConductorGroup: []string{"", "rack-a", "rack-b"}[i%3],
	}
}

// BenchmarkAcquireRelease measures exclusive reservation plus release on
// distinct nodes, with 1 and 8 goroutines.
func BenchmarkAcquireRelease(b *testing.B) {
	for name, open := range benchStores(b) {
		for _, workers := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", name, workers), func(b *testing.B) {
				s := open(b)
				ctx := context.Background()
				nodes := make([]*baremetal.Node, workers)
				for i := range nodes {
					nodes[i] = benchNode(i)
				}
				if err := s.CreateNodes(ctx, nodes); err != nil {
					b.Fatal(err)
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start, cpu0 := time.Now(), cpuTime()
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func(n *baremetal.Node, holder string) {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							if _, err := s.ReserveNode(ctx, n.UUID, holder); err != nil {
								b.Error(err)
								return
							}
							if err := s.ReleaseNode(ctx, n.UUID, holder); err != nil {
								b.Error(err)
								return
							}
						}
					}(nodes[w], fmt.Sprintf("conductor-%d", w))
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "acq+rel/s")
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// BenchmarkLockedUpdate measures the engine's unit of work: acquire, one
// compare-and-swap state write under the lock, release.
func BenchmarkLockedUpdate(b *testing.B) {
	for name, open := range benchStores(b) {
		for _, workers := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", name, workers), func(b *testing.B) {
				s := open(b)
				ctx := context.Background()
				nodes := make([]*baremetal.Node, workers)
				for i := range nodes {
					nodes[i] = benchNode(i)
				}
				if err := s.CreateNodes(ctx, nodes); err != nil {
					b.Fatal(err)
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start, cpu0 := time.Now(), cpuTime()
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func(id, holder string) {
						defer wg.Done()
						for i := 0; next.Add(1) <= int64(b.N); i++ {
							n, err := s.ReserveNode(ctx, id, holder)
							if err != nil {
								b.Error(err)
								return
							}
							n.PowerState = []statemachine.PowerState{"power on", "power off"}[i%2]
							if err := s.UpdateNode(ctx, n, holder); err != nil {
								b.Error(err)
								return
							}
							if err := s.ReleaseNode(ctx, id, holder); err != nil {
								b.Error(err)
								return
							}
						}
					}(nodes[w].UUID, fmt.Sprintf("conductor-%d", w))
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// peakHeap samples the heap until stopped and returns the highest value.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		for {
			old := peak.Load()
			if m.HeapInuse <= old || peak.CompareAndSwap(old, m.HeapInuse) {
				return
			}
		}
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		return peak.Load()
	}
}

const fleetSize = 100_000

// enroll creates fleetSize nodes in batches of 1000.
func enroll(b *testing.B, s *sqlstore.Store) {
	ctx := context.Background()
	const batch = 1000
	for start := 0; start < fleetSize; start += batch {
		nodes := make([]*baremetal.Node, batch)
		for i := range nodes {
			nodes[i] = benchNode(start + i)
		}
		if err := s.CreateNodes(ctx, nodes); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnroll100k measures enrolling 100,000 nodes in batches of 1000
// into an empty database: the time, and the peak heap of the process.
// Run it with -benchtime=1x.
func BenchmarkEnroll100k(b *testing.B) {
	for name, open := range benchStores(b) {
		b.Run(name, func(b *testing.B) {
			var total, cpu time.Duration
			var peak uint64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s := open(b)
				runtime.GC()
				stop := peakHeap()
				b.StartTimer()
				start, cpu0 := time.Now(), cpuTime()
				enroll(b, s)
				total += time.Since(start)
				cpu += cpuTime() - cpu0
				b.StopTimer()
				peak = max(peak, stop())
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/enroll")
			b.ReportMetric(float64(fleetSize*b.N)/total.Seconds(), "nodes/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/enroll")
		})
	}
}

// BenchmarkFilteredPage100k measures one page of 100 nodes filtered by
// provision state (and by state, group and maintenance) from a fleet of
// 100,000, walking deeper pages by marker.
func BenchmarkFilteredPage100k(b *testing.B) {
	for name, open := range benchStores(b) {
		b.Run(name, func(b *testing.B) {
			s := open(b)
			enroll(b, s)
			ctx := context.Background()
			filters := map[string]baremetal.NodeFilter{
				"state": {ProvisionStates: []statemachine.State{"available"}},
				"state+group+maintenance": {ProvisionStates: []statemachine.State{"available"}, ConductorGroup: new("rack-a"),
					Maintenance: new(false), Reserved: new(false)},
			}
			for fname, f := range filters {
				b.Run(fname, func(b *testing.B) {
					marker := ""
					b.ResetTimer()
					cpu0 := cpuTime()
					for i := 0; i < b.N; i++ {
						page, err := s.ListNodes(ctx, f, baremetal.Page{Limit: 100, Marker: marker})
						if err != nil {
							b.Fatal(err)
						}
						if len(page) == 0 {
							marker = ""
							continue
						}
						marker = page[len(page)-1].UUID
					}
					b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
					b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/page")
				})
			}
		})
	}
}
