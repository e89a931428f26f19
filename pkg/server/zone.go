package server

import (
	"bytes"
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/wire"
)

// Zone is the cluster zone (kubezone.Zone, adapted in main).
type Zone interface {
	// InZone reports whether the zone answers qname (lowercased FQDN):
	// names under the cluster domain and the reverse names it owns.
	InZone(qname string) bool
	// Lookup answers qname (lowercased FQDN) and qtype.
	Lookup(qname string, qtype uint16) ZoneAnswer
	// Generation changes whenever any answer may have changed.
	Generation() uint64
	// Version changes whenever an answer at name (a lowercased owner name
	// in wire form) may have changed, bar answers that follow a CNAME to
	// another name of the zone (those are kept by Generation). It changes
	// far less often than Generation: only with the objects the name's
	// answers are built from.
	Version(name []byte) uint64
}

// ZoneAnswer is the zone's reply to one question. Its slices are shared and
// read-only.
type ZoneAnswer struct {
	Rcode             int
	Answer, Ns, Extra []dns.RR
	// Chase is an out-of-zone CNAME target to resolve through the cache and
	// upstreams, its records and rcode following the CNAME (RFC 6604).
	Chase string
}

// maxChase bounds CNAME chasing out of the zone (the zone cuts its own
// in-zone chains at 8 steps).
const maxChase = 8

// inZoneSuffix is the cheap test on the hot path: is the lowercased wire name
// under the cluster domain or a reverse tree the zone may own?
func (s *Server) inZoneSuffix(lower []byte) bool {
	if hasWireSuffix(lower, s.domainWire) {
		return true
	}
	return s.zone != nil && (hasWireSuffix(lower, inAddrArpa) || hasWireSuffix(lower, ip6Arpa))
}

var (
	inAddrArpa = []byte("\x07in-addr\x04arpa\x00")
	ip6Arpa    = []byte("\x03ip6\x04arpa\x00")
)

// hasWireSuffix reports whether name ends with the whole labels of suffix.
func hasWireSuffix(name, suffix []byte) bool {
	if len(suffix) == 0 || !bytes.HasSuffix(name, suffix) {
		return false
	}
	// Walk labels so "xcluster.local" never matches "cluster.local".
	cut := len(name) - len(suffix)
	for off := 0; off < len(name); off += 1 + int(name[off]) {
		if off == cut {
			return true
		}
		if off > cut || name[off] == 0 {
			return false
		}
	}
	return false
}

// answerZone answers q (qname: its name, lowercased) from the zone. ok is false when the name turns out not
// to be the zone's (a reverse name it does not own); the caller forwards it.
func (s *Server) answerZone(ctx context.Context, by time.Time, pkt []byte, q *wire.Query, qname string, out []byte, maxSize int) ([]byte, Result, bool) {
	if s.zone == nil {
		return wire.AppendError(out, pkt, q, dns.RcodeServerFailure), Result{Rcode: dns.RcodeServerFailure, Source: wire.SourceZone}, true
	}
	if !s.zone.InZone(qname) {
		return nil, Result{}, false
	}
	// Both read before the lookup: the answer is at least as new.
	gen, ver := s.zone.Generation(), s.zone.Version(q.LowerName())
	za := s.zone.Lookup(qname, q.Type)
	m := zoneMsg(q, za)
	if za.Chase != "" {
		s.chase(ctx, by, m, za.Chase, q)
		out, res := s.packAndAppend(m, q, out, maxSize, Result{Rcode: m.Rcode, Source: wire.SourceZone})
		return out, res, true
	}
	p, err := wire.Pack(m)
	if err != nil {
		s.logRated("pack", "packing zone reply failed", "name", qname, logkey.Err, err)
		return wire.AppendError(out, pkt, q, dns.RcodeServerFailure), Result{Rcode: dns.RcodeServerFailure, Source: wire.SourceZone}, true
	}
	if za.Rcode != dns.RcodeServerFailure { // pre-sync SERVFAILs must not stick
		if chained(za.Answer) {
			s.memo.put(q, gen, true, p) // it holds another name's records
		} else {
			s.memo.put(q, ver, false, p)
		}
	}
	return p.AppendReply(out, q, s.mode(wire.TTLMode{}), maxSize), Result{Rcode: za.Rcode, Source: wire.SourceZone}, true
}

