package dhcp6

import (
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a request gets no answer, the "reason" label of
// anvil_dhcp6_ignored_total.
const (
	ignoreMalformed   = "malformed"    // not a client message, or no client identifier where one is required
	ignoreTooBig      = "too_big"      // larger than MaxPacketSize
	ignoreNoMAC       = "no_mac"       // no MAC to be found (ClientMAC, nor a learned DUID): never guessed
	ignoreNotPXE      = "not_pxe"      // proxy mode: not a network boot client
	ignoreDecider     = "decider"      // the Decider said Ignore (or, in proxy mode, no boot file)
	ignoreOtherServer = "other_server" // the message names another server, or must name one and does not
	ignoreType        = "message_type" // a message type this mode does not answer
	ignoreError       = "error"        // the answer could not be made (see the log)
)

var ignoreReasons = []string{ignoreMalformed, ignoreTooBig, ignoreNoMAC, ignoreNotPXE, ignoreDecider, ignoreOtherServer, ignoreType, ignoreError}

// metrics are one Server's counters; Metrics exposes them.
type metrics struct {
	requests  *prometheus.CounterVec
	answers   *prometheus.CounterVec
	ignored   *prometheus.CounterVec
	macFrom   *prometheus.CounterVec
	exhausted prometheus.Counter

	// The children for the fixed label values, looked up without hashing
	// labels on the packet path; read-only after newMetrics.
	byRequest map[string]prometheus.Counter
	byAnswer  map[string]prometheus.Counter
	byIgnore  map[string]prometheus.Counter
	byMACFrom map[MACSource]prometheus.Counter
}

func (m *metrics) request(t dhcpv6.MessageType) { m.byRequest[typeLabel(t)].Inc() }
func (m *metrics) answer(t dhcpv6.MessageType)  { m.byAnswer[typeLabel(t)].Inc() }
func (m *metrics) ignore(reason string)         { m.byIgnore[reason].Inc() }
func (m *metrics) mac(from MACSource)           { m.byMACFrom[from].Inc() }

func newMetrics() *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anvil_dhcp6_requests_total",
			Help: "DHCPv6 requests received, by message type.",
		}, []string{"type"}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anvil_dhcp6_answers_total",
			Help: "DHCPv6 answers sent, by message type (advertise, reply).",
		}, []string{"type"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anvil_dhcp6_ignored_total",
			Help: "DHCPv6 requests not answered, by reason.",
		}, []string{"reason"}),
		macFrom: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anvil_dhcp6_client_mac_total",
			Help: "DHCPv6 requests whose client MAC was found, by where it was found.",
		}, []string{"source"}),
		exhausted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anvil_dhcp6_pool_exhausted_total",
			Help: "Requests for an address answered NoAddrsAvail because no address was free.",
		}),
	}
	m.byRequest, m.byAnswer, m.byIgnore = map[string]prometheus.Counter{}, map[string]prometheus.Counter{}, map[string]prometheus.Counter{}
	m.byMACFrom = map[MACSource]prometheus.Counter{}
	for _, t := range []string{"solicit", "request", "confirm", "renew", "rebind", "release", "decline", "information_request", "advertise", "reply", "other"} {
		m.byRequest[t] = m.requests.WithLabelValues(t)
	}
	for _, t := range []string{"advertise", "reply", "other"} {
		m.byAnswer[t] = m.answers.WithLabelValues(t)
	}
	for _, r := range ignoreReasons {
		m.byIgnore[r] = m.ignored.WithLabelValues(r)
	}
	for _, f := range []MACSource{MACFromRelayOption, MACFromRelayPeer, MACFromDUID, MACFromLinkLocal, MACFromLearned} {
		m.byMACFrom[f] = m.macFrom.WithLabelValues(string(f))
	}
	return m
}

func typeLabel(t dhcpv6.MessageType) string {
	switch t {
	case dhcpv6.MessageTypeSolicit:
		return "solicit"
	case dhcpv6.MessageTypeRequest:
		return "request"
	case dhcpv6.MessageTypeConfirm:
		return "confirm"
	case dhcpv6.MessageTypeRenew:
		return "renew"
	case dhcpv6.MessageTypeRebind:
		return "rebind"
	case dhcpv6.MessageTypeRelease:
		return "release"
	case dhcpv6.MessageTypeDecline:
		return "decline"
	case dhcpv6.MessageTypeInformationRequest:
		return "information_request"
	case dhcpv6.MessageTypeAdvertise:
		return "advertise"
	case dhcpv6.MessageTypeReply:
		return "reply"
	}
	return "other"
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.answers.Describe(ch)
	m.ignored.Describe(ch)
	m.macFrom.Describe(ch)
	m.exhausted.Describe(ch)
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.answers.Collect(ch)
	m.ignored.Collect(ch)
	m.macFrom.Collect(ch)
	m.exhausted.Collect(ch)
}

// Metrics returns the server's Prometheus collector (requests and
// answers by message type, requests ignored by reason, where client MACs
// were found, pool exhaustion), for the embedder to register where it
// wants.
func (s *Server) Metrics() prometheus.Collector { return s.metrics }

var _ prometheus.Collector = (*metrics)(nil)
