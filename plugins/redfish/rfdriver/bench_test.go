package rfdriver

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
)

// BenchmarkPowerState measures one power-state read in process against
// the mockup server (session reused).
func BenchmarkPowerState(b *testing.B) {
	s, err := redfishtest.New(redfishtest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	d := NewDrivers(Options{})
	defer d.Close(context.Background())
	tk := task(s, nil)
	ctx := context.Background()
	for b.Loop() {
		if st, err := d.Power().GetPowerState(ctx, tk); err != nil || st != driver.PowerOff {
			b.Fatalf("%q %v", st, err)
		}
	}
}

// BenchmarkPowerSync100BMCs models one power-sync cycle over 100 BMCs,
// each managing 4 nodes (400 nodes), every node read at once. Each BMC
// answers after 2 ms. It reports the cycle time and the highest number
// of requests any single BMC had in flight, which the per-BMC limit
// (MaxConcurrentPerBMC, 2 here) must bound.
func BenchmarkPowerSync100BMCs(b *testing.B) {
	const bmcs, nodesPerBMC, limit = 100, 4, 2
	servers := make([]*redfishtest.Server, bmcs)
	for i := range servers {
		s, err := redfishtest.New(redfishtest.Options{Latency: benchLatency})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		servers[i] = s
	}
	d := NewDrivers(Options{MaxConcurrentPerBMC: limit})
	defer d.Close(context.Background())
	var tasks []*driver.Task
	for _, s := range servers {
		for n := range nodesPerBMC {
			tk := task(s, nil)
			tk.NodeUUID = fmt.Sprintf("%s-%d", s.URL(), n)
			tasks = append(tasks, tk)
		}
	}
	ctx := context.Background()
	p := d.Power()
	cycle := func() {
		var wg sync.WaitGroup
		for _, tk := range tasks {
			wg.Go(func() {
				if _, err := p.GetPowerState(ctx, tk); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	cycle() // log in to every BMC once, outside the measurement
	before := 0
	for _, s := range servers {
		before += s.Stats().Requests
	}
	b.ResetTimer()
	for b.Loop() {
		cycle()
	}
	b.StopTimer()
	peak, reqs, sessions := 0, 0, 0
	for _, s := range servers {
		st := s.Stats()
		peak = max(peak, st.PeakConcurrent)
		reqs += st.Requests
		sessions += st.SessionsCreated
	}
	b.ReportMetric(float64(peak), "peak-req/bmc")
	b.ReportMetric(float64(reqs-before)/float64(b.N), "req/cycle")
	b.ReportMetric(float64(sessions)/bmcs, "sessions/bmc")
	if peak > limit {
		b.Fatalf("a BMC saw %d concurrent requests, limit %d", peak, limit)
	}
}

// benchLatency is how long each simulated BMC takes to answer.
var benchLatency = 2 * time.Millisecond
