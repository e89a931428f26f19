package upstream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodecache/nodecache/pkg/wire"
)

func TestFailedUpstreamFailsOverToNext(t *testing.T) {
	tests := []struct {
		name     string
		dead     func(t *testing.T) (addr netip.AddrPort, queries func() int64)
		wantKind string
	}{
		{"silent", func(t *testing.T) (netip.AddrPort, func() int64) {
			ts := startServer(t, silent)
			return ts.addr, ts.udpQueries.Load
		}, kindTimeout},
		{"closed port", func(t *testing.T) (netip.AddrPort, func() int64) {
			pc, ln := listenPair(t)
			addr := pc.LocalAddr().(*net.UDPAddr).AddrPort()
			_, _ = pc.Close(), ln.Close()
			return addr, nil // nothing listens to count queries
		}, kindConnRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dead, deadQueries := tt.dead(t)
			alive := startServer(t, answerA("192.0.2.2"))
			cfg := testConfig(alive)
			cfg.Servers = []netip.AddrPort{dead, alive.addr}
			cfg.TryTimeout = 250 * time.Millisecond
			f, _ := newTestForwarder(t, cfg, hooks{})

			got, from := exchangeA(t, f, "www.example.")
			if got != "192.0.2.2" || from != alive.addr {
				t.Errorf("got %s from %v, want 192.0.2.2 from %v", got, from, alive.addr)
			}
			if deadQueries != nil {
				if got := deadQueries(); got != 1 {
					t.Errorf("queries at the failed server: got %d, want 1", got)
				}
			}
			if got := counterValue(t, f, "errors", dead.String(), tt.wantKind); got != 1 {
				t.Errorf("%s errors of the failed server: got %v, want 1", tt.wantKind, got)
			}
			if st := f.Status()[0]; st.ConsecutiveFails != 1 {
				t.Errorf("consecutive fails: got %d, want 1", st.ConsecutiveFails)
			}
		})
	}
}

func TestAllSilentReturnsErrNoAnswer(t *testing.T) {
	a, b := startServer(t, silent), startServer(t, silent)
	cfg := testConfig(a, b)
	cfg.TryTimeout = 20 * time.Millisecond
	cfg.Deadline = time.Second
	f, _ := newTestForwarder(t, cfg, hooks{})

	_, _, err := exchange(context.Background(), f, query("www.example.", dns.TypeA))
	if !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("got %v, want ErrNoAnswer", err)
	}
	if got := attemptKind(err); got != kindTimeout {
		t.Errorf("last attempt kind: got %q, want %q (err %v)", got, kindTimeout, err)
	}
	// Two passes over both servers fit in the deadline.
	for _, s := range []*testServer{a, b} {
		if got := s.udpQueries.Load(); got != maxPasses {
			t.Errorf("queries at %v: got %d, want %d", s.addr, got, maxPasses)
		}
	}
}

func TestOverallDeadlineEndsExchange(t *testing.T) {
	a := startServer(t, silent)
	cfg := testConfig(a)
	cfg.TryTimeout = time.Hour
	cfg.Deadline = 30 * time.Millisecond
	f, _ := newTestForwarder(t, cfg, hooks{})

	_, _, err := exchange(context.Background(), f, query("www.example.", dns.TypeA))
	if !errors.Is(err, ErrNoAnswer) || attemptKind(err) != kindTimeout {
		t.Fatalf("got %v, want ErrNoAnswer after a timeout", err)
	}
	if got := a.udpQueries.Load(); got != 1 {
		t.Errorf("queries: got %d, want 1 (the deadline leaves no second try)", got)
	}
}

