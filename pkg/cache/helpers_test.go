package cache

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// t0 is the test clock's start, on a whole second.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// clock is an injected clock that moves only when told.
type clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func newClock() *clock { return &clock{now: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var errUpstream = errors.New("upstream down")

var testServer = netip.MustParseAddrPort("192.0.2.53:53")

// fakeUpstream is an Exchanger that counts calls and answers with reply,
// after waiting on gate when gate is non-nil. It packs the reply with name
// compression, as resolvers do, so that the cache stores it from its
// bytes; with spelled, names are written out in full, and the reply
// reaches the cache unpacked instead (wire.ScanUpstream refuses an owner name
// equal to the question that is not a pointer to it).
type fakeUpstream struct {
	mu      sync.Mutex // guards following
	calls   int
	reply   func(req *dns.Msg) (*dns.Msg, error)
	gate    chan struct{}
	spelled bool
}

func (f *fakeUpstream) Exchange(ctx context.Context, key wire.Key, by time.Time) (wire.UpstreamReply, netip.AddrPort, error) {
	m, err := f.exchange(ctx, request(key), by)
	if err != nil {
		return wire.UpstreamReply{}, netip.AddrPort{}, err
	}
	m.Compress = !f.spelled
	raw, err := m.Pack()
	if err != nil {
		return wire.UpstreamReply{}, netip.AddrPort{}, err
	}
	r, err := wire.ReadUpstream(raw)
	return r, testServer, err
}

// request is the query the upstream is asked for key, as a dns.Msg (what
// wire.Key.AppendRequest writes; pkg/wire checks the two agree).
func request(key wire.Key) *dns.Msg {
	m := new(dns.Msg)
	m.RecursionDesired = true
	m.CheckingDisabled = key.CD
	m.Question = []dns.Question{{Name: key.PresentationName(), Qtype: key.Type, Qclass: key.Class}}
	m.SetEdns0(wire.DefaultUDPSize, key.DO)
	return m
}

func (f *fakeUpstream) exchange(ctx context.Context, req *dns.Msg, by time.Time) (*dns.Msg, error) {
	ctx, cancel := withDeadline(ctx, by)
	defer cancel()
	f.mu.Lock()
	f.calls++
	reply, gate := f.reply, f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return reply(req)
}

func (f *fakeUpstream) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeUpstream) set(reply func(*dns.Msg) (*dns.Msg, error)) {
	f.mu.Lock()
	f.reply = reply
	f.mu.Unlock()
}

// answerA replies with one A record of the given TTL.
func answerA(ttl uint32) func(*dns.Msg) (*dns.Msg, error) {
	return func(req *dns.Msg) (*dns.Msg, error) {
		return replyA(req, ttl), nil
	}
}

func failing(*dns.Msg) (*dns.Msg, error) { return nil, errUpstream }

func replyA(req *dns.Msg, ttls ...uint32) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	for i, ttl := range ttls {
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl},
			A:   netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}).AsSlice(),
		})
	}
	return m
}

// replyNeg replies with rcode and, when soaTTL is non-zero, an SOA.
func replyNeg(req *dns.Msg, rcode int, soaTTL, minTTL uint32) *dns.Msg {
	m := new(dns.Msg)
	m.SetRcode(req, rcode)
	if soaTTL > 0 {
		m.Ns = []dns.RR{&dns.SOA{
			Hdr: dns.RR_Header{Name: "org.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: soaTTL},
			Ns:  "a0.org.", Mbox: "noc.org.", Serial: 1, Refresh: 1800, Retry: 900, Expire: 604800, Minttl: minTTL,
		}}
	}
	return m
}

// question is a parsed query; it keeps the packet Query aliases.
type question struct {
	pkt []byte
	q   wire.Query
	req *dns.Msg
	key wire.Key
}

func newQuestion(tb testing.TB, name string, typ uint16) *question {
	tb.Helper()
	req := new(dns.Msg)
	req.SetQuestion(name, typ)
	pkt, err := req.Pack()
	if err != nil {
		tb.Fatalf("packing query: %v", err)
	}
	qs := &question{pkt: pkt, req: req}
	if err := wire.Parse(qs.pkt, &qs.q); err != nil {
		tb.Fatalf("parsing query: %v", err)
	}
	qs.key = qs.q.Key()
	return qs
}

func newTestCache(tb testing.TB, cfg Config, up Exchanger, clk *clock) *Cache {
	tb.Helper()
	if clk != nil {
		cfg.Now = clk.Now
	}
	c, err := New(cfg, up, nil, nil)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

func resolve(tb testing.TB, c *Cache, qs *question) wire.Answer {
	tb.Helper()
	r, err := c.Resolve(context.Background(), qs.key, time.Time{})
	if err != nil {
		tb.Fatalf("Resolve(%s): %v", qs.key.PresentationName(), err)
	}
	return r
}

// served returns the reply a client would get for p, unpacked.
func served(tb testing.TB, p *wire.Packed, qs *question, mode wire.TTLMode) *dns.Msg {
	tb.Helper()
	out := p.AppendReply(nil, &qs.q, mode, 65535)
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil {
		tb.Fatalf("unpacking served reply: %v", err)
	}
	return m
}

// ttls lists the TTLs of every record a client would see.
func ttls(m *dns.Msg) []uint32 {
	var out []uint32
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if rr.Header().Rrtype != dns.TypeOPT {
				out = append(out, rr.Header().Ttl)
			}
		}
	}
	return out
}

// primed returns a cache whose upstream answered example.org A once with
// TTL ttl, stored at t0.
func primed(tb testing.TB, cfg Config, ttl uint32) (*Cache, *fakeUpstream, *clock, *question) {
	tb.Helper()
	clk := newClock()
	up := &fakeUpstream{reply: answerA(ttl)}
	c := newTestCache(tb, cfg, up, clk)
	qs := newQuestion(tb, "example.org.", dns.TypeA)
	resolve(tb, c, qs)
	return c, up, clk, qs
}

// withDeadline is ctx bounded by by, for the fake Exchangers (zero: ctx).
func withDeadline(ctx context.Context, by time.Time) (context.Context, context.CancelFunc) {
	if by.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, by)
}

// resolveAsync starts c.Resolve(ctx, key, by) in a goroutine of its own;
// the function it returns waits for its result.
func resolveAsync(ctx context.Context, c *Cache, key wire.Key, by time.Time) func() (wire.Answer, error) {
	var r wire.Answer
	var err error
	done := make(chan struct{})
	go func() { r, err = c.Resolve(ctx, key, by); close(done) }()
	return func() (wire.Answer, error) { <-done; return r, err }
}
