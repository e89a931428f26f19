package agent

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// stubSpec is one --stub-domain: a zone, its servers and its own
// forwarding and cache settings.
type stubSpec struct {
	domain  string // lowercased FQDN
	servers []netip.AddrPort
	opts    upstream.StubOptions
	limit   cache.ZoneLimit // zero: the cache-wide caps
}

// parseStubSpec parses "DOMAIN=IP[:port],... [OPTION...]" where the
// options are upstream.ParseStubOptions's (policy=, force-tcp,
// prefer-udp, timeout=, max-concurrent=) and the cache's max-ttl= and
// max-negative-ttl=.
func parseStubSpec(spec string, dot *upstreamTLS) (stubSpec, error) {
	fields := strings.Fields(spec)
	if len(fields) == 0 {
		return stubSpec{}, fmt.Errorf("empty stub domain; want DOMAIN=IP[:port],... [options]")
	}
	var s stubSpec
	var err error
	domain, list, _ := strings.Cut(fields[0], "=")
	if strings.Contains(list, "tls://") {
		// The domain is checked with a stand-in server; the list may hold
		// DNS over TLS servers, which ParseStubDomain does not take.
		if s.domain, _, err = upstream.ParseStubDomain(domain + "=192.0.2.1"); err != nil {
			return stubSpec{}, err
		}
		if s.servers, err = dot.parseList(list); err != nil {
			return stubSpec{}, fmt.Errorf("stub domain %q: %w", domain, err)
		}
	} else if s.domain, s.servers, err = upstream.ParseStubDomain(fields[0]); err != nil {
		return stubSpec{}, err
	}
	opts, rest, err := upstream.ParseStubOptions(fields[1:])
	if err != nil {
		return stubSpec{}, err
	}
	s.opts = opts
	for _, w := range rest {
		k, v, _ := strings.Cut(w, "=")
		var d time.Duration
		if k == "max-ttl" || k == "max-negative-ttl" {
			if d, err = time.ParseDuration(v); err != nil || d < time.Second {
				return stubSpec{}, fmt.Errorf("%s: want a duration of at least 1s, e.g. 30s", w)
			}
		}
		switch k {
		case "max-ttl":
			s.limit.MaxTTL = d
		case "max-negative-ttl":
			s.limit.MaxNegativeTTL = d
		default:
			return stubSpec{}, fmt.Errorf("unknown stub domain option %q (want policy=, force-tcp, prefer-udp, timeout=, max-concurrent=, max-ttl=, max-negative-ttl=)", w)
		}
	}
	return s, nil
}

// stubConfig is what the stub domains give the forwarder and the cache.
type stubConfig struct {
	servers map[string][]netip.AddrPort
	opts    map[string]upstream.StubOptions
	limits  map[string]cache.ZoneLimit
	// refusedUps are the kube-dns ConfigMap's upstreamNameservers when
	// they were not used: --upstream names DNS over TLS servers, which
	// plain servers must not replace (upstreamConfig).
	refusedUps []netip.AddrPort
}

// errKubeDNSConfig marks an error in the mounted kube-dns ConfigMap, which
// node-cache counts as a configmap setup error.
var errKubeDNSConfig = errors.New("kube-dns ConfigMap")

// loadStubs reads the kube-dns ConfigMap directory (when set) and the
// --stub-domain specs, which win over it. It also returns the
// ConfigMap's upstreamNameservers, which replace --upstream.
func loadStubs(kubeDNSDir string, specs []string, dot *upstreamTLS) (stubConfig, []netip.AddrPort, error) {
	sc := stubConfig{servers: map[string][]netip.AddrPort{}, opts: map[string]upstream.StubOptions{},
		limits: map[string]cache.ZoneLimit{}}
	var ups []netip.AddrPort
	if kubeDNSDir != "" {
		s, u, err := upstream.LoadKubeDNSConfig(kubeDNSDir)
		if err != nil {
			return sc, nil, fmt.Errorf("--kube-dns-config-dir: %w: %w", errKubeDNSConfig, err)
		}
		sc.servers, ups = s, u
	}
	for _, spec := range specs {
		s, err := parseStubSpec(spec, dot)
		if err != nil {
			return sc, nil, fmt.Errorf("--stub-domain %q: %w", spec, err)
		}
		sc.servers[s.domain] = s.servers
		if s.opts != (upstream.StubOptions{}) {
			sc.opts[s.domain] = s.opts
		}
		if s.limit != (cache.ZoneLimit{}) {
			sc.limits[s.domain] = s.limit
		}
	}
	return sc, ups, nil
}
