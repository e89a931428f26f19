package cache

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

func TestHitAndMiss(t *testing.T) {
	clk := newClock()
	up := &fakeUpstream{reply: answerA(300)}
	c := newTestCache(t, Config{}, up, clk)
	qs := newQuestion(t, "Example.org.", dns.TypeA)

	if _, _, ok := c.Lookup(&qs.q, clk.Now()); ok {
		t.Fatal("Lookup on an empty cache: got a hit, want a miss")
	}
	r := resolve(t, c, qs)
	if r.Source != wire.SourceUpstream || r.Server != testServer || r.Packed == nil {
		t.Errorf("first Resolve: got source %v server %v reply %v, want upstream from %v with its reply", r.Source, r.Server, r.Packed != nil, testServer)
	}
	p, mode, ok := c.Lookup(&qs.q, clk.Now())
	if !ok || p != r.Packed || mode.Elapsed != 0 {
		t.Fatalf("Lookup after Resolve: got %v %+v %v, want the stored reply, elapsed 0", p, mode, ok)
	}
	if got := served(t, p, qs, mode).Question[0].Name; got != "Example.org." {
		t.Errorf("served question: got %q, want the client's case %q", got, "Example.org.")
	}
	if r := resolve(t, c, qs); r.Source != wire.SourceCache {
		t.Errorf("second Resolve: got source %v, want cache", r.Source)
	}
	if got := up.Calls(); got != 1 {
		t.Errorf("upstream calls: got %d, want 1", got)
	}
	if st := c.Stats(); st.Hits != 2 || st.Misses != 1 || st.Entries != 1 {
		t.Errorf("stats: got %+v, want 2 hits, 1 miss, 1 entry", st)
	}
	other := newQuestion(t, "example.org.", dns.TypeAAAA)
	if _, _, ok := c.Lookup(&other.q, clk.Now()); ok {
		t.Error("Lookup of another type: got a hit, want a miss")
	}
}

func TestTTLDecrementsAndExpires(t *testing.T) {
	tests := []struct {
		name    string
		reply   func(*dns.Msg) (*dns.Msg, error)
		maxTTL  time.Duration
		after   time.Duration
		hit     bool
		elapsed uint32
		ttls    []uint32
	}{
		{"fresh", answerA(300), 0, 0, true, 0, []uint32{300}},
		{"rounded up", answerA(300), 0, 10500 * time.Millisecond, true, 11, []uint32{289}},
		{"last second", answerA(300), 0, 299 * time.Second, true, 299, []uint32{1}},
		{"expired", answerA(300), 0, 300 * time.Second, false, 0, nil},
		{"capped by MaxTTL", answerA(3600), time.Minute, 0, true, 0, []uint32{60}},
		{"capped entry decrements", answerA(3600), time.Minute, 59 * time.Second, true, 59, []uint32{1}},
		{"capped entry expires at cap", answerA(3600), time.Minute, time.Minute, false, 0, nil},
		{"records clamped to smallest", func(req *dns.Msg) (*dns.Msg, error) { return replyA(req, 100, 40), nil }, 0, 10 * time.Second, true, 10, []uint32{30, 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			c := newTestCache(t, Config{MaxTTL: tt.maxTTL}, &fakeUpstream{reply: tt.reply}, clk)
			qs := newQuestion(t, "example.org.", dns.TypeA)
			resolve(t, c, qs)
			clk.Advance(tt.after)
			p, mode, ok := c.Lookup(&qs.q, clk.Now())
			if ok != tt.hit {
				t.Fatalf("hit after %v: got %v, want %v", tt.after, ok, tt.hit)
			}
			if !ok {
				return
			}
			if mode.Elapsed != tt.elapsed || mode.Fixed != 0 {
				t.Errorf("mode: got %+v, want elapsed %d", mode, tt.elapsed)
			}
			if got := ttls(served(t, p, qs, mode)); !slices.Equal(got, tt.ttls) {
				t.Errorf("served TTLs: got %v, want %v", got, tt.ttls)
			}
		})
	}
}

