package server

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/wire"
)

// Resolver answers names outside the cluster zone: the cache in front of the
// upstream forwarder.
type Resolver interface {
	// Lookup returns a fresh cached reply for q, without allocating.
	Lookup(q *wire.Query, now time.Time) (*wire.Packed, wire.TTLMode, bool)
	// Resolve answers a miss: from upstream, or stale from the cache, by
	// the deadline by. The upstream is asked the query key.AppendRequest
	// builds, whose flags are those the key promises (RD set, DO and CD as
	// keyed, no AD), whoever asked; ctx only cancels (the server's own
	// context, rather than a timer context per miss). An error wrapping
	// wire.ErrOverloaded is answered REFUSED, any other SERVFAIL.
	Resolve(ctx context.Context, key wire.Key, by time.Time) (wire.Answer, error)
}

// Result describes one answered query, for metrics, the admin API and the
// per-client accounting.
type Result struct {
	Rcode  int
	Source wire.Source
	Server netip.AddrPort
}

// fast tries to answer q without leaving the read loop: validation errors,
// local answers, memoized zone answers and fresh cache hits. It returns the
// reply appended to out and ok, or ok false when the slow path must answer.
func (s *Server) fast(pkt []byte, q *wire.Query, perr error, client netip.Addr, out []byte, maxSize int, now time.Time) ([]byte, Result, bool) {
	if perr != nil {
		return s.validationError(pkt, q, perr, out), Result{Rcode: rcodeOf(perr), Source: wire.SourceLocal}, true
	}
	if s.limiter != nil && !s.limiter.allow(client, now) {
		s.metrics.dropped("client_qps_limit")
		return wire.AppendError(out, pkt, q, dns.RcodeRefused), Result{Rcode: dns.RcodeRefused, Source: wire.SourceLocal}, true
	}
	if rcode, refuse := s.refuse(q); refuse {
		return wire.AppendError(out, pkt, q, rcode), Result{Rcode: rcode, Source: wire.SourceLocal}, true
	}
	if s.suppressed(q) {
		return appendNoData(out, pkt, q), Result{Rcode: dns.RcodeSuccess, Source: wire.SourceLocal}, true
	}
	if q.Type == dns.TypeANY {
		return nil, Result{}, false // RFC 8482 answer is built on the slow path
	}
	if s.zoneOwns(q.LowerName()) {
		if p, ok := s.memo.get(q, s.zone); ok && (p.Rcode() != dns.RcodeNameError || s.pods == nil) {
			return p.AppendReply(out, q, s.mode(wire.TTLMode{}), maxSize), Result{Rcode: p.Rcode(), Source: wire.SourceZone}, true
		}
		if s.zone == nil || hasWireSuffix(q.LowerName(), s.domainWire) || s.zone.InZone(keyName(q)) {
			return nil, Result{}, false
		}
		// A reverse name the zone does not own: the cache may answer it.
	}
	if p, mode, ok := s.resolver.Lookup(q, now); ok {
		return p.AppendReply(out, q, s.mode(mode), maxSize), Result{Rcode: p.Rcode(), Source: wire.SourceCache}, true
	}
	return nil, Result{}, false
}

