package main

import (
	"github.com/prometheus/client_golang/prometheus"
)

// agentMetrics are the agent's own: handovers and build information.
type agentMetrics struct {
	handovers *prometheus.CounterVec
	// httpRefused counts health/metrics connections closed by the guard.
	httpRefused *prometheus.CounterVec
}

func newAgentMetrics(reg prometheus.Registerer) *agentMetrics {
	m := &agentMetrics{
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodecache_handovers_total", Help: "Socket handovers, by direction (sent to a successor, received from a predecessor).",
		}, []string{"direction"}),
		httpRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodecache_http_connections_refused_total",
			Help: "Health and metrics connections closed by the connection caps: per_client (over the per-IP cap), evicted (the longest-idle one, at the total cap), total (at the total cap with none idle).",
		}, []string{"reason"}),
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "nodecache_build_info", Help: "Always 1; the version label says which build runs.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	info.Set(1)
	reg.MustRegister(m.handovers, m.httpRefused, info)
	return m
}
