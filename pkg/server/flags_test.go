package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/upstream"
	"github.com/nodecache/nodecache/pkg/wire"
)

// Flag bits the flag-echoing upstream encodes in the last octet of its A
// record: what the query it answered carried.
const (
	echoRD = 1 << iota
	echoCD
	echoDO
	echoAD
	echoEDNS
)

// startFlagEcho runs an upstream on loopback that answers every A query
// with one record whose last octet says which flags the query carried, and
// sets AD on every reply (as a validating resolver would).
func startFlagEcho(t testing.TB) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		var bits byte
		for _, b := range []struct {
			set bool
			bit byte
		}{{req.RecursionDesired, echoRD}, {req.CheckingDisabled, echoCD}, {req.AuthenticatedData, echoAD}} {
			if b.set {
				bits |= b.bit
			}
		}
		if opt := req.IsEdns0(); opt != nil {
			bits |= echoEDNS
			if opt.Do() {
				bits |= echoDO
			}
		}
		m := new(dns.Msg)
		m.SetReply(req)
		m.AuthenticatedData = true
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
			A: net.IPv4(192, 0, 2, bits)}}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: h}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// cacheResolver puts the real cache (and forwarder) behind the server, as
// main does: the cache's answers and errors go to the server as they are.
type cacheResolver struct{ c *cache.Cache }

func (r cacheResolver) Lookup(q *wire.Query, now time.Time) (*wire.Packed, wire.TTLMode, bool) {
	return r.c.Lookup(q, now)
}

func (r cacheResolver) Resolve(ctx context.Context, key wire.Key, by time.Time) (wire.Answer, error) {
	return r.c.Resolve(ctx, key, by)
}

func newCacheResolver(t testing.TB, up netip.AddrPort) cacheResolver {
	t.Helper()
	return newCacheResolverCfg(t, upstream.Config{Servers: []netip.AddrPort{up}})
}

func newCacheResolverCfg(t testing.TB, cfg upstream.Config) cacheResolver {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	fwd, err := upstream.New(cfg, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fwd.Close() })
	c, err := cache.New(cache.Config{}, fwd, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return cacheResolver{c: c}
}

// TestUpstreamOverloadIsRefused fills the forwarder's in-flight cap and
// checks that the next miss is answered REFUSED through the real cache,
// with no layer between them translating the forwarder's error.
func TestUpstreamOverloadIsRefused(t *testing.T) {
	held, release := make(chan struct{}, 1), make(chan struct{})
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		held <- struct{}{}
		<-release
		m := new(dns.Msg)
		m.SetReply(req)
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: h}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	up := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	_, addr := startServer(t, Config{}, nil, newCacheResolverCfg(t, upstream.Config{Servers: []netip.AddrPort{up}, MaxInFlight: 1}))

	first := make(chan error, 1)
	defer func() {
		close(release)
		if err := <-first; err != nil {
			t.Errorf("the query holding the slot: %v", err)
		}
	}()
	go func() {
		_, _, err := new(dns.Client).Exchange(new(dns.Msg).SetQuestion("first.example.", dns.TypeA), addr.String())
		first <- err
	}()
	<-held // the forwarder's one slot is taken
	r, _, err := new(dns.Client).Exchange(new(dns.Msg).SetQuestion("second.example.", dns.TypeA), addr.String())
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeRefused {
		t.Errorf("a miss over the upstream's in-flight cap: got %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
}

// TestFlagIsolation sends the same names with every combination of RD,
// AD, CD and DO, straight to the cache, through an ExternalName chase and
// through autopath. The first client of each cache key decides what is
// fetched; every later one must get an entry fetched with the flags its
// key promises (RD set, its own CD and DO, with EDNS, no AD), never the
// first client's, and no reply may carry AD.
func TestFlagIsolation(t *testing.T) {
	up := startFlagEcho(t)
	_, addr := startServerDeps(t, Config{Autopath: true}, Deps{
		Zone: &fakeZone{}, Resolver: newCacheResolver(t, up), Pods: fakePods{netip.MustParseAddr("127.0.0.1"): "default"},
	})
	paths := []struct{ name, qname string }{
		{"direct", "direct.example."},
		{"chase", "ext.default.svc.cluster.local."},
		{"autopath", "api.example.com.default.svc.cluster.local."},
	}
	for _, p := range paths {
		// RD=0 and AD=1 first, so that they would be the ones fetched.
		for _, rd := range []bool{false, true} {
			for _, ad := range []bool{true, false} {
				for _, cd := range []bool{false, true} {
					for _, do := range []bool{false, true} {
						m := new(dns.Msg)
						m.SetQuestion(p.qname, dns.TypeA)
						m.RecursionDesired, m.AuthenticatedData, m.CheckingDisabled = rd, ad, cd
						if do {
							m.SetEdns0(1232, true)
						}
						r, _, err := new(dns.Client).Exchange(m, addr.String())
						if err != nil {
							t.Fatalf("%s rd=%v ad=%v cd=%v do=%v: %v", p.name, rd, ad, cd, do, err)
						}
						want := byte(echoRD | echoEDNS)
						if cd {
							want |= echoCD
						}
						if do {
							want |= echoDO
						}
						got := -1
						for _, rr := range r.Answer {
							if a, ok := rr.(*dns.A); ok {
								got = int(a.A.To4()[3])
							}
						}
						if got != int(want) {
							t.Errorf("%s rd=%v ad=%v cd=%v do=%v: got an entry fetched with flags %05b, want %05b (RD, EDNS, own CD and DO, no AD)",
								p.name, rd, ad, cd, do, got, want)
						}
						if r.AuthenticatedData {
							t.Errorf("%s rd=%v ad=%v cd=%v do=%v: reply has AD, want it clear (nothing was validated)", p.name, rd, ad, cd, do)
						}
					}
				}
			}
		}
	}
}

// TestZoneAnswerNeverAD checks that a cluster-zone answer, which nothing
// validated, carries no AD whatever the client asked.
func TestZoneAnswerNeverAD(t *testing.T) {
	_, addr := startServer(t, Config{}, &fakeZone{}, &fakeResolver{})
	for i := 0; i < 2; i++ { // the second time from the memo
		m := new(dns.Msg)
		m.SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
		m.AuthenticatedData = true
		m.SetEdns0(1232, true)
		r, _, err := new(dns.Client).Exchange(m, addr.String())
		if err != nil {
			t.Fatal(err)
		}
		if r.AuthenticatedData || len(r.Answer) != 1 {
			t.Errorf("got AD %v with %d answers, want AD clear and one answer", r.AuthenticatedData, len(r.Answer))
		}
	}
}

// BenchmarkMissPath is a miss end to end as Server.Query answers it (parse,
// the fast path missing, the slow path): the real cache and forwarder ask
// an upstream on loopback, with the cache flushed before each query.
func BenchmarkMissPath(b *testing.B) {
	up := startFlagEcho(b)
	r := newCacheResolver(b, up)
	s, err := New(Config{Addrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}}, Deps{Resolver: r},
		prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	m := new(dns.Msg)
	m.SetQuestion("miss.example.", dns.TypeA)
	m.SetEdns0(1232, false)
	pkt, err := m.Pack()
	if err != nil {
		b.Fatal(err)
	}
	client := netip.MustParseAddr("10.0.0.1")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r.c.Flush("miss.example.")
		if _, res, err := s.Query(ctx, pkt, client); err != nil || res.Rcode != dns.RcodeSuccess {
			b.Fatalf("got %+v, %v; want an upstream answer", res, err)
		}
	}
}
