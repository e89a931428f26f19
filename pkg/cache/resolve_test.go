package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

func TestConcurrentMissesShareOneQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		up := &fakeUpstream{reply: answerA(300), gate: gate}
		c := newTestCache(t, Config{}, up, newClock())
		qs := newQuestion(t, "example.org.", dns.TypeA)
		const n = 10
		results := make([]wire.Answer, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { results[i] = resolve(t, c, qs) })
		}
		synctest.Wait()
		if got := up.Calls(); got != 1 {
			t.Errorf("upstream calls with %d misses waiting: got %d, want 1", n, got)
		}
		close(gate)
		wg.Wait()
		for i, r := range results {
			if r.Source != wire.SourceUpstream || r.Packed != results[0].Packed {
				t.Errorf("result %d: got source %v packed %p, want upstream %p", i, r.Source, r.Packed, results[0].Packed)
			}
		}
		if st := c.Stats(); st.Misses != n {
			t.Errorf("misses: got %d, want %d", st.Misses, n)
		}
	})
}

func TestOldFlightNotJoined(t *testing.T) {
	tests := []struct {
		age   time.Duration
		calls int
	}{
		{0, 1},
		{1999 * time.Millisecond, 1},
		{2 * time.Second, 2},
		{3 * time.Second, 2},
	}
	for _, tt := range tests {
		t.Run(tt.age.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				gate := make(chan struct{})
				clk := newClock()
				up := &fakeUpstream{reply: answerA(300), gate: gate}
				c := newTestCache(t, Config{}, up, clk)
				qs := newQuestion(t, "example.org.", dns.TypeA)
				var wg sync.WaitGroup
				wg.Go(func() { resolve(t, c, qs) })
				synctest.Wait()
				clk.Advance(tt.age)
				wg.Go(func() { resolve(t, c, qs) })
				synctest.Wait()
				if got := up.Calls(); got != tt.calls {
					t.Errorf("upstream calls for a retry after %v: got %d, want %d", tt.age, got, tt.calls)
				}
				close(gate)
				wg.Wait()
			})
		})
	}
}

func TestPrefetch(t *testing.T) {
	tests := []struct {
		name      string
		earlyHits int           // hits at +1s
		at        time.Duration // the last hit, of a 100s entry
		prefetch  bool
	}{
		{"popular under 10%", 1, 91 * time.Second, true},
		{"popular, many hits", 5, 99 * time.Second, true},
		{"one hit only", 0, 91 * time.Second, false},
		{"at exactly 10%", 1, 90 * time.Second, false},
		{"popular, plenty left", 5, 50 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, up, clk, qs := primed(t, Config{}, 100)
				clk.Advance(time.Second)
				for range tt.earlyHits {
					c.Lookup(&qs.q, clk.Now())
				}
				clk.Advance(tt.at - time.Second)
				if _, _, ok := c.Lookup(&qs.q, clk.Now()); !ok {
					t.Fatal("last hit: got a miss")
				}
				synctest.Wait()
				want := 1
				if tt.prefetch {
					want = 2
				}
				if got := up.Calls(); got != want {
					t.Errorf("upstream calls: got %d, want %d", got, want)
				}
				_, mode, _ := c.Lookup(&qs.q, clk.Now())
				if got := mode.Elapsed == 0; got != tt.prefetch {
					t.Errorf("entry replaced by the prefetch: got %v (elapsed %d), want %v", got, mode.Elapsed, tt.prefetch)
				}
			})
		})
	}
}

func TestPrefetchOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, up, clk, qs := primed(t, Config{}, 100)
		up.set(failing)
		clk.Advance(95 * time.Second)
		for range 10 {
			c.Lookup(&qs.q, clk.Now())
			synctest.Wait()
		}
		if got := up.Calls(); got != 2 {
			t.Errorf("upstream calls: got %d, want 2 (one prefetch)", got)
		}
		if got := c.Stats().Prefetches; got != 1 {
			t.Errorf("prefetches: got %d, want 1", got)
		}
	})
}

func TestServeStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, up, clk, qs := primed(t, Config{}, 60)

		clk.Advance(2 * time.Minute)
		up.set(failing)
		r := resolve(t, c, qs)
		if r.Source != wire.SourceStale || r.Mode.Fixed != 30 {
			t.Fatalf("Resolve with upstream down: got source %v mode %+v, want stale, fixed TTL 30", r.Source, r.Mode)
		}
		if got := ttls(served(t, r.Packed, qs, r.Mode)); !slices.Equal(got, []uint32{30}) {
			t.Errorf("stale TTLs: got %v, want [30]", got)
		}
		if got := c.Stats().Stale; got != 1 {
			t.Errorf("stale answers: got %d, want 1", got)
		}
		synctest.Wait() // the background refresh, failing too
		if got := up.Calls(); got != 3 {
			t.Errorf("upstream calls: got %d, want 3 (store, failure, background refresh)", got)
		}

		clk.Advance(10 * time.Second) // within the recheck window: no upstream query
		if r := resolve(t, c, qs); r.Source != wire.SourceStale {
			t.Errorf("Resolve within the recheck window: got source %v, want stale", r.Source)
		}
		if got := up.Calls(); got != 3 {
			t.Errorf("upstream calls within the recheck window: got %d, want 3", got)
		}

		clk.Advance(30 * time.Second) // past it: the upstream is asked, and answers in the background
		asked := 0                    // calls are sequential: the refresh starts after the failure
		up.set(func(req *dns.Msg) (*dns.Msg, error) {
			asked++
			if asked == 1 {
				return nil, errUpstream
			}
			return replyA(req, 60), nil
		})
		if r := resolve(t, c, qs); r.Source != wire.SourceStale {
			t.Errorf("Resolve past the recheck window, upstream failing: got source %v, want stale", r.Source)
		}
		synctest.Wait()
		if _, mode, ok := c.Lookup(&qs.q, clk.Now()); !ok || mode.Elapsed != 0 {
			t.Errorf("after the background refresh: got hit %v elapsed %d, want a fresh entry", ok, mode.Elapsed)
		}
		if got := c.Stats().Stale; got != 3 {
			t.Errorf("stale answers: got %d, want 3", got)
		}
		if got := failedEntries(c); got != 0 {
			t.Errorf("failure times kept after the entry was replaced: got %d, want 0", got)
		}
	})
}

// failedEntries counts the upstream failure times c's shards keep.
func failedEntries(c *Cache) int {
	n := 0
	for _, s := range c.shards {
		s.mu.Lock()
		n += len(s.failed)
		s.mu.Unlock()
	}
	return n
}

func TestStaleLimits(t *testing.T) {
	servfail := func(r *dns.Msg) (*dns.Msg, error) { return replyNeg(r, dns.RcodeServerFailure, 0, 0), nil }
	tests := []struct {
		name        string
		staleMaxAge time.Duration
		expiredFor  time.Duration
		fail        func(*dns.Msg) (*dns.Msg, error)
		source      wire.Source
		err         error
	}{
		{"just expired", 0, 0, failing, wire.SourceStale, nil},
		{"at StaleMaxAge", 0, time.Hour, failing, wire.SourceStale, nil},
		{"past StaleMaxAge", 0, time.Hour + time.Second, failing, 0, errUpstream},
		{"shorter StaleMaxAge", 10 * time.Minute, 11 * time.Minute, failing, 0, errUpstream},
		{"disabled", -1, time.Second, failing, 0, errUpstream},
		{"overloaded", 0, time.Second, func(*dns.Msg) (*dns.Msg, error) { return nil, fmt.Errorf("shed: %w", wire.ErrOverloaded) }, 0, wire.ErrOverloaded},
		{"upstream SERVFAIL", 0, time.Second, servfail, wire.SourceStale, nil},
		{"upstream SERVFAIL, nothing stale", 0, 2 * time.Hour, servfail, wire.SourceUpstream, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, up, clk, qs := primed(t, Config{StaleMaxAge: tt.staleMaxAge}, 60)
				clk.Advance(time.Minute + tt.expiredFor)
				up.set(tt.fail)
				r, err := c.Resolve(context.Background(), qs.key, time.Time{})
				if tt.err != nil {
					if !errors.Is(err, tt.err) {
						t.Errorf("Resolve: got %v, want an error wrapping %v", err, tt.err)
					}
					return
				}
				if err != nil || r.Source != tt.source {
					t.Fatalf("Resolve: got source %v, %v; want %v", r.Source, err, tt.source)
				}
				synctest.Wait()
				if tt.source == wire.SourceStale && r.Packed.Rcode() != dns.RcodeSuccess {
					t.Errorf("stale rcode: got %d, want the stored NOERROR", r.Packed.Rcode())
				}
			})
		})
	}
}

func TestStaleWhenCallerGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, up, clk, qs := primed(t, Config{}, 60)
		clk.Advance(2 * time.Minute)
		gate := make(chan struct{})
		up.mu.Lock()
		up.gate = gate
		up.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		result := resolveAsync(ctx, c, qs.key, time.Time{})
		synctest.Wait()
		cancel()
		r, err := result()
		if err != nil || r.Source != wire.SourceStale {
			t.Errorf("Resolve cancelled with a stale entry: got %v, %v; want a stale answer", r.Source, err)
		}
		close(gate) // the flight goes on and stores the answer
		synctest.Wait()
		if _, _, ok := c.Lookup(&qs.q, clk.Now()); !ok {
			t.Error("after the abandoned flight answered: got a miss, want a fresh entry")
		}
	})
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &fakeUpstream{reply: answerA(60), gate: make(chan struct{})}
		c := newTestCache(t, Config{}, up, newClock())
		qs := newQuestion(t, "example.org.", dns.TypeA)
		result := resolveAsync(context.Background(), c, qs.key, time.Time{})
		synctest.Wait()
		if cerr := c.Close(); cerr != nil {
			t.Fatalf("Close: %v", cerr)
		}
		_, err := result()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Resolve in flight at Close: got %v, want context.Canceled", err)
		}
		if _, err := c.Resolve(context.Background(), qs.key, time.Time{}); !errors.Is(err, ErrClosed) {
			t.Errorf("Resolve after Close: got %v, want ErrClosed", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: got %v, want nil", err)
		}
	})
}

func TestServfailRecachedNeverStale(t *testing.T) {
	clk := newClock()
	up := &fakeUpstream{reply: func(r *dns.Msg) (*dns.Msg, error) { return replyNeg(r, dns.RcodeServerFailure, 0, 0), nil }}
	c := newTestCache(t, Config{}, up, clk)
	qs := newQuestion(t, "example.org.", dns.TypeA)
	resolve(t, c, qs)
	clk.Advance(6 * time.Second)
	if r := resolve(t, c, qs); r.Source != wire.SourceUpstream || r.Packed.Rcode() != dns.RcodeServerFailure {
		t.Fatalf("Resolve after the SERVFAIL expired: got source %v rcode %d, want upstream SERVFAIL", r.Source, r.Packed.Rcode())
	}
	if _, _, ok := c.Lookup(&qs.q, clk.Now()); !ok {
		t.Error("second SERVFAIL over an expired one: got not cached, want cached")
	}
	clk.Advance(6 * time.Second)
	up.set(failing)
	if r, err := c.Resolve(context.Background(), qs.key, time.Time{}); !errors.Is(err, errUpstream) {
		t.Errorf("Resolve with upstream down and only an expired SERVFAIL: got %v, %v; want errUpstream", r.Source, err)
	}
	if got := c.Stats().Stale; got != 0 {
		t.Errorf("stale answers: got %d, want 0", got)
	}
}

