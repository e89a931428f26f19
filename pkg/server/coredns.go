package server

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/corednsmetrics"
	"github.com/nodecache/nodecache/pkg/wire"
)

// The CoreDNS-compatible series: the names, label names and buckets of
// CoreDNS's metrics plugin (plugin/metrics/vars) and of its cache plugin's
// request counters (plugin/cache/metrics.go), so that dashboards and alerts
// written for CoreDNS and NodeLocal DNSCache read nodecache unchanged.
// Label values are bounded: server is one per listen address
// ("dns://169.254.20.10:53"), zone one of the cluster domain, each stub
// domain and ".", view always "".

// corednsTypes are the qtypes with a type label of their own.
var corednsTypes = corednsmetrics.Types()

// corednsPlugin is the plugin label of coredns_dns_responses_total: the
// CoreDNS plugin that would have written the answer. Local answers
// (refusals, FORMERR, RFC 8482) come from the server itself: "".
var corednsPlugin = [wire.NumSources]string{wire.SourceLocal: "", wire.SourceZone: corednsmetrics.PluginKubernetes,
	wire.SourceCache: corednsmetrics.PluginCache, wire.SourceStale: corednsmetrics.PluginCache, wire.SourceUpstream: corednsmetrics.PluginForward}

// edge says where a query came in: transport and listen address, as
// indexes into corednsMetrics.servers.
type edge struct {
	proto  uint8 // protoUDP or protoTCP
	server uint8 // index of the listen address
}

// lazy is a vector of metric children created on first use, so that only
// label combinations that happened are exported (as in CoreDNS), while
// the hot path, once warm, does one atomic load and no allocation.
type lazy[T any] struct {
	cells []atomic.Pointer[T]
	build func(i int) T
}

func newLazy[T any](n int, build func(i int) T) *lazy[T] {
	return &lazy[T]{cells: make([]atomic.Pointer[T], n), build: build}
}

func (l *lazy[T]) at(i int) T {
	if p := l.cells[i].Load(); p != nil {
		return *p
	}
	v := l.build(i)
	l.cells[i].CompareAndSwap(nil, &v)
	return *l.cells[i].Load()
}

// corednsMetrics holds the CoreDNS-compatible series of the server edge.
type corednsMetrics struct {
	servers   []string // "dns://IP:port", index = edge.server
	addrs     []netip.AddrPort
	zones     []string // zones[0] is "."; then the cluster domain, then stubs
	zoneWires [][]byte // wire forms of zones[1:], longest first wins

	requests  *lazy[prometheus.Counter] // server, zone, proto, family, type
	do        *lazy[prometheus.Counter] // server, zone
	duration  *histVec                  // server, zone
	reqSize   *histVec                  // server, zone, proto
	respSize  *histVec                  // server, zone, proto
	responses *lazy[prometheus.Counter] // server, zone, rcode, source

	cacheRequests *lazy[prometheus.Counter] // server, zone
	cacheHits     *lazy[prometheus.Counter] // server, zone, success|denial
	cacheMisses   *lazy[prometheus.Counter] // server, zone
	cacheStale    *lazy[prometheus.Counter] // server, zone
}

var protoNames = [2]string{"udp", "tcp"}

