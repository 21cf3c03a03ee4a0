package netboot

import (
	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's Prometheus collectors, registered by the
// embedder (Collectors), never globally.
type metrics struct {
	stages   *prometheus.CounterVec
	failures *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics() *metrics {
	return &metrics{
		stages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "anvil", Subsystem: "netboot", Name: "stages_total",
			Help: "Boot stages recorded, by stage (including failed ones).",
		}, []string{"stage"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "anvil", Subsystem: "netboot", Name: "stage_failures_total",
			Help: "Boot stages that failed (a TFTP transfer, a download the client broke off), by stage.",
		}, []string{"stage"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "anvil", Subsystem: "netboot", Name: "sent_bytes_total",
			Help: "Bytes sent in recorded transfers, by stage.",
		}, []string{"stage"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "anvil", Subsystem: "netboot", Name: "transfer_duration_seconds",
			Help: "Duration of recorded transfers (TFTP files, HTTP scripts, kernels, ramdisks), by stage.",
			// From a script in milliseconds to a large ramdisk over TFTP.
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"stage"}),
	}
}

func (m *metrics) record(r stage.Record) {
	st := string(r.Stage)
	m.stages.WithLabelValues(st).Inc()
	if r.Err != "" || r.Stage == stage.TFTPFailed {
		m.failures.WithLabelValues(st).Inc()
	}
	if r.Bytes > 0 {
		m.bytes.WithLabelValues(st).Add(float64(r.Bytes))
	}
	if r.Duration > 0 || r.Bytes > 0 {
		m.duration.WithLabelValues(st).Observe(r.Duration.Seconds())
	}
}

// Collectors returns the server's metrics for the embedder to register:
// anvil_netboot_stages_total, anvil_netboot_stage_failures_total,
// anvil_netboot_sent_bytes_total (counters by stage) and
// anvil_netboot_transfer_duration_seconds (histogram by stage). The
// stages are every stage record the server emits or is handed
// (ObserveBootStage), so the DHCP server's records are counted too.
func (s *Server) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.metrics.stages, s.metrics.failures, s.metrics.bytes, s.metrics.duration}
}
