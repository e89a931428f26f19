// Package corednsmetrics owns every CoreDNS-compatible series nodecache
// exports: the names, help texts, label names and buckets of CoreDNS's
// metrics, cache, forward and proxy plugins (plugin/metrics/vars,
// plugin/cache/metrics.go, plugin/forward/metrics.go,
// plugin/pkg/proxy/metrics.go), of its build info and panic counter, and
// node-cache's coredns_nodecache_setup_errors_total (kubernetes/dns
// cmd/node-cache/app), so that dashboards and alerts written for CoreDNS
// and NodeLocal DNSCache read nodecache unchanged. It also builds the
// server label ("dns://169.254.20.10:53") and names the plugin label values.
//
// Each function returns a new, unregistered vector (or a Desc for series
// collected from figures); the package that counts registers it and sets
// its values: pkg/server the request, response and cache request series,
// pkg/upstream the forward and proxy series, pkg/iface the setup errors,
// internal/agent the cache figures, plugin_enabled, build info and panics.
// No other package writes a coredns_ name (TestNamesOwnedHere).
//
// The package has no config and registers nothing itself.
package corednsmetrics
