package conductor

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the conductor's Prometheus metrics. They are not registered
// anywhere by the conductor: the embedder registers them with its own
// registry (Metrics implements prometheus.Collector), so several conductors
// in one process do not clash.
type Metrics struct {
	transitions   *prometheus.CounterVec
	verbs         *prometheus.CounterVec
	stepDuration  *prometheus.HistogramVec
	stepFailures  *prometheus.CounterVec
	heartbeats    *prometheus.CounterVec
	commandWaits  *prometheus.CounterVec
	powerSync     *prometheus.CounterVec
	powerSyncRun  prometheus.Histogram
	busyWorkers   prometheus.Gauge
	queuedIntents prometheus.Gauge
	workers       prometheus.Gauge
	watchDropped  prometheus.Counter

	bootStagesDropped prometheus.Counter
	phantomReleases   prometheus.Counter
}

func newMetrics(host string) *Metrics {
	labels := prometheus.Labels{"conductor": host}
	return &Metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "transitions_total",
			Help: "Provision state transitions, by state left, state entered and state machine event.", ConstLabels: labels,
		}, []string{"from", "to", "event"}),
		verbs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "verbs_total",
			Help: "Verbs received, by verb and outcome (accepted, refused, locked, error).", ConstLabels: labels,
		}, []string{"verb", "outcome"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "step_duration_seconds",
			Help:        "Wall time of steps from start to end (including waits for the agent), by step kind and step.",
			ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"kind", "step"}),
		stepFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "step_failures_total",
			Help: "Failed steps, by step kind and step.", ConstLabels: labels,
		}, []string{"kind", "step"}),
		heartbeats: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "agent_heartbeats_total",
			Help: "Agent heartbeats recorded, by provision state at the time.", ConstLabels: labels,
		}, []string{"state"}),
		commandWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "agent_command_waits_total",
			Help: "Waits on an in-band step's agent command (AgentSettings.PollCommands), by outcome: finished (the run continued at once) or heartbeats (the wait gave up; heartbeats drive the run).", ConstLabels: labels,
		}, []string{"outcome"}),
		powerSync: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "power_sync_total",
			Help: "Power state sync outcomes per node (match, recorded, forced, failure, maintenance, recovered).", ConstLabels: labels,
		}, []string{"outcome"}),
		powerSyncRun: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "power_sync_run_seconds",
			Help:        "Wall time of whole power state sync runs (listing the nodes, reading every node's power state, correcting mismatches), to compare with the sync interval.",
			ConstLabels: labels, Buckets: prometheus.ExponentialBuckets(0.25, 2, 12),
		}),
		busyWorkers: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "busy_workers",
			Help: "Workers currently running a job.", ConstLabels: labels,
		}),
		queuedIntents: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "queued_jobs",
			Help: "Accepted intents and heartbeats waiting for a free worker.", ConstLabels: labels,
		}),
		workers: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "workers",
			Help: "Size of the worker pool.", ConstLabels: labels,
		}),
		watchDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "watch_events_dropped_total",
			Help: "Events dropped because a Watch or Subscribe consumer fell more than Options.WatchBuffer events behind.", ConstLabels: labels,
		}),
		bootStagesDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "boot_stages_dropped_total",
			Help: "Boot stages dropped because more than Options.BootStageBuffer waited to be recorded, or the conductor was not running.", ConstLabels: labels,
		}),
		phantomReleases: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "anvil", Subsystem: "conductor", Name: "phantom_reservations_released_total",
			Help: "Reservations the database held for this conductor while none of its operations did (left by a database outage), released by the sweep.", ConstLabels: labels,
		}),
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.transitions, m.verbs, m.stepDuration, m.stepFailures,
		m.heartbeats, m.commandWaits, m.powerSync, m.powerSyncRun, m.busyWorkers, m.queuedIntents, m.workers, m.watchDropped,
		m.bootStagesDropped, m.phantomReleases}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// Metrics returns the conductor's metrics for the embedder to register,
// for example prometheus.MustRegister(c.Metrics()).
func (c *Conductor) Metrics() *Metrics { return c.metrics }

var _ prometheus.Collector = (*Metrics)(nil)