// chained reports whether an answer holds a CNAME: an ExternalName
// service, whose answer may go on with the records of its in-zone target.
func chained(rrs []dns.RR) bool {
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeCNAME {
			return true
		}
	}
	return false
}

func zoneMsg(q *wire.Query, za ZoneAnswer) *dns.Msg {
	m := q.Request()
	m.Response = true
	m.Authoritative = za.Rcode != dns.RcodeServerFailure
	m.RecursionAvailable = true
	m.Rcode = za.Rcode
	m.Answer = za.Answer
	m.Ns = za.Ns
	m.Extra = za.Extra
	return m
}

// chase resolves an out-of-zone CNAME target through the resolver and
// appends its records; the reply takes the target's rcode (RFC 6604).
func (s *Server) chase(ctx context.Context, by time.Time, m *dns.Msg, target string, q *wire.Query) {
	m.Answer = append([]dns.RR(nil), m.Answer...) // the zone's slice is shared
	for i := 0; i < maxChase && target != ""; i++ {
		key, err := wire.NewKey(target, q.Type, dns.ClassINET, q.DO, q.CD())
		if err != nil {
			m.Rcode = dns.RcodeServerFailure
			return
		}
		res, err := s.resolver.Resolve(ctx, key, by)
		if err != nil {
			m.Rcode = dns.RcodeServerFailure
			return
		}
		r, err := res.Packed.Msg()
		if err != nil {
			m.Rcode = dns.RcodeServerFailure
			return
		}
		m.Rcode = r.Rcode
		m.Answer = append(m.Answer, r.Answer...)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			m.Ns = r.Ns
		}
		target = nextTarget(r, target, q.Type)
	}
}

// nextTarget returns the name still to resolve when r ends in a CNAME that
// does not lead to records of qtype, or "" when r is final.
func nextTarget(r *dns.Msg, name string, qtype uint16) string {
	for {
		var next string
		for _, rr := range r.Answer {
			if !strings.EqualFold(rr.Header().Name, name) {
				continue
			}
			if rr.Header().Rrtype == qtype {
				return ""
			}
			if c, ok := rr.(*dns.CNAME); ok {
				next = c.Target
			}
		}
		if next == "" {
			return ""
		}
		name = next
		found := false
		for _, rr := range r.Answer {
			if strings.EqualFold(rr.Header().Name, name) {
				found = true
			}
		}
		if !found {
			return name
		}
	}
}

// zoneMemo keeps packed zone answers keyed by question, each valid while
// the zone's Version of its name (Generation, for a chained answer) stays
// what it was read as before the lookup: a change to one service leaves
// the answers of the others in place. It is bounded: when full it starts
// over.
type zoneMemo struct {
	seed maphash.Seed
	max  int

	mu sync.RWMutex // guards following
	m  map[uint64]memoEntry
}

type memoEntry struct {
	key wire.Key
	p   *wire.Packed
	ver uint64 // the Version of the name, or the Generation when byGen
	// byGen: the answer follows a CNAME and may hold other names' records.
	byGen bool
}

func newZoneMemo(limit int) *zoneMemo {
	return &zoneMemo{seed: maphash.MakeSeed(), max: limit, m: make(map[uint64]memoEntry)}
}

// get returns the memoized answer to q if z has not changed it since.
func (z *zoneMemo) get(q *wire.Query, zone Zone) (*wire.Packed, bool) {
	h := q.Hash(z.seed)
	z.mu.RLock()
	e, ok := z.m[h]
	z.mu.RUnlock()
	if !ok || !q.Matches(&e.key) {
		return nil, false
	}
	var cur uint64
	if e.byGen {
		cur = zone.Generation()
	} else {
		cur = zone.Version(q.LowerName())
	}
	if cur != e.ver {
		return nil, false
	}
	return e.p, true
}

// put memoizes p, the answer to q built after ver was read (a Generation
// when byGen, else q's name's Version). A slower writer may replace a newer
// answer by an older one: get then sees the version moved and the next
// query builds it again.
func (z *zoneMemo) put(q *wire.Query, ver uint64, byGen bool, p *wire.Packed) {
	h := q.Hash(z.seed)
	z.mu.Lock()
	defer z.mu.Unlock()
	if _, ok := z.m[h]; !ok && len(z.m) >= z.max {
		clear(z.m)
	}
	z.m[h] = memoEntry{key: q.Key(), p: p, ver: ver, byGen: byGen}
}
