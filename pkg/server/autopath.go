package server

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/resolvconf"
	"github.com/nodecache/nodecache/pkg/wire"
)

// Pods tells which namespace a client IP's pod searches first. It returns
// ok only for exactly one running, node-local pod with the cluster's default
// DNS configuration (dnsPolicy ClusterFirst, no custom dnsConfig), so that its
// search path is known: <ns>.svc.<zone> svc.<zone> <zone> then the node's.
type Pods interface {
	SearchNamespace(client netip.Addr) (namespace string, ok bool)
}

// autopathBase returns <base> when qname is <base>.<ns>.svc.<zone> for the
// client's pod namespace ns, the first name its resolver tries.
func (s *Server) autopathBase(client netip.Addr, qname string) (base, ns string, ok bool) {
	if s.pods == nil || !client.IsValid() {
		return "", "", false
	}
	ns, ok = s.pods.SearchNamespace(client)
	if !ok {
		return "", "", false
	}
	suffix := "." + ns + ".svc." + s.cfg.Domain
	if !strings.HasSuffix(qname, suffix) || len(qname) == len(suffix) {
		return "", "", false
	}
	return qname[:len(qname)-len(suffix)], ns, true
}

// searchPath is the list of names a ClusterFirst pod in ns tries for base,
// after the first: the rest of the search list kubelet gives it, then base
// itself.
func (s *Server) searchPath(base, ns string) []string {
	search := resolvconf.PodSearch(s.cfg.Domain, s.cfg.AutopathSearch, resolvconf.Pod{Namespace: ns, DNSPolicy: "ClusterFirst"})
	names := make([]string, 0, len(search))
	for _, d := range search[min(1, len(search)):] { // search[0] is <ns>.svc.<zone>, asked already
		names = append(names, base+"."+dns.Fqdn(d))
	}
	return append(names, dns.Fqdn(base))
}

// autopath answers the first search expansion of base for the whole search
// path at once: the first name that is not NXDOMAIN is the answer, behind a
// CNAME from the question, so the client's resolver stops there (the
// approach of CoreDNS's autopath, possible here because the agent sees the
// pod's own IP). first is q's name, lowercased. ok is false when the first expansion exists: the normal
// answer is then right.
func (s *Server) autopath(ctx context.Context, by time.Time, q *wire.Query, first, base, ns string) (*dns.Msg, bool) {
	if za := s.zone.Lookup(first, q.Type); za.Rcode != dns.RcodeNameError {
		return nil, false
	}
	names := s.searchPath(base, ns)
	for i, name := range names {
		r := s.lookupAny(ctx, by, name, q)
		if r == nil {
			return nil, false // a failure: answer normally, the client walks on
		}
		if r.Rcode == dns.RcodeNameError && i < len(names)-1 {
			continue
		}
		m := q.Request()
		m.Response, m.RecursionAvailable, m.Rcode = true, true, r.Rcode
		m.Answer = append([]dns.RR{&dns.CNAME{
			Hdr:    dns.RR_Header{Name: first, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 5},
			Target: name,
		}}, r.Answer...)
		m.Ns = r.Ns
		s.metrics.autopathSaved.Add(float64(1 + i)) // the expansions the client no longer sends
		return m, true
	}
	return nil, false
}

// lookupAny answers name for q's type from the zone or through the
// resolver; nil on failure.
func (s *Server) lookupAny(ctx context.Context, by time.Time, name string, q *wire.Query) *dns.Msg {
	lower := strings.ToLower(name)
	if s.zone != nil && s.zone.InZone(lower) && !s.cutName(lower) {
		za := s.zone.Lookup(lower, q.Type)
		if za.Chase != "" {
			return nil
		}
		return &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: za.Rcode}, Answer: za.Answer, Ns: za.Ns}
	}
	key, err := wire.NewKey(name, q.Type, dns.ClassINET, q.DO, q.CD())
	if err != nil {
		return nil
	}
	res, err := s.resolver.Resolve(ctx, key, by)
	if err != nil {
		return nil
	}
	r, err := res.Packed.Msg()
	if err != nil {
		return nil
	}
	return r
}
