package server

import (
	"fmt"
	"strconv"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/wire"
)

// qtypes with their own label value; the rest count as "other".
var metricQtypes = []uint16{dns.TypeA, dns.TypeAAAA, dns.TypePTR, dns.TypeSRV, dns.TypeCNAME, dns.TypeTXT,
	dns.TypeMX, dns.TypeNS, dns.TypeSOA, dns.TypeHTTPS, dns.TypeSVCB, dns.TypeANY}

const numRcodes = 24 // rcodes 0..23 get their own label; beyond counts as 23

// metrics holds pre-resolved counters so the hot path only does atomic adds.
type metrics struct {
	requests  [2][]prometheus.Counter // [proto][qtype index]
	responses [wire.NumSources][numRcodes]prometheus.Counter
	duration  *histVec // by source
	drops     *prometheus.CounterVec
	tcpConns  prometheus.Gauge
	panics    prometheus.Counter
	// autopathSaved counts the search-path queries clients did not have to send.
	autopathSaved prometheus.Counter
	coredns       *corednsMetrics // the CoreDNS-compatible series
}

func newMetrics(reg prometheus.Registerer, cfg *Config) (*metrics, error) {
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodecache_server_requests_total", Help: "Queries received, by transport and query type.",
	}, []string{"proto", "qtype"})
	resps := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodecache_server_responses_total", Help: "Replies sent, by where the answer came from and rcode.",
	}, []string{"source", "rcode"})
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "nodecache_server_request_duration_seconds",
		Help:    "Time from receiving a query to sending its reply, by source.",
		Buckets: []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
	}, []string{"source"})
	m := &metrics{
		drops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodecache_server_dropped_total", Help: "Queries dropped or refused at the edge, by reason.",
		}, []string{"reason"}),
		tcpConns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodecache_server_tcp_connections", Help: "Open TCP client connections.",
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodecache_server_panics_total",
			Help: "Queries whose handling panicked; each was answered SERVFAIL and the agent kept serving.",
		}),
		autopathSaved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodecache_autopath_saved_queries_total",
			Help: "Search-path queries pods did not send because autopath answered the first expansion for the whole path.",
		}),
	}
	var err error
	if m.duration, err = newHistVec(dur, int(wire.NumSources), func(i int) []string { return []string{wire.Source(i).String()} }); err != nil {
		return nil, err
	}
	for _, c := range []prometheus.Collector{reqs, resps, m.duration, m.drops, m.tcpConns, m.panics, m.autopathSaved} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering server metrics: %w", err)
		}
	}
	if m.coredns, err = newCorednsMetrics(reg, cfg.Addrs, cfg.Domain, cfg.StubDomains); err != nil {
		return nil, err
	}
	for p, proto := range []string{"udp", "tcp"} {
		for _, t := range metricQtypes {
			m.requests[p] = append(m.requests[p], reqs.WithLabelValues(proto, dns.TypeToString[t]))
		}
		m.requests[p] = append(m.requests[p], reqs.WithLabelValues(proto, "other"))
	}
	for s := wire.Source(0); s < wire.NumSources; s++ {
		for r := 0; r < numRcodes; r++ {
			name, ok := dns.RcodeToString[r]
			if !ok {
				name = strconv.Itoa(r)
			}
			m.responses[s][r] = resps.WithLabelValues(s.String(), name)
		}
	}
	return m, nil
}

// metricQtypeIndexes maps a qtype below 256 (every type of metricQtypes
// is) to its index in metricQtypes plus one; 0 means "other". An array,
// not a map: it is read once per query.
var metricQtypeIndexes = func() (t [256]uint8) {
	for i, x := range metricQtypes {
		t[x] = uint8(i + 1)
	}
	return t
}()

func metricQtypeIndex(t uint16) int {
	if t < 256 && metricQtypeIndexes[t] != 0 {
		return int(metricQtypeIndexes[t]) - 1
	}
	return len(metricQtypes)
}

// serverKey is what one answered query adds to nodecache's own series.
type serverKey struct {
	proto, qtype, rcode uint8
	src                 wire.Source
}

func (m *metrics) key(proto int, qtype uint16, res Result) serverKey {
	return serverKey{proto: uint8(proto), qtype: uint8(metricQtypeIndex(qtype)), rcode: clampRcode(res.Rcode), src: clampSource(res.Source)}
}

// clampSource is src, or SourceLocal for one beyond the known sources.
func clampSource(src wire.Source) wire.Source {
	if src >= wire.NumSources {
		return wire.SourceLocal
	}
	return src
}

// clampRcode is the rcode's label index: rcodes beyond numRcodes-1 count as it.
func clampRcode(rcode int) uint8 { return uint8(min(max(rcode, 0), numRcodes-1)) }

// add accounts n answered queries of key k that each took seconds.
func (m *metrics) add(k serverKey, n uint64, seconds float64) {
	m.requests[k.proto][k.qtype].Add(float64(n))
	m.responses[k.src][k.rcode].Add(float64(n))
	m.duration.observeN(int(k.src), seconds, n)
}

// observe accounts one answered query that took seconds.
func (m *metrics) observe(proto int, qtype uint16, res Result, seconds float64) {
	m.add(m.key(proto, qtype, res), 1, seconds)
}

func (m *metrics) dropped(reason string) { m.drops.WithLabelValues(reason).Inc() }
