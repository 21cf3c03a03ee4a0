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
	"github.com/prometheus/client_golang/prometheus"
)

// TestPowerSyncRunDurationIsObserved checks each power sync run lands in
// anvil_conductor_power_sync_run_seconds with its wall time: two nodes
// whose BMC answers take 1.5 s each on the conductor's clock, read by one
// sync worker, make a 3 s run (health monitoring, one more BMC query per
// node, is off).
func TestPowerSyncRunDurationIsObserved(t *testing.T) {
	clock := newFakeClock()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	err := reg.Register(builtin.Bundle(fake.Config{Sleep: func(_ context.Context, d time.Duration) error {
		clock.Advance(d)
		return nil
	}}))
	if err != nil {
		t.Fatal(err)
	}
	h := launchOnClock(t, clock, reg, conductor.Options{Hostname: "sync-metric", PeriodicMaxWorkers: 1, DisableHealthMonitoring: true})
	pr := prometheus.NewPedanticRegistry()
	h.must(pr.Register(h.c.Metrics()))
	for _, name := range []string{"sync-a", "sync-b"} {
		n := h.manageable(name, fake.Name)
		h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error {
			n.DriverInfo = map[string]any{fake.BMCLatencyKey: "1500ms"}
			return nil
		}))
	}
	h.c.SyncPowerStates(h.ctx)
	families, err := pr.Gather()
	h.must(err)
	for _, f := range families {
		if f.GetName() != "anvil_conductor_power_sync_run_seconds" {
			continue
		}
		hist := f.GetMetric()[0].GetHistogram()
		if hist.GetSampleCount() != 1 || hist.GetSampleSum() < 3 || hist.GetSampleSum() > 3.5 {
			t.Fatalf("runs %d, total %v s; want 1 run of 3 s", hist.GetSampleCount(), hist.GetSampleSum())
		}
		return
	}
	t.Fatal("no anvil_conductor_power_sync_run_seconds metric")
}
