package conductor_test

import (
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver/fake"
)

// TestPowerSyncCachesHealth checks Ironic's health monitoring: each
// power state sync reads the node's hardware health from its management
// interface and records it in the node's health field (API 1.109), and
// a change lands in the node's history as a "monitoring" event. The fake
// BMC reports what driver_info fake_health says, as a real BMC reports a
// fan failing.
func TestPowerSyncCachesHealth(t *testing.T) {
	t.Parallel()
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{SyncPowerStateInterval: -1})
	n := h.manageable("health", fake.Name)
	if n.Health != "" {
		t.Fatalf("health before any sync = %q, want none", n.Health)
	}
	health := func() string {
		t.Helper()
		got, err := h.store.GetNode(h.ctx, n.UUID)
		h.must(err)
		return got.Health
	}
	h.c.SyncPowerStates(h.ctx)
	if got := health(); got != "OK" {
		t.Fatalf("health after a sync = %q, want OK", got)
	}
	h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error {
		n.DriverInfo = map[string]any{fake.HealthKey: "Critical"}
		return nil
	}))
	h.c.SyncPowerStates(h.ctx)
	if got := health(); got != "Critical" {
		t.Fatalf("health after the BMC reports Critical = %q, want Critical", got)
	}
	hist, err := h.store.ListHistory(h.ctx, n.UUID, 0)
	h.must(err)
	var changes []string
	for _, e := range hist {
		if e.EventType == "monitoring" {
			changes = append(changes, e.Message)
		}
	}
	want := []string{
		"Node health status changed: health='OK' (previously 'None')",
		"Node health status changed: health='Critical' (previously 'OK')",
	}
	if strings.Join(changes, "\n") != strings.Join(want, "\n") {
		t.Errorf("monitoring history %q, want %q", changes, want)
	}
	// A value the BMC cannot report is ignored, not stored.
	h.must2(h.c.Update(h.ctx, n.UUID, func(n *baremetal.Node) error {
		n.DriverInfo = map[string]any{fake.HealthKey: "Smoking"}
		return nil
	}))
	h.c.SyncPowerStates(h.ctx)
	if got := health(); got != "Critical" {
		t.Errorf("health after an invalid reading = %q, want Critical kept", got)
	}
}

// TestHealthMonitoringDisabled checks [conductor]enable_health_monitoring
// false: the sync reads no health.
func TestHealthMonitoringDisabled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{SyncPowerStateInterval: -1, DisableHealthMonitoring: true})
	n := h.manageable("nohealth", fake.Name)
	h.c.SyncPowerStates(h.ctx)
	got, err := h.store.GetNode(h.ctx, n.UUID)
	h.must(err)
	if got.Health != "" {
		t.Errorf("health = %q with monitoring disabled, want none", got.Health)
	}
}
