package agent

import "net/netip"

// noteDowngrade records whether the kube-dns ConfigMap's upstreamNameservers
// were refused (upstreamConfig: they would replace the DNS over TLS servers
// of --upstream with plain DNS): one Warn line per start or reload that
// refuses them, the gauge nodecache_upstream_downgrade_refused and the
// status's downgrade_refused, which `nodecache doctor` reports.
func (a *Agent) noteDowngrade(cfg *Config, refused []netip.AddrPort) {
	if len(refused) == 0 {
		a.downgradeRefused.Store(nil)
		a.m.downgrade.Set(0)
		return
	}
	a.downgradeRefused.Store(&refused)
	a.m.downgrade.Set(1)
	a.log.Warn("the kube-dns ConfigMap's upstreamNameservers are not used: they would replace DNS over TLS upstreams with plain DNS",
		"upstream_nameservers", joinAddrs(refused), "upstream", cfg.Upstream, "kube_dns_config_dir", cfg.KubeDNSConfig,
		"fix", "remove upstreamNameservers from the ConfigMap, or drop tls:// from --upstream to use them")
}