// benchCache holds n positive entries (TTL 1h) and returns their questions.
func benchCache(b *testing.B, n int) (*Cache, []*question) {
	b.Helper()
	c := newTestCache(b, Config{}, &fakeUpstream{reply: answerA(3600)}, nil)
	qs := make([]*question, n)
	for i := range qs {
		qs[i] = newQuestion(b, fmt.Sprintf("host-%d.example.org.", i), dns.TypeA)
		resolve(b, c, qs[i])
	}
	return c, qs
}

// BenchmarkLookupHit is the server's hit path: Lookup plus AppendReply.
func BenchmarkLookupHit(b *testing.B) {
	c, qs := benchCache(b, 1)
	q := &qs[0].q
	buf := make([]byte, 0, 1232)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		p, mode, ok := c.Lookup(q, now)
		if !ok {
			b.Fatal("miss")
		}
		buf = p.AppendReply(buf[:0], q, mode, 1232)
	}
}

// BenchmarkLookupHitSpread is BenchmarkLookupHit over many warm names,
// drawn at random (fixed seed): 10,000, as make bench and bench/hitab.sh
// ask for, and 65,536, whose entries and list links are out of the CPU
// cache, as on a node whose clients ask for many names. (Not a cycle
// through them: that leaves each name's list neighbour the next one asked
// for, which a strict LRU's move then fetches early.)
func BenchmarkLookupHitSpread(b *testing.B) {
	for _, n := range []int{10_000, 1 << 16} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c, qs := benchCache(b, n)
			rng := rand.New(rand.NewPCG(1, 2))
			order := make([]uint16, 1<<20)
			for i := range order {
				order[i] = uint16(rng.IntN(n))
			}
			buf := make([]byte, 0, 1232)
			now := time.Now()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q := &qs[order[i&(len(order)-1)]].q
				p, mode, ok := c.Lookup(q, now)
				if !ok {
					b.Fatal("miss")
				}
				buf = p.AppendReply(buf[:0], q, mode, 1232)
				i++
			}
		})
	}
}

// BenchmarkLookupParallel spreads hits over 1024 names on every P.
func BenchmarkLookupParallel(b *testing.B) {
	c, qs := benchCache(b, 1024)
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 1232)
		i := 0
		for pb.Next() {
			q := &qs[i&1023].q
			p, mode, ok := c.Lookup(q, now)
			if !ok {
				b.Fatal("miss")
			}
			buf = p.AppendReply(buf[:0], q, mode, 1232)
			i++
		}
	})
}

// BenchmarkResolveMiss is the cache's share of a miss (flight, policy,
// store), with the cache kept from growing by Flush: the instant fake
// upstream hands over a copy of a reply packed once, scanned, as the
// forwarder hands over a copy of the datagram it read with its scan.
func BenchmarkResolveMiss(b *testing.B) {
	qs := newQuestion(b, "www.example.org.", dns.TypeA)
	m := replyA(qs.req, 300)
	m.Compress = true
	raw, err := m.Pack()
	if err != nil {
		b.Fatal(err)
	}
	c := newTestCache(b, Config{}, fixedUpstream(raw), nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.Flush("www.example.org.")
		if _, err := c.Resolve(ctx, qs.key, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestResolveGivesUpOnALongerFlight checks the deadline given beside the
// context: a caller that joins a flight which may run past that deadline
// stops waiting at it (no stale entry here: an error), while the flight
// goes on and stores its answer; a caller whose own flight it is waits for
// it, the flight being bounded by the same deadline.
func TestResolveGivesUpOnALongerFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		up := &fakeUpstream{reply: answerA(300), gate: gate}
		clk := newClock()
		c := newTestCache(t, Config{}, up, clk)
		qs := newQuestion(t, "example.org.", dns.TypeA)

		first := make(chan error, 1)
		go func() { // no deadline of its own: the flight runs to RefreshTimeout
			_, err := c.Resolve(context.Background(), qs.key, time.Time{})
			first <- err
		}()
		synctest.Wait()

		_, err := c.Resolve(context.Background(), qs.key, time.Now().Add(100*time.Millisecond))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("joined caller past its deadline: got %v, want context.DeadlineExceeded", err)
		}
		if got := up.Calls(); got != 1 {
			t.Errorf("upstream queries: got %d, want 1 (the second caller joins the flight)", got)
		}
		close(gate)
		if err := <-first; err != nil {
			t.Errorf("first caller: %v", err)
		}
		synctest.Wait()
		if _, _, ok := c.Lookup(&qs.q, clk.Now()); !ok {
			t.Error("after the flight answered: got a miss, want the stored answer")
		}
	})
}

