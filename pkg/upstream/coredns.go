package upstream

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/corednsmetrics"
)

// The CoreDNS-compatible upstream series: CoreDNS's proxy and forward
// metrics (plugin/pkg/proxy/metrics.go, plugin/forward/metrics.go) with
// proxy_name "forward" and to the upstream's IP:port, and the per-upstream
// series CoreDNS served before 1.11 (coredns_forward_requests_total,
// _responses_total, _request_duration_seconds, _healthcheck_failures_total),
// which the community's forward alerts and node-local-dns dashboards still
// query. Health probes count only as health checks, never as requests.

const numRcodes = 24 // rcodes 0..23 get their own label; beyond counts as 23

// corednsMetrics holds the vectors; serverMetrics resolves one server's.
type corednsMetrics struct {
	proxyDuration *prometheus.HistogramVec // proxy_name, to, rcode
	proxyHCFail   *prometheus.CounterVec   // proxy_name, to
	fwdRequests   *prometheus.CounterVec   // to
	fwdResponses  *prometheus.CounterVec   // rcode, to
	fwdDuration   *prometheus.HistogramVec // to, rcode
	fwdHCFail     *prometheus.CounterVec   // to
	hcBroken      prometheus.Counter
	maxRejects    prometheus.Counter
	responses     *prometheus.CounterVec // nodecache_upstream_responses_total{server,rcode}
	probes        *prometheus.CounterVec // nodecache_upstream_probes_total{server,result}
}

const proxyName = corednsmetrics.ProxyName

func newCorednsMetrics(reg prometheus.Registerer) (*corednsMetrics, error) {
	m := &corednsMetrics{
		proxyDuration: corednsmetrics.ProxyRequestDuration(),
		proxyHCFail:   corednsmetrics.ProxyHealthcheckFailures(),
		fwdRequests:   corednsmetrics.ForwardRequests(),
		fwdResponses:  corednsmetrics.ForwardResponses(),
		fwdDuration:   corednsmetrics.ForwardRequestDuration(),
		fwdHCFail:     corednsmetrics.ForwardHealthcheckFailures(),
		hcBroken:      corednsmetrics.ForwardHealthcheckBroken(),
		maxRejects:    corednsmetrics.ForwardMaxConcurrentRejects(),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodecache_upstream_responses_total",
			Help: "Valid replies from upstream servers by rcode, per attempt (health probes not included)."}, []string{"server", "rcode"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodecache_upstream_probes_total",
			Help: "Health probes of servers marked down, by result (ok, failed)."}, []string{"server", "result"}),
	}
	for _, c := range []prometheus.Collector{m.proxyDuration, m.proxyHCFail, m.fwdRequests, m.fwdResponses,
		m.fwdDuration, m.fwdHCFail, m.hcBroken, m.maxRejects, m.responses, m.probes} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering coredns-compatible upstream metrics: %w", err)
		}
	}
	return m, nil
}

// rcodeSeries are one server's series for one rcode.
type rcodeSeries struct {
	proxy, fwdDuration prometheus.Observer
	fwdResponses, resp prometheus.Counter
}

// upstreamSeries are one server's CoreDNS-compatible series, the per-rcode
// ones made on the first reply with that rcode.
type upstreamSeries struct {
	m           *corednsMetrics
	to          string
	fwdRequests prometheus.Counter
	hcFail      [2]prometheus.Counter // proxy, forward
	probeOK     prometheus.Counter
	probeFailed prometheus.Counter
	rcodes      [numRcodes]atomic.Pointer[rcodeSeries]
}

func (m *corednsMetrics) forServer(to string) *upstreamSeries {
	return &upstreamSeries{
		m: m, to: to,
		fwdRequests: m.fwdRequests.WithLabelValues(to),
		hcFail:      [2]prometheus.Counter{m.proxyHCFail.WithLabelValues(proxyName, to), m.fwdHCFail.WithLabelValues(to)},
		probeOK:     m.probes.WithLabelValues(to, "ok"),
		probeFailed: m.probes.WithLabelValues(to, "failed"),
	}
}

// attempt counts one query sent to the server (not a probe).
func (u *upstreamSeries) attempt() { u.fwdRequests.Inc() }

// reply accounts a valid reply with rcode after rtt.
func (u *upstreamSeries) reply(rcode int, rtt time.Duration) {
	r := min(max(rcode, 0), numRcodes-1)
	rs := u.rcodes[r].Load()
	if rs == nil {
		name, ok := dns.RcodeToString[r]
		if !ok {
			name = strconv.Itoa(r)
		}
		rs = &rcodeSeries{
			proxy:        u.m.proxyDuration.WithLabelValues(proxyName, u.to, name),
			fwdDuration:  u.m.fwdDuration.WithLabelValues(u.to, name),
			fwdResponses: u.m.fwdResponses.WithLabelValues(name, u.to),
			resp:         u.m.responses.WithLabelValues(u.to, name),
		}
		u.rcodes[r].CompareAndSwap(nil, rs)
	}
	s := rtt.Seconds()
	rs.proxy.Observe(s)
	rs.fwdDuration.Observe(s)
	rs.fwdResponses.Inc()
	rs.resp.Inc()
}

// probed accounts one health probe.
func (u *upstreamSeries) probed(ok bool) {
	if ok {
		u.probeOK.Inc()
		return
	}
	u.probeFailed.Inc()
	u.hcFail[0].Inc()
	u.hcFail[1].Inc()
}
