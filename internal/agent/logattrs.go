package agent

import (
	"net/netip"
	"strings"

	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// Log values are the words a user would type: addresses, names and
// counts, never Go struct dumps.

// servingAttrs are the values of the "nodecache serving" line: the listen
// addresses, the upstreams as --upstream spells them, and where the zone
// comes from: none, fixture (with its file) or api; a snapshot it serves
// from meanwhile has a line of its own.
func servingAttrs(addrs []netip.AddrPort, fcfg upstream.Config, cfg *Config, zone bool) []any {
	attrs := []any{"addrs", joinAddrs(addrs), "upstreams", upstreamWords(fcfg)}
	switch {
	case !zone:
		return append(attrs, "zone_source", kubezone.SourceNone)
	case cfg.Fixture != "":
		return append(attrs, "zone_source", kubezone.SourceFixture, "fixture", cfg.Fixture)
	}
	return append(attrs, "zone_source", kubezone.SourceAPI)
}

// upstreamWords lists fcfg's servers as --upstream takes them: IP:port, or
// tls://IP:port#NAME for DNS over TLS.
func upstreamWords(fcfg upstream.Config) string {
	s := make([]string, len(fcfg.Servers))
	for i, ap := range fcfg.Servers {
		s[i] = ap.String()
		if t := fcfg.TLS[ap]; t != nil {
			s[i] = "tls://" + s[i] + "#" + t.ServerName
		}
	}
	return strings.Join(s, ",")
}

// zoneAttrs are a zone's figures as log values.
func zoneAttrs(st kubezone.Stats) []any {
	return []any{"source", st.Source, "synced", st.Synced, "generation", st.Generation, "names", st.Names,
		"services", st.Services, "endpoint_slices", st.EndpointSlices, "endpoints", st.Endpoints,
		"namespaces", st.Namespaces, "pods", st.Pods, "local_pods", st.LocalPods}
}