// TestExchangeDeadline checks that the deadline given beside the context
// ends the query as a context deadline would (a timeout, the server's
// fault), and that the context still cancels.
func TestExchangeDeadline(t *testing.T) {
	a := startServer(t, silent)
	cfg := testConfig(a)
	cfg.TryTimeout, cfg.Deadline = time.Hour, time.Hour
	f, _ := newTestForwarder(t, cfg, hooks{})

	_, _, err := exchangeBy(context.Background(), f, query("www.example.", dns.TypeA), time.Now().Add(20*time.Millisecond))
	if !errors.Is(err, ErrNoAnswer) || attemptKind(err) != kindTimeout {
		t.Fatalf("got %v, want ErrNoAnswer after a timeout", err)
	}
	if got := a.udpQueries.Load(); got != 1 {
		t.Errorf("queries: got %d, want 1 (the deadline leaves no second try)", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = exchangeBy(ctx, f, query("www.example.", dns.TypeA), time.Now().Add(time.Hour))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: got %v, want it to wrap context.Canceled", err)
	}
}

func TestCallerContextEndsExchange(t *testing.T) {
	tests := []struct {
		name      string
		ctx       func(seen <-chan struct{}) (context.Context, context.CancelFunc)
		wantKind  string
		wantFails int64 // the caller's deadline is the server's fault, a cancel is not
	}{
		{"cancel", func(seen <-chan struct{}) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-seen; cancel() }()
			return ctx, cancel
		}, kindCanceled, 0},
		{"deadline", func(<-chan struct{}) (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Millisecond)
		}, kindTimeout, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := make(chan struct{}, 1)
			a := startServer(t, func(dns.ResponseWriter, *dns.Msg) {
				select {
				case seen <- struct{}{}:
				default:
				}
			})
			cfg := testConfig(a)
			cfg.TryTimeout, cfg.Deadline = time.Hour, time.Hour
			f, _ := newTestForwarder(t, cfg, hooks{})

			ctx, cancel := tt.ctx(seen)
			defer cancel()
			_, _, err := exchange(ctx, f, query("www.example.", dns.TypeA))
			if !errors.Is(err, ErrNoAnswer) || attemptKind(err) != tt.wantKind {
				t.Fatalf("got %v, want ErrNoAnswer after a %s attempt", err, tt.wantKind)
			}
			if tt.wantKind == kindCanceled && !errors.Is(err, context.Canceled) {
				t.Errorf("got %v, want it to wrap context.Canceled", err)
			}
			if got := a.udpQueries.Load(); got != 1 {
				t.Errorf("queries: got %d, want 1", got)
			}
			if st := f.Status()[0]; st.ConsecutiveFails != tt.wantFails {
				t.Errorf("consecutive fails: got %d, want %d", st.ConsecutiveFails, tt.wantFails)
			}
			// The socket of an abandoned query is closed, never pooled.
			checkUDPIdle(t, f.all[0], 0)
		})
	}
}

func TestInFlightCapReturnsErrOverloaded(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		close(entered)
		<-release
		answerA("192.0.2.6")(w, r)
	})
	cfg := testConfig(ts)
	cfg.MaxInFlight = 1
	cfg.TryTimeout, cfg.Deadline = time.Hour, time.Hour
	f, _ := newTestForwarder(t, cfg, hooks{})

	first := make(chan error, 1)
	go func() {
		_, _, err := exchange(context.Background(), f, query("a.example.", dns.TypeA))
		first <- err
	}()
	<-entered
	_, _, err := exchange(context.Background(), f, query("b.example.", dns.TypeA))
	if !errors.Is(err, ErrOverloaded) {
		t.Errorf("second query: got %v, want ErrOverloaded", err)
	}
	if !errors.Is(err, wire.ErrOverloaded) || err.Error() != "upstream: too many queries in flight" {
		t.Errorf("second query: got %q, want the upstream's message over wire.ErrOverloaded, which the cache and server know", err)
	}
	if got := testutil.ToFloat64(f.m.overloaded); got != 1 {
		t.Errorf("overloaded counter: got %v, want 1", got)
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("first query: got %v, want success", err)
	}
}

func TestRefusedTriesNextServer(t *testing.T) {
	refuse := func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeRefused)
		_ = w.WriteMsg(m)
	}
	refuser := startServer(t, refuse)
	good := startServer(t, answerA("192.0.2.10"))
	f, _ := newTestForwarder(t, testConfig(refuser, good), hooks{})
	if got, from := exchangeA(t, f, "www.example."); got != "192.0.2.10" || from != good.addr {
		t.Errorf("got %s from %v, want 192.0.2.10 from %v", got, from, good.addr)
	}

	lone, _ := newTestForwarder(t, testConfig(startServer(t, refuse)), hooks{})
	resp, _, err := exchange(context.Background(), lone, query("www.example.", dns.TypeA))
	if err != nil || resp.Rcode != dns.RcodeRefused {
		t.Errorf("only a refusing server: got %v, %v; want its REFUSED reply", resp, err)
	}
	if st := lone.Status()[0]; !st.Up {
		t.Errorf("refusing server status: got %+v, want up (it answers)", st)
	}
}

