package agent

import (
	"math"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/corednsmetrics"
)

// agentMetrics are the agent's own: handovers and build information.
type agentMetrics struct {
	handovers *prometheus.CounterVec
	// httpRefused counts health/metrics connections closed by the guard.
	httpRefused *prometheus.CounterVec
	// downgrade is 1 while the kube-dns ConfigMap's upstreamNameservers
	// are refused because they would replace DNS over TLS upstreams.
	downgrade prometheus.Gauge
}

// newAgentMetrics registers the agent's own series. node is the node's name
// (--node-name), a label of nodecache_build_info so that dashboards name
// nodes rather than scrape addresses.
func newAgentMetrics(reg prometheus.Registerer, node, version string) *agentMetrics {
	m := &agentMetrics{
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodecache_handovers_total", Help: "Socket handovers, by direction (sent to a successor, received from a predecessor).",
		}, []string{"direction"}),
		httpRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodecache_http_connections_refused_total",
			Help: "Health and metrics connections closed by the connection caps: per_client (over the per-IP cap with every one of that client's connections busy), per_client_evicted (that client's longest-idle one, closed for its new connection), evicted (the longest-idle one, at the total cap), total (at the total cap with none idle).",
		}, []string{"reason"}),
		downgrade: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodecache_upstream_downgrade_refused",
			Help: "1 while the kube-dns ConfigMap's upstreamNameservers are not used because they would replace DNS over TLS upstreams with plain ones; 0 otherwise.",
		}),
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "nodecache_build_info", Help: "Always 1; the version label says which build runs.",
		ConstLabels: prometheus.Labels{"version": version, "node": node},
	})
	info.Set(1)
	coreInfo, panics := corednsmetrics.BuildInfo(version), corednsmetrics.Panics()
	memLimit := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nodecache_memory_limit_bytes",
		Help: "Memory limits the agent runs under, by source: cgroup (the container's memory.max) and gomemlimit (the Go runtime's soft limit).",
	}, []string{"source"})
	if n, ok := cgroupMemoryLimit(); ok {
		memLimit.WithLabelValues("cgroup").Set(float64(n))
	}
	if n := debug.SetMemoryLimit(-1); n != math.MaxInt64 {
		memLimit.WithLabelValues("gomemlimit").Set(float64(n))
	}
	reg.MustRegister(m.handovers, m.httpRefused, m.downgrade, info, coreInfo, panics, memLimit)
	return m
}

// corednsCacheCollector serves the CoreDNS-compatible series of the cache
// that are figures of the whole cache rather than of a query: entries and
// evictions by type (success, denial) and prefetches. The cache is one for every
// listen address and holds names outside the cluster zone, so the series
// carry the first listen address as server and "." as zones.
type corednsCacheCollector struct {
	c           *cache.Cache
	server      string
	entries     *prometheus.Desc
	evictions   *prometheus.Desc
	prefetches  *prometheus.Desc
	pluginOn    *prometheus.Desc
	pluginZones map[string][]string // zone -> names of the CoreDNS plugins doing that job
	servers     []string
}

func newCorednsCacheCollector(c *cache.Cache, servers []string, pluginZones map[string][]string) *corednsCacheCollector {
	return &corednsCacheCollector{
		c: c, server: servers[0], servers: servers, pluginZones: pluginZones,
		entries: corednsmetrics.CacheEntries(), evictions: corednsmetrics.CacheEvictions(),
		prefetches: corednsmetrics.CachePrefetches(), pluginOn: corednsmetrics.PluginEnabled(),
	}
}

// Describe implements prometheus.Collector.
func (cc *corednsCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cc.entries
	ch <- cc.evictions
	ch <- cc.prefetches
	ch <- cc.pluginOn
}

// Collect implements prometheus.Collector.
func (cc *corednsCacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := cc.c.Stats()
	ch <- prometheus.MustNewConstMetric(cc.entries, prometheus.GaugeValue, float64(st.Entries-st.Denials), cc.server, "success", ".", corednsmetrics.View)
	ch <- prometheus.MustNewConstMetric(cc.entries, prometheus.GaugeValue, float64(st.Denials), cc.server, "denial", ".", corednsmetrics.View)
	ch <- prometheus.MustNewConstMetric(cc.evictions, prometheus.CounterValue, float64(st.Evictions-st.EvictedDenials), cc.server, "success", ".", corednsmetrics.View)
	ch <- prometheus.MustNewConstMetric(cc.evictions, prometheus.CounterValue, float64(st.EvictedDenials), cc.server, "denial", ".", corednsmetrics.View)
	ch <- prometheus.MustNewConstMetric(cc.prefetches, prometheus.CounterValue, float64(st.Prefetches), cc.server, ".", corednsmetrics.View)
	for _, srv := range cc.servers {
		for zone, names := range cc.pluginZones {
			for _, n := range names {
				ch <- prometheus.MustNewConstMetric(cc.pluginOn, prometheus.GaugeValue, 1, srv, zone, corednsmetrics.View, n)
			}
		}
	}
}