func TestReplyKinds(t *testing.T) {
	tests := []struct {
		name      string
		reply     func(*dns.Msg) *dns.Msg
		rcode     int
		cachedFor time.Duration // 0: not cached
		ttls      []uint32      // served right after storing
	}{
		{"NXDOMAIN with SOA", func(r *dns.Msg) *dns.Msg { return replyNeg(r, dns.RcodeNameError, 900, 30) }, dns.RcodeNameError, 30 * time.Second, []uint32{30}},
		{"NODATA with SOA", func(r *dns.Msg) *dns.Msg { return replyNeg(r, dns.RcodeSuccess, 20, 600) }, dns.RcodeSuccess, 20 * time.Second, []uint32{20}},
		{"NXDOMAIN without SOA", func(r *dns.Msg) *dns.Msg { return replyNeg(r, dns.RcodeNameError, 0, 0) }, dns.RcodeNameError, 0, nil},
		{"SERVFAIL", func(r *dns.Msg) *dns.Msg { return replyNeg(r, dns.RcodeServerFailure, 0, 0) }, dns.RcodeServerFailure, 5 * time.Second, nil},
		{"REFUSED", func(r *dns.Msg) *dns.Msg { return replyNeg(r, dns.RcodeRefused, 0, 0) }, dns.RcodeRefused, 0, nil},
		{"truncated", func(r *dns.Msg) *dns.Msg { m := replyA(r, 300); m.Truncated = true; return m }, dns.RcodeSuccess, 0, []uint32{300}},
		{"question mismatch", func(r *dns.Msg) *dns.Msg { m := replyA(r, 300); m.Question[0].Name = "evil.example."; return m }, dns.RcodeSuccess, 0, nil},
		{"TTL 0", func(r *dns.Msg) *dns.Msg { return replyA(r, 0) }, dns.RcodeSuccess, 0, []uint32{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			up := &fakeUpstream{reply: func(r *dns.Msg) (*dns.Msg, error) { return tt.reply(r), nil }}
			// No prefetch: the hit one second before expiry would start one,
			// and its fresh entry could race the check that the entry expired.
			c := newTestCache(t, Config{PrefetchPercent: -1}, up, clk)
			qs := newQuestion(t, "example.org.", dns.TypeA)
			r := resolve(t, c, qs)
			if r.Source != wire.SourceUpstream || r.Packed.Rcode() != tt.rcode {
				t.Fatalf("Resolve: got source %v rcode %d, want upstream rcode %d", r.Source, r.Packed.Rcode(), tt.rcode)
			}
			if tt.ttls != nil {
				if got := ttls(served(t, r.Packed, qs, r.Mode)); !slices.Equal(got, tt.ttls) {
					t.Errorf("returned TTLs: got %v, want %v", got, tt.ttls)
				}
			}
			_, _, hit := c.Lookup(&qs.q, clk.Now())
			if hit != (tt.cachedFor > 0) {
				t.Fatalf("cached: got %v, want %v", hit, tt.cachedFor > 0)
			}
			if tt.cachedFor == 0 {
				resolve(t, c, qs)
				if got := up.Calls(); got != 2 {
					t.Errorf("upstream calls for an uncached reply asked twice: got %d, want 2", got)
				}
				return
			}
			clk.Advance(tt.cachedFor - time.Second)
			if _, _, ok := c.Lookup(&qs.q, clk.Now()); !ok {
				t.Errorf("hit one second before %v: got a miss", tt.cachedFor)
			}
			clk.Advance(time.Second)
			if _, _, ok := c.Lookup(&qs.q, clk.Now()); ok {
				t.Errorf("hit at %v: got a hit, want a miss", tt.cachedFor)
			}
		})
	}
}

func TestUncacheableCounted(t *testing.T) {
	up := &fakeUpstream{reply: func(r *dns.Msg) (*dns.Msg, error) { return replyNeg(r, dns.RcodeNameError, 0, 0), nil }}
	c := newTestCache(t, Config{}, up, newClock())
	resolve(t, c, newQuestion(t, "a.example.", dns.TypeA))
	if got := c.met.uncacheable[reasonNoSOA].Load(); got != 1 {
		t.Errorf("uncacheable no_soa: got %d, want 1", got)
	}
	if got := c.met.inserts[kindNegative].Load(); got != 0 {
		t.Errorf("negative inserts: got %d, want 0", got)
	}
}