func TestStubDomainRouting(t *testing.T) {
	def := startServer(t, answerA("192.0.2.31"))
	corp := startServer(t, answerA("192.0.2.32"))
	lab := startServer(t, answerA("192.0.2.33"))
	cfg := testConfig(def)
	cfg.StubDomains = map[string][]netip.AddrPort{
		"corp.example.":     {corp.addr},
		"lab.corp.example.": {lab.addr},
	}
	f, _ := newTestForwarder(t, cfg, hooks{})
	tests := []struct{ name, want string }{
		{"www.example.", "192.0.2.31"},
		{"corp.example.", "192.0.2.32"},
		{"host.CORP.Example.", "192.0.2.32"},
		{"a.b.corp.example.", "192.0.2.32"},
		{"lab.corp.example.", "192.0.2.33"},
		{"x.lab.corp.example.", "192.0.2.33"},
		{"notcorp.example.", "192.0.2.31"},
		{"corp.example.org.", "192.0.2.31"},
	}
	for _, tt := range tests {
		if got, _ := exchangeA(t, f, tt.name); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
	if got, want := len(f.Status()), 3; got != want {
		t.Errorf("status entries: got %d, want %d", got, want)
	}
}

// BenchmarkExchangeUDP measures one forwarded query over loopback UDP,
// server included (go test -bench Exchange -benchmem ./pkg/upstream/).
func BenchmarkExchangeUDP(b *testing.B) { benchExchange(b, answerA("192.0.2.1"), false) }

// BenchmarkExchangeUDPDeadline is BenchmarkExchangeUDP with a deadline on
// each query's context, as the cache sets one: the cancel watch runs.
func BenchmarkExchangeUDPDeadline(b *testing.B) { benchExchange(b, answerA("192.0.2.1"), true) }

// BenchmarkExchangeTCP measures a query that is truncated over UDP and
// retried on a pooled TCP connection.
func BenchmarkExchangeTCP(b *testing.B) { benchExchange(b, truncateUDP("192.0.2.1"), false) }

// BenchmarkExchangeUDPReuse measures the cost of moving to a new source
// port (a new connected socket) every n queries, the trade-off behind
// udpMaxUses: n=1 is a fresh port per query.
func BenchmarkExchangeUDPReuse(b *testing.B) {
	for _, n := range []int{1, 4, 16, 64, math.MaxInt} {
		label := fmt.Sprint(n)
		if n == math.MaxInt {
			label = "max" // rotated by its 2 s age alone
		}
		b.Run("uses="+label, func(b *testing.B) {
			ts := startServer(b, answerA("192.0.2.1"))
			cfg := testConfig(ts)
			cfg.udpMaxUses = n
			f, _ := newTestForwarder(b, cfg, hooks{})
			key := benchKey(b)
			b.ReportAllocs()
			for b.Loop() {
				r, _, err := f.Exchange(context.Background(), key, time.Time{})
				if err != nil {
					b.Fatal(err)
				}
				r.Release()
			}
		})
	}
}

// benchExchange forwards one query a loop to a loopback server answering
// with h, under a fresh 5s context deadline per query if withDeadline.
func benchExchange(b *testing.B, h dns.HandlerFunc, withDeadline bool) {
	ts := startServer(b, h)
	f, _ := newTestForwarder(b, testConfig(ts), hooks{})
	key := benchKey(b)
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if withDeadline {
			ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		}
		r, _, err := f.Exchange(ctx, key, time.Time{})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		r.Release() // as the cache does once it has stored the reply
	}
}

// benchKey is the key the benchmarks ask for: www.example. A, as the cache
// asks (the reply read once, not unpacked into a dns.Msg).
func benchKey(b *testing.B) wire.Key {
	b.Helper()
	key, err := wire.NewKey("www.example.", dns.TypeA, dns.ClassINET, false, false)
	if err != nil {
		b.Fatal(err)
	}
	return key
}

// BenchmarkParseReplySpoofed measures the cost of ignoring a datagram with
// a wrong ID, which must not allocate.
func BenchmarkParseReplySpoofed(b *testing.B) {
	r := query("www.example.", dns.TypeA)
	msg, err := replyA(r, "192.0.2.1").Pack()
	if err != nil {
		b.Fatal(err)
	}
	req, err := r.Pack()
	if err != nil {
		b.Fatal(err)
	}
	var got wire.UpstreamReply
	b.ReportAllocs()
	for b.Loop() {
		if v := parseReply(msg, r.Id+1, req, &got); v != replySpoofed {
			b.Fatalf("verdict: got %d, want spoofed", v)
		}
	}
}
