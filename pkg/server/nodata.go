package server

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// AAAA suppression (Config.SuppressAAAA): an AAAA query for a name under
// one of the listed domains gets NOERROR with no records, authoritative,
// before the zone, the local answers, the cache and the upstreams are
// asked. It is what the node-local-dns chart's noIPv6Lookups template
// (`template IN AAAA { rcode NOERROR }`) answers, so that pods of an
// IPv4-only cluster never try an IPv6 address first.

// suppressSet is the wire form of Config.SuppressAAAA; all is set for ".".
type suppressSet struct {
	all  bool
	wire [][]byte
}

func newSuppressSet(domains []string) (suppressSet, error) {
	var s suppressSet
	for _, d := range domains {
		d = dns.Fqdn(strings.ToLower(d))
		if d == "." {
			s.all = true
			continue
		}
		buf := make([]byte, wire.MaxNameLen)
		n, err := dns.PackDomainName(d, buf, 0, nil, false)
		if err != nil {
			return suppressSet{}, fmt.Errorf("AAAA suppression domain %q: %w", d, err)
		}
		s.wire = append(s.wire, buf[:n:n])
	}
	return s, nil
}

// suppressed reports whether q is an AAAA query the server answers NODATA.
func (s *Server) suppressed(q *wire.Query) bool {
	if q.Type != dns.TypeAAAA {
		return false
	}
	if s.noAAAA.all {
		return true
	}
	for _, w := range s.noAAAA.wire {
		if hasWireSuffix(q.LowerName(), w) {
			return true
		}
	}
	return false
}

// appendNoData appends the suppressed answer to q: NOERROR, AA, no records.
func appendNoData(out, pkt []byte, q *wire.Query) []byte {
	start := len(out)
	out = wire.AppendError(out, pkt, q, dns.RcodeSuccess)
	out[start+2] |= 0x04 // AA, as CoreDNS's template answers
	return out
}