// TestStoreFromBytesMatchesUnpacked checks that a reply stored from its
// bytes (wire.ScanUpstream, the miss path) is cached, counted and served
// as the same reply unpacked first (the path for replies in other shapes).
func TestStoreFromBytesMatchesUnpacked(t *testing.T) {
	withOPT := func(f func(*dns.Msg) (*dns.Msg, error)) func(*dns.Msg) (*dns.Msg, error) {
		return func(req *dns.Msg) (*dns.Msg, error) {
			m, err := f(req)
			if err == nil {
				m.SetEdns0(1232, false)
			}
			return m, err
		}
	}
	cname := func(req *dns.Msg) (*dns.Msg, error) {
		m := replyA(req, 40)
		m.Answer[0].Header().Name = "target.example."
		m.Answer = append([]dns.RR{&dns.CNAME{
			Hdr:    dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 600},
			Target: "target.example.",
		}}, m.Answer...)
		return m, nil
	}
	replies := map[string]func(*dns.Msg) (*dns.Msg, error){
		"positive":         answerA(300),
		"positive two TTL": func(req *dns.Msg) (*dns.Msg, error) { return replyA(req, 300, 20), nil },
		"positive OPT":     withOPT(answerA(90)),
		"CNAME":            cname,
		"NXDOMAIN":         func(req *dns.Msg) (*dns.Msg, error) { return replyNeg(req, dns.RcodeNameError, 900, 60), nil },
		"NODATA OPT":       withOPT(func(req *dns.Msg) (*dns.Msg, error) { return replyNeg(req, dns.RcodeSuccess, 30, 600), nil }),
		"NXDOMAIN no SOA":  func(req *dns.Msg) (*dns.Msg, error) { return replyNeg(req, dns.RcodeNameError, 0, 0), nil },
		"SERVFAIL":         func(req *dns.Msg) (*dns.Msg, error) { return replyNeg(req, dns.RcodeServerFailure, 0, 0), nil },
		"REFUSED":          func(req *dns.Msg) (*dns.Msg, error) { return replyNeg(req, dns.RcodeRefused, 0, 0), nil },
		"TTL 0":            func(req *dns.Msg) (*dns.Msg, error) { return replyA(req, 0), nil },
		"TTL above max":    answerA(1 << 30),
	}
	qs := newQuestion(t, "WWW.Example.", dns.TypeA)
	for name, reply := range replies {
		t.Run(name, func(t *testing.T) {
			type outcome struct {
				reply     string
				cached    bool
				cachedTTL []uint32
				counts    string
			}
			run := func(spelled bool) outcome {
				clk := newClock()
				c := newTestCache(t, Config{}, &fakeUpstream{reply: reply, spelled: spelled}, clk)
				r := resolve(t, c, qs)
				var o outcome
				o.reply = served(t, r.Packed, qs, r.Mode).String()
				clk.Advance(3 * time.Second)
				if p, mode, ok := c.Lookup(&qs.q, clk.Now()); ok {
					o.cached, o.cachedTTL = true, ttls(served(t, p, qs, mode))
				}
				for i := range c.met.uncacheable {
					o.counts += fmt.Sprint(c.met.uncacheable[i].Load(), " ")
				}
				for i := range c.met.inserts {
					o.counts += fmt.Sprint(c.met.inserts[i].Load(), " ")
				}
				return o
			}
			fromBytes, unpacked := run(false), run(true)
			// Names other than the owners may differ in case: miekg/dns
			// compresses them into the question, which takes the client's
			// case, where the upstream's bytes keep its own.
			if strings.EqualFold(fromBytes.reply, unpacked.reply) {
				fromBytes.reply = unpacked.reply
			}
			if !reflect.DeepEqual(fromBytes, unpacked) {
				t.Errorf("stored from bytes:\n%+v\nunpacked first:\n%+v", fromBytes, unpacked)
			}
		})
	}
}

