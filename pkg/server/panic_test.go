package server

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodecache/nodecache/pkg/wire"
)

// panickyResolver panics on the fast path for names starting "fastboom",
// and on the slow path for names starting "slowboom".
type panickyResolver struct{ fakeResolver }

func (p *panickyResolver) Lookup(q *wire.Query, now time.Time) (*wire.Packed, wire.TTLMode, bool) {
	if bytes.HasPrefix(q.LowerName(), []byte("\x08fastboom")) {
		panic("injected fast-path panic")
	}
	return p.fakeResolver.Lookup(q, now)
}

func (p *panickyResolver) Resolve(ctx context.Context, key wire.Key, by time.Time) (wire.Answer, error) {
	if strings.HasPrefix(key.Name, "\x08slowboom") {
		panic("injected slow-path panic")
	}
	return p.fakeResolver.Resolve(ctx, key, by)
}

// panickyZone panics looking up boom.default.svc.cluster.local.
type panickyZone struct{ fakeZone }

func (z *panickyZone) Lookup(qname string, qtype uint16) ZoneAnswer {
	if qname == "boom.default.svc.cluster.local." {
		panic("injected zone panic")
	}
	return z.fakeZone.Lookup(qname, qtype)
}

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPanicAnswersServfail injects panics in the zone and the resolver,
// on the fast path (the UDP read loop, the TCP connection's goroutine) and
// the slow path (workers), over UDP and TCP: each query is answered
// SERVFAIL and counted, one line with the stack is logged, and the server
// goes on answering, on the same TCP connection too.
func TestPanicAnswersServfail(t *testing.T) {
	var logs lockedBuffer
	s, addr := startServerLog(t, netip.MustParseAddr("127.0.0.1"), 1, Config{},
		Deps{Zone: &panickyZone{}, Resolver: &panickyResolver{}}, slog.New(slog.NewTextHandler(&logs, nil)))
	tcp, err := dns.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	ask := func(proto, name string) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		if proto == "udp" {
			r, _, err := new(dns.Client).Exchange(m, addr.String())
			if err != nil {
				t.Fatalf("udp %s: %v", name, err)
			}
			return r
		}
		_ = tcp.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tcp.WriteMsg(m); err != nil {
			t.Fatalf("tcp %s: %v", name, err)
		}
		r, err := tcp.ReadMsg()
		if err != nil {
			t.Fatalf("tcp %s: %v", name, err)
		}
		return r
	}
	panics := 0
	for _, proto := range []string{"udp", "tcp"} {
		for _, name := range []string{"fastboom.example.", "slowboom.example.", "boom.default.svc.cluster.local."} {
			if r := ask(proto, name); r.Rcode != dns.RcodeServerFailure {
				t.Errorf("%s %s: got %s, want SERVFAIL", proto, name, dns.RcodeToString[r.Rcode])
			}
			panics++
			if r := ask(proto, "fine.example."); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Errorf("%s after a panic: got %s with %d answers, want NOERROR with one", proto, dns.RcodeToString[r.Rcode], len(r.Answer))
			}
		}
	}
	if got := testutil.ToFloat64(s.metrics.panics); got != float64(panics) {
		t.Errorf("nodecache_server_panics_total: got %v, want %d", got, panics)
	}
	out := logs.String()
	if n := strings.Count(out, "recovered from a panic"); n != 1 {
		t.Errorf("panic log lines: got %d, want 1 (rate-limited):\n%s", n, out)
	}
	if !strings.Contains(out, "injected fast-path panic") || !strings.Contains(out, "goroutine ") {
		t.Errorf("panic log line lacks the panic value or the stack:\n%s", out)
	}
}

// TestPanicInBatch sends bursts over one socket, so that the batched loop
// reads several datagrams at once, with fast-path panics among them: the
// panicking queries are answered SERVFAIL, every other query of the burst,
// before and after them, NOERROR, and each panic is counted.
func TestPanicInBatch(t *testing.T) {
	s, addr := startServerOn(t, netip.MustParseAddr("127.0.0.1"), 1, Config{},
		Deps{Resolver: &panickyResolver{}})
	c, err := net.Dial("udp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const bursts, per = 10, 20
	name := func(id int) string {
		if id%per == 7 || id%per == 13 {
			return "fastboom.example."
		}
		return "fine.example."
	}
	buf := make([]byte, 4096)
	for i := 0; i < bursts; i++ {
		for j := 0; j < per; j++ {
			m := new(dns.Msg)
			m.SetQuestion(name(j), dns.TypeA)
			m.Id = uint16(i*per + j)
			pkt, _ := m.Pack()
			if _, err := c.Write(pkt); err != nil {
				t.Fatal(err)
			}
		}
		for j := 0; j < per; j++ {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := c.Read(buf)
			if err != nil {
				t.Fatalf("burst %d: %d of %d replies: %v", i, j, per, err)
			}
			r := new(dns.Msg)
			if err := r.Unpack(buf[:n]); err != nil {
				t.Fatal(err)
			}
			want := dns.RcodeSuccess
			if name(int(r.Id)) != "fine.example." {
				want = dns.RcodeServerFailure
			}
			if r.Rcode != want {
				t.Errorf("query %d (%s): %s, want %s", r.Id, name(int(r.Id)), dns.RcodeToString[r.Rcode], dns.RcodeToString[want])
			}
		}
	}
	if got := testutil.ToFloat64(s.metrics.panics); got != 2*bursts {
		t.Errorf("nodecache_server_panics_total: %v, want %d", got, 2*bursts)
	}
}

// panickyObserver panics when shown a query for recordboom.example.
type panickyObserver struct{}

func (panickyObserver) Observe(_ netip.Addr, q *wire.Query, _ Result, _ time.Duration) {
	if bytes.HasPrefix(q.LowerName(), []byte("\x0arecordboom")) {
		panic("injected record panic")
	}
}

// TestPanicInRecordOneReply: a panic while a query is recorded (here in
// the Observer), on the slow path (the first query, a miss) and in the
// batched loop (the second, a hit), gets that query one reply, SERVFAIL,
// not its answer and a SERVFAIL too. The replies on one socket come back
// in order, so a second reply to a query shows up in place of the next
// query's.
func TestPanicInRecordOneReply(t *testing.T) {
	s, addr := startServerOn(t, netip.MustParseAddr("127.0.0.1"), 1, Config{},
		Deps{Resolver: &fakeResolver{}, Observer: panickyObserver{}})
	c, err := net.Dial("udp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4096)
	for i, want := range []struct {
		name  string
		rcode int
	}{
		{"recordboom.example.", dns.RcodeServerFailure},
		{"recordboom.example.", dns.RcodeServerFailure},
		{"fine.example.", dns.RcodeSuccess},
	} {
		m := new(dns.Msg)
		m.SetQuestion(want.name, dns.TypeA)
		m.Id = uint16(i + 1)
		if _, err := c.Write(mustPack(t, m)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("query %d: %v", m.Id, err)
		}
		r := new(dns.Msg)
		if err := r.Unpack(buf[:n]); err != nil {
			t.Fatal(err)
		}
		if r.Id != m.Id || r.Rcode != want.rcode {
			t.Fatalf("reply to query %d (%s): got id %d %s, want id %d %s", m.Id, want.name,
				r.Id, dns.RcodeToString[r.Rcode], m.Id, dns.RcodeToString[want.rcode])
		}
	}
	if got := testutil.ToFloat64(s.metrics.panics); got != 2 {
		t.Errorf("nodecache_server_panics_total: %v, want 2", got)
	}
}