// slow answers, on a goroutine of its own and by the deadline by, what the
// fast path could not: ANY, zone lookups that are not memoized yet,
// ExternalName chases, and cache misses. ctx cancels (shutdown).
func (s *Server) slow(ctx context.Context, by time.Time, pkt []byte, q *wire.Query, client netip.Addr, out []byte, maxSize int) ([]byte, Result) {
	if q.Type == dns.TypeANY {
		return s.packAndAppend(rfc8482(q), q, out, maxSize, Result{Rcode: dns.RcodeSuccess, Source: wire.SourceLocal})
	}
	if s.zoneOwns(q.LowerName()) {
		qname := keyName(q)
		if base, ns, ok := s.autopathBase(client, qname); ok {
			if m, ok := s.autopath(ctx, by, q, qname, base, ns); ok {
				return s.packAndAppend(m, q, out, maxSize, Result{Rcode: m.Rcode, Source: wire.SourceZone})
			}
		}
		if out, res, ok := s.answerZone(ctx, by, pkt, q, qname, out, maxSize); ok {
			return out, res
		}
	}
	res, err := s.resolver.Resolve(ctx, q.Key(), by)
	if err != nil {
		rcode := dns.RcodeServerFailure
		if errors.Is(err, wire.ErrOverloaded) {
			rcode = dns.RcodeRefused
		}
		s.logRated("upstream", "answering from upstream failed", "name", keyName(q), logkey.Err, err)
		return wire.AppendError(out, pkt, q, rcode), Result{Rcode: rcode, Source: wire.SourceUpstream}
	}
	return res.Packed.AppendReply(out, q, s.mode(res.Mode), maxSize), Result{Rcode: res.Packed.Rcode(), Source: res.Source, Server: res.Server}
}

// validationError maps a parse error to its reply. ErrNoReply never gets here
// with a reply: the caller drops the packet when this returns nil.
func (s *Server) validationError(pkt []byte, q *wire.Query, perr error, out []byte) []byte {
	if errors.Is(perr, wire.ErrNoReply) {
		s.metrics.dropped("unparseable")
		return nil
	}
	s.logRated("malformed", "answering malformed query", logkey.Err, perr)
	return wire.AppendError(out, pkt, q, rcodeOf(perr))
}

func rcodeOf(perr error) int {
	switch {
	case errors.Is(perr, wire.ErrNotImp):
		return dns.RcodeNotImplemented
	case errors.Is(perr, wire.ErrBadVers):
		return dns.RcodeBadVers
	default:
		return dns.RcodeFormatError
	}
}

// refuse returns the rcode for questions the agent does not serve: classes
// other than IN, zone transfers, and meta types.
func (s *Server) refuse(q *wire.Query) (int, bool) {
	switch {
	case q.Class != dns.ClassINET:
		return dns.RcodeRefused, true
	case q.Type == dns.TypeAXFR || q.Type == dns.TypeIXFR:
		return dns.RcodeRefused, true
	case q.Type == dns.TypeOPT:
		return dns.RcodeFormatError, true
	}
	return 0, false
}

// rfc8482 builds the minimal answer to an ANY query (RFC 8482 4.2): one
// synthesized HINFO record.
func rfc8482(q *wire.Query) *dns.Msg {
	m := q.Request()
	m.Response = true
	m.RecursionAvailable = true
	m.Answer = []dns.RR{&dns.HINFO{
		Hdr: dns.RR_Header{Name: m.Question[0].Name, Rrtype: dns.TypeHINFO, Class: dns.ClassINET, Ttl: 3600},
		Cpu: "RFC8482",
	}}
	return m
}

// packAndAppend packs m and writes it for q; a packing failure is SERVFAIL.
func (s *Server) packAndAppend(m *dns.Msg, q *wire.Query, out []byte, maxSize int, res Result) ([]byte, Result) {
	p, err := wire.Pack(m)
	if err != nil {
		s.logRated("pack", "packing reply failed", logkey.Err, err)
		return wire.AppendError(out, nil, &wire.Query{ID: q.ID, Flags: q.Flags}, dns.RcodeServerFailure), Result{Rcode: dns.RcodeServerFailure, Source: res.Source}
	}
	return p.AppendReply(out, q, s.mode(wire.TTLMode{}), maxSize), res
}

func keyName(q *wire.Query) string {
	name, _, err := dns.UnpackDomainName(q.LowerName(), 0)
	if err != nil {
		return "?"
	}
	return name
}

// mode is m with the address shuffle Config.LoadBalance asks for.
func (s *Server) mode(m wire.TTLMode) wire.TTLMode {
	m.Shuffle = s.cfg.LoadBalance
	return m
}
