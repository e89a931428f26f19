package server

import (
	"fmt"
	"sort"
	"strings"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// The most specific zone wins, as in CoreDNS: a stub domain below the
// cluster domain (other-cluster.svc.cluster.local) or below a reverse tree
// the zone answers from (10.in-addr.arpa) takes the names under it away
// from the cluster zone, and they go through the cache to the stub's
// servers. A stub domain equal to the cluster domain, or above it, leaves
// the zone in charge.

// stubCuts are the stub domains that cut into the zone, in wire form and as
// lowercased FQDNs; immutable once built.
type stubCuts struct {
	wire  [][]byte
	names []string
}

// newStubCuts keeps, of the stub domains, those strictly below domain (the
// cluster domain, lowercased FQDN) or below in-addr.arpa or ip6.arpa.
func newStubCuts(domain string, stubs []string) (*stubCuts, error) {
	c := &stubCuts{}
	for _, s := range stubs {
		s = dns.Fqdn(strings.ToLower(s))
		if !cutsZone(domain, s) {
			continue
		}
		buf := make([]byte, wire.MaxNameLen)
		n, err := dns.PackDomainName(s, buf, 0, nil, false)
		if err != nil {
			return nil, fmt.Errorf("stub domain %q: %w", s, err)
		}
		c.wire = append(c.wire, buf[:n:n])
		c.names = append(c.names, s)
	}
	sort.Strings(c.names)
	return c, nil
}

// cutsZone reports whether stub is strictly below one of the zone's apexes.
func cutsZone(domain, stub string) bool {
	for _, apex := range []string{domain, "in-addr.arpa.", "ip6.arpa."} {
		if stub != apex && dns.IsSubDomain(apex, stub) {
			return true
		}
	}
	return false
}

// SetStubDomains replaces the stub domains (lowercased FQDNs) that the
// server routes by the most specific zone, for a reload that changed them.
// Only those below the cluster domain or a reverse tree matter here; the
// metrics' zone labels keep Config.StubDomains.
func (s *Server) SetStubDomains(stubs []string) error {
	c, err := newStubCuts(s.cfg.Domain, stubs)
	if err != nil {
		return err
	}
	if len(c.wire) == 0 {
		c = nil
	}
	s.cuts.Store(c)
	return nil
}

// cut reports whether lower (a lowercased wire name) is under a stub domain
// that takes it from the zone. One atomic load when there is none.
func (s *Server) cut(lower []byte) bool {
	c := s.cuts.Load()
	if c == nil {
		return false
	}
	for _, w := range c.wire {
		if hasWireSuffix(lower, w) {
			return true
		}
	}
	return false
}

// cutName is cut for a lowercased FQDN, on the slow paths.
func (s *Server) cutName(name string) bool {
	c := s.cuts.Load()
	if c == nil {
		return false
	}
	for _, n := range c.names {
		if dns.IsSubDomain(n, name) {
			return true
		}
	}
	return false
}

// zoneOwns is the hot path's test: the zone answers lower (a lowercased
// wire name) unless a stub domain below it is more specific.
func (s *Server) zoneOwns(lower []byte) bool {
	return s.inZoneSuffix(lower) && !s.cut(lower)
}