func TestHashCollisionIsAMiss(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{}, &fakeUpstream{reply: answerA(300)}, clk)
	a := newQuestion(t, "a.example.", dns.TypeA)
	b := newQuestion(t, "b.example.", dns.TypeA)
	resolve(t, c, b)
	// Plant b's entry under a's hash, as a collision would.
	hb, ha := b.q.Hash(c.seed), a.q.Hash(c.seed)
	sb := c.shardOf(hb)
	sb.mu.Lock()
	e, _ := sb.lru.Peek(hb)
	sb.mu.Unlock()
	c.insert(ha, e, clk.Now())
	if _, _, ok := c.Lookup(&a.q, clk.Now()); ok {
		t.Error("Lookup of a with b's entry under its hash: got a hit, want a miss")
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{}, &fakeUpstream{reply: answerA(300)}, clk)
	qs := newQuestion(t, "example.org.", dns.TypeA)
	resolve(t, c, qs)
	buf := make([]byte, 0, 512)
	allocs := testing.AllocsPerRun(100, func() {
		p, mode, ok := c.Lookup(&qs.q, clk.Now())
		if !ok {
			panic("miss")
		}
		buf = p.AppendReply(buf[:0], &qs.q, mode, 512)
	})
	if allocs != 0 {
		t.Errorf("allocations per hit: got %v, want 0", allocs)
	}
}

func TestByteBound(t *testing.T) {
	tests := []struct {
		maxBytes int64
		shards   int
	}{
		{16 << 10, 1},
		{64 << 10, 4},
		{256 << 10, 16},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/%d", tt.maxBytes, tt.shards), func(t *testing.T) {
			c := newTestCache(t, Config{MaxBytes: tt.maxBytes, Shards: tt.shards}, &fakeUpstream{reply: answerA(300)}, newClock())
			const n = 3000
			for i := range n {
				resolve(t, c, newQuestion(t, fmt.Sprintf("host-%d.example.", i), dns.TypeA))
			}
			st := c.Stats()
			if st.Bytes > tt.maxBytes || st.Bytes <= 0 {
				t.Errorf("bytes: got %d, want in (0, %d]", st.Bytes, tt.maxBytes)
			}
			if st.Evictions == 0 || st.Entries >= n || uint64(st.Entries)+st.Evictions != n {
				t.Errorf("entries %d + evictions %d: want under %d entries, summing to %d", st.Entries, st.Evictions, n, n)
			}
			for i, s := range c.shards {
				if s.bytes > s.budget {
					t.Errorf("shard %d: got %d bytes, want at most %d", i, s.bytes, s.budget)
				}
			}
		})
	}
}

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	clk := newClock()
	c := newTestCache(t, Config{MaxBytes: 8 << 10, Shards: 1}, &fakeUpstream{reply: answerA(300)}, clk)
	first := newQuestion(t, "first.example.", dns.TypeA)
	second := newQuestion(t, "second.example.", dns.TypeA)
	resolve(t, c, first)
	resolve(t, c, second)
	for i := 0; c.Stats().Evictions == 0; i++ {
		c.Lookup(&first.q, clk.Now()) // keep first recently used
		resolve(t, c, newQuestion(t, fmt.Sprintf("filler-%d.example.", i), dns.TypeA))
	}
	if _, _, ok := c.Lookup(&first.q, clk.Now()); !ok {
		t.Error("recently used entry: got evicted, want kept")
	}
	if _, _, ok := c.Lookup(&second.q, clk.Now()); ok {
		t.Error("least recently used entry: got kept, want evicted")
	}
}

func TestTooLargeNotCached(t *testing.T) {
	big := func(req *dns.Msg) (*dns.Msg, error) {
		m := replyA(req, 300)
		for range 40 {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300},
				Txt: []string{string(make([]byte, 250))}})
		}
		return m, nil
	}
	clk := newClock()
	c := newTestCache(t, Config{MaxBytes: 8 << 10, Shards: 1}, &fakeUpstream{reply: big}, clk)
	qs := newQuestion(t, "big.example.", dns.TypeA)
	if r := resolve(t, c, qs); r.Packed == nil {
		t.Fatal("Resolve of a too large reply: got no reply, want it returned")
	}
	if _, _, ok := c.Lookup(&qs.q, clk.Now()); ok {
		t.Error("too large reply: got cached, want not")
	}
	if got := c.met.uncacheable[reasonTooLarge].Load(); got != 1 {
		t.Errorf("uncacheable too_large: got %d, want 1", got)
	}
}

// udpExchanger is the smallest real Exchanger: one UDP query to one server.
type udpExchanger struct {
	server netip.AddrPort
	client dns.Client
}

