package dhcp

import (
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a request gets no answer, the "reason" label of
// anvil_dhcp_ignored_total.
const (
	ignoreMalformed   = "malformed"    // not a DHCP request, or no Ethernet address
	ignoreTooBig      = "too_big"      // larger than MaxPacketSize
	ignoreNotPXE      = "not_pxe"      // proxy mode: not a PXE or HTTP boot client
	ignoreDecider     = "decider"      // the Decider said Ignore (or, in proxy mode, no boot file)
	ignoreOtherServer = "other_server" // the client talks to another DHCP server
	ignoreType        = "message_type" // a message type this mode does not answer
	ignoreError       = "error"        // the answer could not be made (see the log)
)

// metrics are one Server's counters; Metrics exposes them.
type metrics struct {
	requests  *prometheus.CounterVec
	answers   *prometheus.CounterVec
	ignored   *prometheus.CounterVec
	exhausted prometheus.Counter

	// The children of the vectors for their fixed label values, looked
	// up without hashing labels on the packet path; read-only after
	// newMetrics.
	byRequest map[string]prometheus.Counter
	byAnswer  map[string]prometheus.Counter
	byIgnore  map[string]prometheus.Counter
}

func (m *metrics) request(t dhcpv4.MessageType) { m.byRequest[typeLabel(t)].Inc() }
func (m *metrics) answer(t dhcpv4.MessageType)  { m.byAnswer[typeLabel(t)].Inc() }
func (m *metrics) ignore(reason string)         { m.byIgnore[reason].Inc() }

func newMetrics() *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anvil_dhcp_requests_total",
			Help: "DHCP requests received, by message type.",
		}, []string{"type"}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anvil_dhcp_answers_total",
			Help: "DHCP answers sent, by message type (offer, ack, nak).",
		}, []string{"type"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anvil_dhcp_ignored_total",
			Help: "DHCP requests not answered, by reason.",
		}, []string{"reason"}),
		exhausted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anvil_dhcp_pool_exhausted_total",
			Help: "DISCOVERs left unanswered because no address was free.",
		}),
	}
	m.byRequest, m.byAnswer, m.byIgnore = map[string]prometheus.Counter{}, map[string]prometheus.Counter{}, map[string]prometheus.Counter{}
	// Every label typeLabel returns, in both maps: a client can send any
	// type.
	for _, t := range []string{"discover", "request", "decline", "release", "inform", "offer", "ack", "nak", "other"} {
		m.byRequest[t] = m.requests.WithLabelValues(t)
	}
	for _, t := range []string{"offer", "ack", "nak"} {
		m.byAnswer[t] = m.answers.WithLabelValues(t)
	}
	for _, r := range []string{ignoreMalformed, ignoreTooBig, ignoreNotPXE, ignoreDecider, ignoreOtherServer, ignoreType, ignoreError} {
		m.byIgnore[r] = m.ignored.WithLabelValues(r)
	}
	return m
}

func typeLabel(t dhcpv4.MessageType) string {
	switch t {
	case dhcpv4.MessageTypeDiscover:
		return "discover"
	case dhcpv4.MessageTypeRequest:
		return "request"
	case dhcpv4.MessageTypeDecline:
		return "decline"
	case dhcpv4.MessageTypeRelease:
		return "release"
	case dhcpv4.MessageTypeInform:
		return "inform"
	case dhcpv4.MessageTypeOffer:
		return "offer"
	case dhcpv4.MessageTypeAck:
		return "ack"
	case dhcpv4.MessageTypeNak:
		return "nak"
	}
	return "other"
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.answers.Describe(ch)
	m.ignored.Describe(ch)
	m.exhausted.Describe(ch)
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.answers.Collect(ch)
	m.ignored.Collect(ch)
	m.exhausted.Collect(ch)
}

// Metrics returns the server's Prometheus collector (requests and
// answers by message type, requests ignored by reason, pool
// exhaustion), for the embedder to register where it wants.
func (s *Server) Metrics() prometheus.Collector { return s.metrics }

var _ prometheus.Collector = (*metrics)(nil)