func newCorednsMetrics(reg prometheus.Registerer, addrs []netip.AddrPort, domain string, stubs []string) (*corednsMetrics, error) {
	if len(addrs) > 255 {
		return nil, fmt.Errorf("%d listen addresses: at most 255", len(addrs))
	}
	m := &corednsMetrics{addrs: addrs, zones: []string{"."}}
	for _, a := range addrs {
		m.servers = append(m.servers, corednsmetrics.ServerLabel(a))
	}
	for _, z := range append([]string{domain}, stubs...) {
		z = dns.Fqdn(strings.ToLower(z))
		if z == "." || contains(m.zones, z) {
			continue
		}
		buf := make([]byte, wire.MaxNameLen)
		n, err := dns.PackDomainName(z, buf, 0, nil, false)
		if err != nil {
			return nil, fmt.Errorf("zone %q: %w", z, err)
		}
		m.zones = append(m.zones, z)
		m.zoneWires = append(m.zoneWires, buf[:n])
	}
	ns, nz, nt := len(m.servers), len(m.zones), len(corednsTypes)+1
	const view = corednsmetrics.View
	reqs, do, dur := corednsmetrics.DNSRequests(), corednsmetrics.DNSDoRequests(), corednsmetrics.DNSRequestDuration()
	reqSize, respSize, resps := corednsmetrics.DNSRequestSize(), corednsmetrics.DNSResponseSize(), corednsmetrics.DNSResponses()
	cacheReqs, cacheHits := corednsmetrics.CacheRequests(), corednsmetrics.CacheHits()
	cacheMisses, cacheStale := corednsmetrics.CacheMisses(), corednsmetrics.CacheServedStale()
	sz := func(i int) (string, string) { return m.servers[i/nz], m.zones[i%nz] }
	var err error
	if m.duration, err = newHistVec(dur, ns*nz, func(i int) []string { s, z := sz(i); return []string{s, z, view} }); err != nil {
		return nil, err
	}
	szp := func(i int) []string { s, z := sz(i / 2); return []string{s, z, view, protoNames[i%2]} }
	if m.reqSize, err = newHistVec(reqSize, ns*nz*2, szp); err != nil {
		return nil, err
	}
	if m.respSize, err = newHistVec(respSize, ns*nz*2, szp); err != nil {
		return nil, err
	}
	for _, c := range []prometheus.Collector{reqs, do, m.duration, m.reqSize, m.respSize, resps, cacheReqs, cacheHits, cacheMisses, cacheStale} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering coredns-compatible metrics: %w", err)
		}
	}
	m.requests = newLazy(ns*nz*2*2*nt, func(i int) prometheus.Counter {
		t := i % nt
		i /= nt
		fam := strconv.Itoa(i%2 + 1)
		i /= 2
		proto := protoNames[i%2]
		srv, zone := sz(i / 2)
		typ := corednsmetrics.OtherType
		if t < len(corednsTypes) {
			typ = dns.TypeToString[corednsTypes[t]]
		}
		return reqs.WithLabelValues(srv, zone, view, proto, fam, typ)
	})
	m.do = newLazy(ns*nz, func(i int) prometheus.Counter { s, z := sz(i); return do.WithLabelValues(s, z, view) })
	m.responses = newLazy(ns*nz*numRcodes*int(wire.NumSources), func(i int) prometheus.Counter {
		src := wire.Source(i % int(wire.NumSources))
		i /= int(wire.NumSources)
		s, z := sz(i / numRcodes)
		return resps.WithLabelValues(s, z, view, rcodeName(i%numRcodes), corednsPlugin[src])
	})
	m.cacheRequests = newLazy(ns*nz, func(i int) prometheus.Counter { s, z := sz(i); return cacheReqs.WithLabelValues(s, z, view) })
	m.cacheHits = newLazy(ns*nz*2, func(i int) prometheus.Counter {
		s, z := sz(i / 2)
		return cacheHits.WithLabelValues(s, [2]string{"success", "denial"}[i%2], z, view)
	})
	m.cacheMisses = newLazy(ns*nz, func(i int) prometheus.Counter { s, z := sz(i); return cacheMisses.WithLabelValues(s, z, view) })
	m.cacheStale = newLazy(ns*nz, func(i int) prometheus.Counter { s, z := sz(i); return cacheStale.WithLabelValues(s, z, view) })
	return m, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func rcodeName(r int) string {
	if name, ok := dns.RcodeToString[r]; ok {
		return name
	}
	return strconv.Itoa(r)
}

// serverIndex returns the index of the listen address a, 0 when it is not
// one of them (a wildcard listener, say).
func (m *corednsMetrics) serverIndex(a netip.AddrPort) uint8 {
	a = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
	for i, x := range m.addrs {
		if x == a {
			return uint8(i)
		}
	}
	return 0
}

// zoneIndex returns the index of the zone serving the lowercased wire
// name: the longest matching cluster or stub domain, else "." (0).
func (m *corednsMetrics) zoneIndex(lower []byte) int {
	best, bestLen := 0, 0
	for i, w := range m.zoneWires {
		if len(w) > bestLen && hasWireSuffix(lower, w) {
			best, bestLen = i+1, len(w)
		}
	}
	return best
}

// typeIndexes maps a qtype below 256 (every type of corednsTypes is) to its
// index in corednsTypes plus one; 0 means "other".
var typeIndexes = func() (t [256]uint8) {
	for i, x := range corednsTypes {
		t[x] = uint8(i + 1)
	}
	return t
}()