func (u *udpExchanger) Exchange(ctx context.Context, key wire.Key, by time.Time) (wire.UpstreamReply, netip.AddrPort, error) {
	ctx, cancel := withDeadline(ctx, by)
	defer cancel()
	m, _, err := u.client.ExchangeContext(ctx, request(key), u.server.String())
	if err != nil {
		return wire.UpstreamReply{}, u.server, err
	}
	raw, err := m.Pack()
	if err != nil {
		return wire.UpstreamReply{}, u.server, err
	}
	r, err := wire.ReadUpstream(raw)
	return r, u.server, err
}

// loopbackServer starts a miekg/dns server on 127.0.0.1 with its own mux,
// answering A queries under example. with TTL 300, and counts queries.
func loopbackServer(tb testing.TB) (netip.AddrPort, *atomic.Int64) {
	tb.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listening on loopback: %v", err)
	}
	var queries atomic.Int64
	mux := dns.NewServeMux()
	mux.HandleFunc("example.", func(w dns.ResponseWriter, req *dns.Msg) {
		queries.Add(1)
		if err := w.WriteMsg(replyA(req, 300)); err != nil {
			tb.Errorf("writing reply: %v", err)
		}
	})
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: mux, NotifyStartedFunc: func() { close(started) }}
	done := make(chan error, 1)
	go func() { done <- srv.ActivateAndServe() }()
	<-started
	tb.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			tb.Errorf("shutting down the test server: %v", err)
		}
		<-done
	})
	return netip.MustParseAddrPort(pc.LocalAddr().String()), &queries
}

func TestLoopbackHitAndMiss(t *testing.T) {
	addr, queries := loopbackServer(t)
	clk := newClock()
	c := newTestCache(t, Config{}, &udpExchanger{server: addr, client: dns.Client{Net: "udp"}}, clk)
	qs := newQuestion(t, "www.Example.", dns.TypeA)

	if _, _, ok := c.Lookup(&qs.q, clk.Now()); ok {
		t.Fatal("Lookup before any query: got a hit")
	}
	r := resolve(t, c, qs)
	if m, err := r.Packed.Msg(); r.Source != wire.SourceUpstream || r.Server != addr || err != nil || len(m.Answer) != 1 {
		t.Fatalf("Resolve: got source %v from %v, want upstream from %v with one answer", r.Source, r.Server, addr)
	}
	p, mode, ok := c.Lookup(&qs.q, clk.Now())
	if !ok {
		t.Fatal("Lookup after Resolve: got a miss")
	}
	m := served(t, p, qs, mode)
	if a, isA := m.Answer[0].(*dns.A); !isA || a.A.String() != "192.0.2.1" || m.Id != qs.q.ID {
		t.Errorf("served reply: got %v, want 192.0.2.1 with the client's ID %d", m, qs.q.ID)
	}
	if r := resolve(t, c, qs); r.Source != wire.SourceCache {
		t.Errorf("second Resolve: got source %v, want cache", r.Source)
	}
	if got := queries.Load(); got != 1 {
		t.Errorf("queries at the server: got %d, want 1", got)
	}
}

// TestEntriesAndEvictionsByKind fills a small cache with negative entries,
// then positive ones that push them out: Stats counts the denials held and
// evicted (coredns_cache_entries and _evictions_total by type).
func TestEntriesAndEvictionsByKind(t *testing.T) {
	clk := newClock()
	up := &fakeUpstream{reply: func(req *dns.Msg) (*dns.Msg, error) {
		if strings.HasPrefix(req.Question[0].Name, "nx") {
			return replyNeg(req, dns.RcodeNameError, 300, 300), nil
		}
		return replyA(req, 300), nil
	}}
	c := newTestCache(t, Config{MaxBytes: 8 << 10, Shards: 1}, up, clk)
	for i := range 5 {
		resolve(t, c, newQuestion(t, fmt.Sprintf("nx-%d.example.", i), dns.TypeA))
	}
	if st := c.Stats(); st.Denials != 5 || st.Entries != 5 {
		t.Fatalf("after 5 negatives: got %d denials of %d entries, want 5 of 5", st.Denials, st.Entries)
	}
	for i := 0; c.Stats().Denials > 0; i++ {
		resolve(t, c, newQuestion(t, fmt.Sprintf("host-%d.example.", i), dns.TypeA))
	}
	st := c.Stats()
	if st.EvictedDenials != 5 || st.Evictions < 5 {
		t.Errorf("evictions: got %d, %d of them denials; want the 5 denials among them", st.Evictions, st.EvictedDenials)
	}
	if n := c.FlushAll(); n != st.Entries || c.Stats().Entries != 0 {
		t.Errorf("FlushAll: removed %d of %d entries", n, st.Entries)
	}
}
