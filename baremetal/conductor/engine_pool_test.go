package conductor_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/prometheus/client_golang/prometheus"
)

// TestFullPoolKeepsIntents runs more operations than workers: every
// accepted intent waits in the database and completes, none is refused or
// lost.
func TestFullPoolKeepsIntents(t *testing.T) {
	t.Parallel()
	synctest.Test(t, fullPoolKeepsIntents)
}

func fullPoolKeepsIntents(t *testing.T) {
	store := openStore(t, false)
	h := newHarness(t, store, fake.Config{Delays: map[string]time.Duration{"power.get_power_state": 20 * time.Millisecond}},
		conductor.Options{Workers: 2})
	var uuids []string
	for i := 0; i < 8; i++ {
		n := h.enroll("pool-"+string(rune('a'+i)), nil)
		uuids = append(uuids, n.UUID)
	}
	for _, u := range uuids {
		h.must(h.c.Manage(h.ctx, u))
	}
	pending := 0
	for _, u := range uuids {
		n, _ := store.GetNode(h.ctx, u)
		if _, ok := n.DriverInternalInfo["anvil_intent"]; ok && n.ProvisionState == "verifying" {
			pending++
		}
	}
	if pending == 0 {
		t.Log("every intent was picked up before it could be observed waiting")
	}
	for _, u := range uuids {
		h.waitFor(u, statemachine.Manageable)
	}
}

func TestMetricsCountTransitionsAndVerbs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, metricsCountTransitionsAndVerbs)
}

func metricsCountTransitionsAndVerbs(t *testing.T) {
	store := openStore(t, false)
	h := newHarness(t, store, fake.Config{}, conductor.Options{Hostname: "metrics-host"})
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(h.c.Metrics()); err != nil {
		t.Fatal(err)
	}
	n := h.enroll("metrics-1", nil)
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	if err := h.c.Provide(h.ctx, "no-such-node"); err == nil {
		t.Fatal("Provide of an unknown node succeeded")
	}
	if err := h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}); err == nil {
		t.Fatal("Deploy of a manageable node succeeded")
	}
	for _, c := range []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"anvil_conductor_verbs_total", map[string]string{"verb": "manage", "outcome": "accepted"}, 1},
		{"anvil_conductor_verbs_total", map[string]string{"verb": "provide", "outcome": "error"}, 1},
		{"anvil_conductor_verbs_total", map[string]string{"verb": "deploy", "outcome": "refused"}, 1},
		{"anvil_conductor_transitions_total", map[string]string{"from": "enroll", "to": "verifying", "event": "manage"}, 1},
		{"anvil_conductor_transitions_total", map[string]string{"from": "verifying", "to": "manageable", "event": "done"}, 1},
	} {
		if got := metricValue(t, reg, c.metric, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.metric, c.labels, got, c.want)
		}
	}
}

// metricValue reads the counter of metric whose labels include labels.
func metricValue(t *testing.T, reg *prometheus.Registry, metric string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
