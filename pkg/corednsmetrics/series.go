package corednsmetrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics plugin's series (plugin/metrics/vars), by server and zone.

// DNSRequests is coredns_dns_requests_total.
func DNSRequests() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coredns_dns_requests_total",
		Help: "Counter of DNS requests made per zone, protocol and family."}, []string{"server", "zone", "view", "proto", "family", "type"})
}

// DNSDoRequests is coredns_dns_do_requests_total.
func DNSDoRequests() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coredns_dns_do_requests_total",
		Help: "Counter of DNS requests with DO bit set per zone."}, []string{"server", "zone", "view"})
}

// DNSRequestDuration is coredns_dns_request_duration_seconds.
func DNSRequestDuration() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "coredns_dns_request_duration_seconds",
		Help: "Histogram of the time (in seconds) each request took per zone.", Buckets: TimeBuckets()}, []string{"server", "zone", "view"})
}

// DNSRequestSize is coredns_dns_request_size_bytes.
func DNSRequestSize() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "coredns_dns_request_size_bytes",
		Help: "Size of the EDNS0 UDP buffer in bytes (64K for TCP) per zone and protocol.", Buckets: SizeBuckets()}, []string{"server", "zone", "view", "proto"})
}

// DNSResponseSize is coredns_dns_response_size_bytes.
func DNSResponseSize() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "coredns_dns_response_size_bytes",
		Help: "Size of the returned response in bytes.", Buckets: SizeBuckets()}, []string{"server", "zone", "view", "proto"})
}

// DNSResponses is coredns_dns_responses_total.
func DNSResponses() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coredns_dns_responses_total",
		Help: "Counter of response status codes."}, []string{"server", "zone", "view", "rcode", "plugin"})
}

// The cache plugin's series (plugin/cache/metrics.go).

// CacheRequests is coredns_cache_requests_total.
func CacheRequests() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coredns_cache_requests_total",
		Help: "The count of cache requests."}, []string{"server", "zones", "view"})
}

// CacheHits is coredns_cache_hits_total; type is success or denial.
func CacheHits() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coredns_cache_hits_total",
		Help: "The count of cache hits."}, []string{"server", "type", "zones", "view"})
}

// CacheMisses is coredns_cache_misses_total.
func CacheMisses() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coredns_cache_misses_total",
		Help: "The count of cache misses. Deprecated, derive misses from cache hits/requests counters."}, []string{"server", "zones", "view"})
}

// CacheServedStale is coredns_cache_served_stale_total.
func CacheServedStale() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coredns_cache_served_stale_total",
		Help: "The number of requests served from stale cache entries."}, []string{"server", "zones", "view"})
}

// CacheEntries is coredns_cache_entries, collected from the cache's figures.
func CacheEntries() *prometheus.Desc {
	return prometheus.NewDesc("coredns_cache_entries", "The number of elements in the cache.", []string{"server", "type", "zones", "view"}, nil)
}

// CacheEvictions is coredns_cache_evictions_total, collected likewise.
func CacheEvictions() *prometheus.Desc {
	return prometheus.NewDesc("coredns_cache_evictions_total", "The count of cache evictions.", []string{"server", "type", "zones", "view"}, nil)
}

// CachePrefetches is coredns_cache_prefetch_total, collected likewise.
func CachePrefetches() *prometheus.Desc {
	return prometheus.NewDesc("coredns_cache_prefetch_total", "The number of times the cache has prefetched a cached item.",
		[]string{"server", "zones", "view"}, nil)
}

// PluginEnabled is coredns_plugin_enabled: 1 per server, zone and plugin
// name (Plugin*) doing a job there.
func PluginEnabled() *prometheus.Desc {
	return prometheus.NewDesc("coredns_plugin_enabled", "A metric that indicates whether a plugin is enabled on per server and zone basis.",
		[]string{"server", "zone", "view", "name"}, nil)
}

// The proxy and forward plugins' series, by upstream ("to", IP:port).

// ProxyRequestDuration is coredns_proxy_request_duration_seconds.
func ProxyRequestDuration() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "coredns_proxy_request_duration_seconds",
		Help: "Histogram of the time each request took.", Buckets: TimeBuckets()}, []string{"proxy_name", "to", "rcode"})
}

// ProxyHealthcheckFailures is coredns_proxy_healthcheck_failures_total.
func ProxyHealthcheckFailures() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coredns_proxy_healthcheck_failures_total",
		Help: "Counter of the number of failed healthchecks."}, []string{"proxy_name", "to"})
}

// ForwardRequests is coredns_forward_requests_total (CoreDNS before 1.11).
func ForwardRequests() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coredns_forward_requests_total",
		Help: "Counter of requests made per upstream."}, []string{"to"})
}

// ForwardResponses is coredns_forward_responses_total (before 1.11).
func ForwardResponses() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coredns_forward_responses_total",
		Help: "Counter of responses received per upstream."}, []string{"rcode", "to"})
}

// ForwardRequestDuration is coredns_forward_request_duration_seconds
// (before 1.11).
func ForwardRequestDuration() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "coredns_forward_request_duration_seconds",
		Help: "Histogram of the time each request took.", Buckets: TimeBuckets()}, []string{"to", "rcode"})
}

// ForwardHealthcheckFailures is coredns_forward_healthcheck_failures_total
// (before 1.11).
func ForwardHealthcheckFailures() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coredns_forward_healthcheck_failures_total",
		Help: "Counter of the number of failed healthchecks."}, []string{"to"})
}

// ForwardHealthcheckBroken is coredns_forward_healthcheck_broken_total.
func ForwardHealthcheckBroken() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "coredns_forward_healthcheck_broken_total",
		Help: "Counter of the number of complete failures of the healthchecks."})
}

// ForwardMaxConcurrentRejects is coredns_forward_max_concurrent_rejects_total.
func ForwardMaxConcurrentRejects() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "coredns_forward_max_concurrent_rejects_total",
		Help: "Counter of the number of queries rejected because the concurrent queries were at maximum."})
}

// The process's series.

// BuildInfo is coredns_build_info, set to 1, labeled with version.
func BuildInfo(version string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "coredns_build_info",
		Help:        "A metric with a constant '1' value labeled by version, revision, and goversion from which CoreDNS was built.",
		ConstLabels: prometheus.Labels{"version": version, "revision": "nodecache", "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// Panics is coredns_panics_total.
func Panics() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "coredns_panics_total", Help: "A metrics that counts the number of panics."})
}

// SetupErrors is node-cache's coredns_nodecache_setup_errors_total; its
// errortype values are node-cache's (iptables, iptables_lock,
// interface_add, interface_check, configmap).
func SetupErrors() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coredns_nodecache_setup_errors_total",
		Help: "The number of errors during periodic network setup for node-cache (errortype iptables, iptables_lock, interface_add, interface_check, configmap)."}, []string{"errortype"})
}
