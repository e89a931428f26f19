package upstream

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Error kinds used as the "kind" label of nodecache_upstream_errors_total.
// The set is closed so the label stays bounded.
const (
	kindTimeout      = "timeout"      // no valid reply before the try deadline
	kindRefused      = "refused"      // the server answered REFUSED
	kindConnRefused  = "conn_refused" // ICMP port unreachable / TCP RST
	kindSpoofed      = "spoofed"      // a reply with a wrong ID or question, ignored
	kindMalformed    = "malformed"    // a reply that does not unpack, ignored
	kindNetwork      = "network"      // any other socket error
	kindTruncated    = "truncated"    // a truncated UDP reply, retried over TCP
	kindCanceled     = "canceled"     // the caller's context ended the try
	protoUDP         = "udp"
	protoTCP         = "tcp"
	healthyGaugeUp   = 1
	healthyGaugeDown = 0
)

// metrics holds the collectors of one Forwarder.
type metrics struct {
	requests   *prometheus.CounterVec   // server, proto
	errors     *prometheus.CounterVec   // server, kind
	duration   *prometheus.HistogramVec // server
	healthy    *prometheus.GaugeVec     // server
	overloaded prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodecache_upstream_requests_total",
			Help: "Queries sent to upstream servers, per attempt and transport.",
		}, []string{"server", "proto"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodecache_upstream_errors_total",
			Help: "Upstream failures and ignored replies by kind (timeout, refused, conn_refused, spoofed, malformed, network, truncated, canceled).",
		}, []string{"server", "kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nodecache_upstream_duration_seconds",
			Help:    "Round-trip time of successful upstream attempts.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16),
		}, []string{"server"}),
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nodecache_upstream_healthy",
			Help: "1 while the upstream server is considered up, 0 while it is marked down and probed.",
		}, []string{"server"}),
		overloaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodecache_upstream_overloaded_total",
			Help: "Queries refused because the in-flight upstream limit was reached.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.errors, m.duration, m.healthy, m.overloaded} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering upstream metrics: %w", err)
		}
	}
	return m, nil
}

// serverMetrics are one server's children, resolved once so the query
// path does no label lookups.
type serverMetrics struct {
	reqUDP, reqTCP prometheus.Counter
	duration       prometheus.Observer
	healthy        prometheus.Gauge
	errs           map[string]prometheus.Counter // read-only after construction
}

func (m *metrics) forServer(label string) serverMetrics {
	sm := serverMetrics{
		reqUDP:   m.requests.WithLabelValues(label, protoUDP),
		reqTCP:   m.requests.WithLabelValues(label, protoTCP),
		duration: m.duration.WithLabelValues(label),
		healthy:  m.healthy.WithLabelValues(label),
		errs:     make(map[string]prometheus.Counter),
	}
	kinds := []string{kindTimeout, kindRefused, kindConnRefused, kindSpoofed,
		kindMalformed, kindNetwork, kindTruncated, kindCanceled}
	for _, k := range kinds {
		sm.errs[k] = m.errors.WithLabelValues(label, k)
	}
	sm.healthy.Set(healthyGaugeUp)
	return sm
}