// denial is 1 for a negative answer (an error rcode, or NODATA: NOERROR
// with no answer record), the cache's "denial" type, else 0 ("success").
func denial(rcode int, reply []byte) int {
	if rcode != dns.RcodeSuccess || len(reply) < 12 || reply[6]|reply[7] == 0 {
		return 1
	}
	return 0
}

func typeIndex(t uint16) int {
	if t < 256 && typeIndexes[t] != 0 {
		return int(typeIndexes[t]) - 1
	}
	return len(corednsTypes)
}

// key says which cells one answered query adds to: reqLen is the query's
// size, reply the reply sent.
func (m *corednsMetrics) key(ep edge, client netip.Addr, q *wire.Query, res Result, reqLen int, reply []byte) corednsKey {
	src := clampSource(res.Source)
	return m.keyOf(int(ep.server)*len(m.zones)+m.zoneIndex(q.LowerName()), ep.proto, familyIndex(client), q.Type,
		clampRcode(res.Rcode), src, q.DO, cacheDenial(src, res.Rcode, reply), uint32(reqLen), uint32(len(reply)))
}

// keyOf is key from the query's cells: sz the server and zone index, fam
// 0 for IPv4 and 1 for IPv6, rcode and src as clampRcode and clampSource
// leave them, denial as cacheDenial.
func (m *corednsMetrics) keyOf(sz int, proto, fam uint8, qtype uint16, rcode uint8, src wire.Source, do bool, denial uint8, reqLen, respLen uint32) corednsKey {
	return corednsKey{
		sz: int32(sz), proto: proto, do: do, src: src, denial: denial,
		requests:  int32(((sz*2+int(proto))*2+int(fam))*(len(corednsTypes)+1) + typeIndex(qtype)),
		responses: int32((sz*numRcodes+int(rcode))*int(wire.NumSources) + int(src)),
		reqLen:    reqLen, respLen: respLen,
	}
}

// familyIndex is the family label's index of client: 0 for IPv4 (mapped
// addresses included), 1 for IPv6.
func familyIndex(client netip.Addr) uint8 {
	if client.Is6() && !client.Is4In6() {
		return 1
	}
	return 0
}

// cacheDenial is the cache-hit type of an answer from src: denial for a
// cached or stale answer, 0 for every other source.
func cacheDenial(src wire.Source, rcode int, reply []byte) uint8 {
	if src == wire.SourceCache || src == wire.SourceStale {
		return uint8(denial(rcode, reply))
	}
	return 0
}

// corednsKey is what one answered query adds to the CoreDNS-compatible
// series, as cell indexes: equal keys in a batch are added once, n times.
type corednsKey struct {
	sz, requests, responses int32
	reqLen, respLen         uint32
	proto, denial           uint8
	do                      bool
	src                     wire.Source
}

// add accounts n answered queries of key k that each took seconds.
func (m *corednsMetrics) add(k corednsKey, n uint64, seconds float64) {
	sz := int(k.sz)
	f := float64(n)
	m.requests.at(int(k.requests)).Add(f)
	if k.do {
		m.do.at(sz).Add(f)
	}
	m.duration.observeN(sz, seconds, n)
	m.reqSize.observeN(sz*2+int(k.proto), float64(k.reqLen), n)
	m.respSize.observeN(sz*2+int(k.proto), float64(k.respLen), n)
	m.responses.at(int(k.responses)).Add(f)
	switch k.src {
	case wire.SourceCache, wire.SourceStale, wire.SourceUpstream:
		m.cacheRequests.at(sz).Add(f)
	default:
		return
	}
	if k.src == wire.SourceUpstream {
		m.cacheMisses.at(sz).Add(f)
		return
	}
	if k.src == wire.SourceStale {
		m.cacheStale.at(sz).Add(f)
	}
	m.cacheHits.at(sz*2 + int(k.denial)).Add(f)
}

// observe accounts one answered query: reqLen is the query's size, reply
// the reply sent.
func (m *corednsMetrics) observe(ep edge, client netip.Addr, q *wire.Query, res Result, seconds float64, reqLen int, reply []byte) {
	m.add(m.key(ep, client, q, res, reqLen, reply), 1, seconds)
}
