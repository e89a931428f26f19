package main

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/cache"
)

// agentMetrics are the agent's own: handovers and build information.
type agentMetrics struct {
	handovers *prometheus.CounterVec
}

func newAgentMetrics(reg prometheus.Registerer) *agentMetrics {
	m := &agentMetrics{
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodecache_handovers_total", Help: "Socket handovers, by direction (sent to a successor, received from a predecessor).",
		}, []string{"direction"}),
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "nodecache_build_info", Help: "Always 1; the version label says which build runs.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	info.Set(1)
	coreInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "coredns_build_info", Help: "A metric with a constant '1' value labeled by version, revision, and goversion from which CoreDNS was built.",
		ConstLabels: prometheus.Labels{"version": version, "revision": "nodecache", "goversion": runtime.Version()},
	})
	coreInfo.Set(1)
	panics := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "coredns_panics_total", Help: "A metrics that counts the number of panics.",
	})
	reg.MustRegister(m.handovers, info, coreInfo, panics)
	return m
}

// corednsCacheCollector serves the CoreDNS-compatible series of the cache
// that are figures of the whole cache rather than of a query: entries by
// type (success, denial) and prefetches. The cache is one for every
// listen address and holds names outside the cluster zone, so the series
// carry the first listen address as server and "." as zones.
type corednsCacheCollector struct {
	c           *cache.Cache
	server      string
	entries     *prometheus.Desc
	prefetches  *prometheus.Desc
	pluginOn    *prometheus.Desc
	pluginZones map[string][]string // zone -> names of the CoreDNS plugins doing that job
	servers     []string
}

func newCorednsCacheCollector(c *cache.Cache, servers []string, pluginZones map[string][]string) *corednsCacheCollector {
	return &corednsCacheCollector{
		c: c, server: servers[0], servers: servers, pluginZones: pluginZones,
		entries: prometheus.NewDesc("coredns_cache_entries", "The number of elements in the cache.",
			[]string{"server", "type", "zones", "view"}, nil),
		prefetches: prometheus.NewDesc("coredns_cache_prefetch_total", "The number of times the cache has prefetched a cached item.",
			[]string{"server", "zones", "view"}, nil),
		pluginOn: prometheus.NewDesc("coredns_plugin_enabled", "A metric that indicates whether a plugin is enabled on per server and zone basis.",
			[]string{"server", "zone", "view", "name"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (cc *corednsCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cc.entries
	ch <- cc.prefetches
	ch <- cc.pluginOn
}

// Collect implements prometheus.Collector.
func (cc *corednsCacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := cc.c.Stats()
	ch <- prometheus.MustNewConstMetric(cc.entries, prometheus.GaugeValue, float64(st.Entries-st.Denials), cc.server, "success", ".", "")
	ch <- prometheus.MustNewConstMetric(cc.entries, prometheus.GaugeValue, float64(st.Denials), cc.server, "denial", ".", "")
	ch <- prometheus.MustNewConstMetric(cc.prefetches, prometheus.CounterValue, float64(st.Prefetches), cc.server, ".", "")
	for _, srv := range cc.servers {
		for zone, names := range cc.pluginZones {
			for _, n := range names {
				ch <- prometheus.MustNewConstMetric(cc.pluginOn, prometheus.GaugeValue, 1, srv, zone, "", n)
			}
		}
	}
}