// fixedUpstream is an Exchanger that answers every query with a copy of
// the same reply.
type fixedUpstream []byte

func (f fixedUpstream) Exchange(context.Context, wire.Key, time.Time) (wire.UpstreamReply, netip.AddrPort, error) {
	r, err := wire.ReadUpstream(bytes.Clone(f))
	return r, testServer, err
}

// TestUpstreamPanicFailsTheFlight checks that a panic in the upstream
// query ends its flight with ErrPanicked for every waiter, and that the
// cache goes on resolving.
func TestUpstreamPanicFailsTheFlight(t *testing.T) {
	up := &fakeUpstream{reply: func(*dns.Msg) (*dns.Msg, error) { panic("injected upstream panic") }}
	c := newTestCache(t, Config{}, up, newClock())
	qs := newQuestion(t, "example.org.", dns.TypeA)
	if _, err := c.Resolve(context.Background(), qs.key, time.Time{}); !errors.Is(err, ErrPanicked) {
		t.Fatalf("Resolve when the upstream query panics: got %v, want ErrPanicked", err)
	}
	up.set(answerA(60))
	if r := resolve(t, c, qs); r.Source != wire.SourceUpstream || r.Packed.Rcode() != dns.RcodeSuccess {
		t.Errorf("after the panic: got source %v rcode %d, want an upstream answer", r.Source, r.Packed.Rcode())
	}
}

// readUpstream is an Exchanger that hands over a reply as given: what
// the forwarder read of it, and nothing else.
type readUpstream struct{ r wire.UpstreamReply }

func (u readUpstream) Exchange(context.Context, wire.Key, time.Time) (wire.UpstreamReply, netip.AddrPort, error) {
	return u.r, testServer, nil
}

// TestStoresWhatTheForwarderRead checks that the cache takes a reply as
// the forwarder read it, without reading its bytes again: one handed over
// unpacked is stored from the message (its bytes withheld here), and one
// neither scanned nor unpacked is refused as a bad reply, not read.
func TestStoresWhatTheForwarderRead(t *testing.T) {
	qs := newQuestion(t, "example.org.", dns.TypeA)
	c := newTestCache(t, Config{}, readUpstream{wire.UpstreamReply{Msg: replyA(qs.req, 60)}}, newClock())
	if r := resolve(t, c, qs); r.Source != wire.SourceUpstream || len(served(t, r.Packed, qs, r.Mode).Answer) != 1 {
		t.Errorf("reply handed over unpacked: got source %v, want upstream with one answer", r.Source)
	}
	if r := resolve(t, c, qs); r.Source != wire.SourceCache {
		t.Errorf("second Resolve: got source %v, want cache", r.Source)
	}

	raw, err := replyA(qs.req, 60).Pack()
	if err != nil {
		t.Fatal(err)
	}
	c = newTestCache(t, Config{}, readUpstream{wire.UpstreamReply{Raw: raw}}, newClock())
	if _, err := c.Resolve(context.Background(), qs.key, time.Time{}); err == nil {
		t.Error("reply neither scanned nor unpacked: got no error")
	}
	if got := c.met.uncacheable[reasonBadReply].Load(); got != 1 {
		t.Errorf("uncacheable bad_reply: got %d, want 1", got)
	}
}
