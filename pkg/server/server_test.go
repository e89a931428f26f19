package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/internal/testnet"
	"github.com/nodecache/nodecache/pkg/wire"
)

// fakeResolver answers every name with one A record per name, optionally
// blocking until released, and counts calls.
type fakeResolver struct {
	calls   atomic.Int64
	block   chan struct{} // nil: never blocks
	records int           // A records per answer (default 1)
	err     error

	mu     sync.Mutex // guards cached
	cached map[string]*wire.Packed
}

func (f *fakeResolver) Lookup(q *wire.Query, _ time.Time) (*wire.Packed, wire.TTLMode, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.cached[string(q.LowerName())]
	return p, wire.TTLMode{}, ok
}

func (f *fakeResolver) Resolve(ctx context.Context, key wire.Key, by time.Time) (wire.Answer, error) {
	req := new(dns.Msg).SetQuestion(key.PresentationName(), key.Type)
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	f.calls.Add(1)
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return wire.Answer{}, ctx.Err()
		}
	}
	if f.err != nil {
		return wire.Answer{}, f.err
	}
	m := new(dns.Msg)
	m.SetReply(req)
	for i := 0; i < max(f.records, 1); i++ {
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
			A:   net.IPv4(192, 0, 2, byte(i+1)),
		})
	}
	p, err := wire.Pack(m)
	if err != nil {
		return wire.Answer{}, err
	}
	f.mu.Lock()
	if f.cached == nil {
		f.cached = map[string]*wire.Packed{}
	}
	f.cached[key.Name] = p
	f.mu.Unlock()
	return wire.Answer{Packed: p, Source: wire.SourceUpstream}, nil
}

// startServer runs a server on loopback ports and returns its address.
func startServer(t *testing.T, cfg Config, zone Zone, r Resolver) (*Server, netip.AddrPort) {
	t.Helper()
	return startServerDeps(t, cfg, Deps{Zone: zone, Resolver: r})
}

func startServerDeps(t *testing.T, cfg Config, deps Deps) (*Server, netip.AddrPort) {
	t.Helper()
	return startServerOn(t, netip.MustParseAddr("127.0.0.1"), 2, cfg, deps)
}

// startServerOn serves on ip at a free port (UDP and TCP), with perAddr UDP
// sockets, until the test ends.
func startServerOn(t *testing.T, ip netip.Addr, perAddr int, cfg Config, deps Deps) (*Server, netip.AddrPort) {
	t.Helper()
	return startServerLog(t, ip, perAddr, cfg, deps, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// startServerLog is startServerOn logging to log.
func startServerLog(t *testing.T, ip netip.Addr, perAddr int, cfg Config, deps Deps, log *slog.Logger) (*Server, netip.AddrPort) {
	t.Helper()
	return startServerReg(t, ip, perAddr, cfg, deps, prometheus.NewRegistry(), log)
}

// startServerReg is startServerLog registering its metrics on reg.
func startServerReg(t *testing.T, ip netip.Addr, perAddr int, cfg Config, deps Deps, reg prometheus.Registerer, log *slog.Logger) (*Server, netip.AddrPort) {
	t.Helper()
	network := "udp4"
	if ip.Is6() {
		network = "udp6"
	}
	var l *Listeners
	var addr netip.AddrPort
	for i := 0; ; i++ {
		pc, err := net.ListenPacket(network, netip.AddrPortFrom(ip, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		addr = pc.LocalAddr().(*net.UDPAddr).AddrPort()
		_ = pc.Close()
		if l, err = Listen(context.Background(), []netip.AddrPort{addr}, perAddr); err == nil {
			break
		} else if i > 10 {
			t.Fatalf("listening: %v", err)
		}
	}
	cfg.Addrs = []netip.AddrPort{addr}
	s := serveOn(t, l, cfg, deps, reg, log)
	return s, netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
}

// serveOn makes a server on reg and serves l until the test ends.
func serveOn(t *testing.T, l *Listeners, cfg Config, deps Deps, reg prometheus.Registerer, log *slog.Logger) *Server {
	t.Helper()
	s, err := New(cfg, deps, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// rawExchange sends pkt over UDP and returns the reply, or nil on timeout.
func rawExchange(t *testing.T, addr netip.AddrPort, pkt []byte, wait time.Duration) []byte {
	t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(pkt); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}

func mustPack(t *testing.T, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValidation(t *testing.T) {
	_, addr := startServer(t, Config{}, nil, &fakeResolver{})
	q := func(name string, qtype uint16, mod func(*dns.Msg)) []byte {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		if mod != nil {
			mod(m)
		}
		return mustPack(t, m)
	}
	tests := []struct {
		name      string
		pkt       []byte
		wantRcode int // -1: no reply at all
		check     func(t *testing.T, r *dns.Msg)
	}{
		{name: "ok", pkt: q("www.example.", dns.TypeA, nil), wantRcode: dns.RcodeSuccess},
		{name: "two questions", pkt: q("a.example.", dns.TypeA, func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }), wantRcode: dns.RcodeFormatError},
		{name: "no question", pkt: q("a.example.", dns.TypeA, func(m *dns.Msg) { m.Question = nil }), wantRcode: dns.RcodeFormatError},
		{name: "notify opcode", pkt: q("a.example.", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), wantRcode: dns.RcodeNotImplemented},
		{name: "update opcode", pkt: q("a.example.", dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }), wantRcode: dns.RcodeNotImplemented},
		{name: "edns version 1", pkt: q("a.example.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) }), wantRcode: dns.RcodeBadVers},
		{name: "class CH", pkt: q("version.bind.", dns.TypeTXT, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }), wantRcode: dns.RcodeRefused},
		{name: "class ANY", pkt: q("a.example.", dns.TypeA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassANY }), wantRcode: dns.RcodeRefused},
		{name: "axfr", pkt: q("example.", dns.TypeAXFR, nil), wantRcode: dns.RcodeRefused},
		{name: "any is RFC 8482", pkt: q("a.example.", dns.TypeANY, nil), wantRcode: dns.RcodeSuccess, check: func(t *testing.T, r *dns.Msg) {
			if len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeHINFO {
				t.Errorf("got answer %v, want one HINFO", r.Answer)
			}
		}},
		{name: "a response is not answered", pkt: q("a.example.", dns.TypeA, func(m *dns.Msg) { m.Response = true }), wantRcode: -1},
		{name: "short header is not answered", pkt: []byte{1, 2, 3}, wantRcode: -1},
		{name: "truncated question", pkt: q("a.example.", dns.TypeA, nil)[:14], wantRcode: dns.RcodeFormatError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wait := 2 * time.Second
			if tc.wantRcode < 0 {
				wait = 200 * time.Millisecond // proving a negative: a short wait is enough
			}
			raw := rawExchange(t, addr, tc.pkt, wait)
			if tc.wantRcode < 0 {
				if raw != nil {
					t.Fatalf("got a %d-byte reply, want none", len(raw))
				}
				return
			}
			if raw == nil {
				t.Fatal("got no reply")
			}
			var r dns.Msg
			if err := r.Unpack(raw); err != nil {
				t.Fatalf("unpacking reply: %v", err)
			}
			if r.Rcode != tc.wantRcode {
				t.Errorf("rcode: got %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.wantRcode])
			}
			if r.Id != dns.Id() && r.Id == 0 {
				t.Errorf("reply ID is zero")
			}
			if tc.check != nil {
				tc.check(t, &r)
			}
		})
	}
}

func TestTruncationToClientBuffer(t *testing.T) {
	_, addr := startServer(t, Config{}, nil, &fakeResolver{records: 60}) // 60 A records ≈ 1 KB
	for _, tc := range []struct {
		name   string
		edns   uint16
		wantTC bool
	}{
		{name: "no edns: 512", wantTC: true},
		{name: "edns 1232 fits", edns: 1232},
		{name: "edns 4096 capped at 1232 still fits", edns: 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &dns.Client{Net: "udp", UDPSize: tc.edns}
			m := new(dns.Msg)
			m.SetQuestion("big.example.", dns.TypeA)
			if tc.edns > 0 {
				m.SetEdns0(tc.edns, false)
			}
			r, _, err := c.Exchange(m, addr.String())
			if err != nil {
				t.Fatal(err)
			}
			if r.Truncated != tc.wantTC {
				t.Errorf("TC: got %v, want %v (%d answers)", r.Truncated, tc.wantTC, len(r.Answer))
			}
			if !tc.wantTC && len(r.Answer) != 60 {
				t.Errorf("answers: got %d, want 60", len(r.Answer))
			}
			if (r.IsEdns0() != nil) != (tc.edns > 0) {
				t.Errorf("OPT echoed: got %v, want %v", r.IsEdns0() != nil, tc.edns > 0)
			}
		})
	}
	// Over TCP the whole answer comes back.
	m := new(dns.Msg)
	m.SetQuestion("big.example.", dns.TypeA)
	r, _, err := (&dns.Client{Net: "tcp"}).Exchange(m, addr.String())
	if err != nil {
		t.Fatal(err)
	}
	if r.Truncated || len(r.Answer) != 60 {
		t.Errorf("tcp: got TC %v with %d answers, want the full 60", r.Truncated, len(r.Answer))
	}
}

func TestTCPPipelining(t *testing.T) {
	f := &fakeResolver{block: make(chan struct{})}
	_, addr := startServer(t, Config{}, nil, f)
	conn, err := dns.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const n = 8
	ids := map[uint16]string{}
	for i := 0; i < n; i++ {
		m := new(dns.Msg)
		name := "p" + string(rune('a'+i)) + ".example."
		m.SetQuestion(name, dns.TypeA)
		ids[m.Id] = name
		if err := conn.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	// All n queries must be in flight at once before any is answered.
	deadline := time.Now().Add(5 * time.Second)
	for f.calls.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := f.calls.Load(); got != n {
		t.Fatalf("in flight on one connection: got %d, want %d", got, n)
	}
	close(f.block)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := 0; i < n; i++ {
		r, err := conn.ReadMsg()
		if err != nil {
			t.Fatal(err)
		}
		name, ok := ids[r.Id]
		if !ok || !strings.EqualFold(r.Question[0].Name, name) {
			t.Errorf("reply id %d for %s does not match a query", r.Id, r.Question[0].Name)
		}
		delete(ids, r.Id)
	}
}

func TestInFlightCapRefuses(t *testing.T) {
	f := &fakeResolver{block: make(chan struct{})}
	defer close(f.block)
	_, addr := startServer(t, Config{MaxInFlight: 2}, nil, f)
	send := func(name string) *net.UDPConn {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		if _, err := c.Write(mustPack(t, m)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	send("one.example.")
	send("two.example.")
	deadline := time.Now().Add(5 * time.Second)
	for f.calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	c := send("three.example.")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("third query: %v", err)
	}
	var r dns.Msg
	if err := r.Unpack(buf[:n]); err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeRefused {
		t.Errorf("over the cap: got %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
}

func TestUpstreamFailureIsServfailOverloadIsRefused(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{err: context.DeadlineExceeded, want: dns.RcodeServerFailure},
		{err: wire.ErrOverloaded, want: dns.RcodeRefused},
	} {
		_, addr := startServer(t, Config{}, nil, &fakeResolver{err: tc.err})
		m := new(dns.Msg)
		m.SetQuestion("x.example.", dns.TypeA)
		r, _, err := new(dns.Client).Exchange(m, addr.String())
		if err != nil {
			t.Fatal(err)
		}
		if r.Rcode != tc.want {
			t.Errorf("%v: got %s, want %s", tc.err, dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.want])
		}
	}
}

func TestHasWireSuffix(t *testing.T) {
	pack := func(s string) []byte {
		b := make([]byte, 255)
		n, _ := dns.PackDomainName(s, b, 0, nil, false)
		return b[:n]
	}
	dom := pack("cluster.local.")
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"cluster.local.", true},
		{"a.svc.cluster.local.", true},
		{"xcluster.local.", false},
		{"cluster.local.example.", false},
		{"local.", false},
	} {
		if got := hasWireSuffix(pack(tc.name), dom); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func benchFast(b *testing.B, f *fakeResolver, z Zone, name string) {
	b.Helper()
	benchFastCfg(b, Config{}, f, z, name)
}

// benchFastCfg is benchFast for a server of cfg (its Addrs set here).
func benchFastCfg(b *testing.B, cfg Config, f *fakeResolver, z Zone, name string) {
	b.Helper()
	cfg.Addrs = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}
	s, err := New(cfg, Deps{Zone: z, Resolver: f},
		prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.SetEdns0(1232, false)
	pkt, _ := m.Pack()
	var q wire.Query
	out := make([]byte, 0, 4096)
	// Warm: the slow path fills the fake cache or the zone memo.
	_ = wire.Parse(pkt, &q)
	client := netip.MustParseAddr("10.0.0.1")
	clientAP := netip.AddrPortFrom(client, 40000)
	if _, _, ok := s.fast(pkt, &q, nil, client, out, 1232, time.Now()); !ok {
		s.slow(context.Background(), time.Now().Add(time.Minute), pkt, &q, client, out, 1232)
	}
	b.ReportAllocs()
	for b.Loop() {
		perr := wire.Parse(pkt, &q)
		reply, res, ok := s.fast(pkt, &q, perr, client, out[:0], 1232, time.Now())
		if !ok || len(reply) == 0 {
			b.Fatal("not answered on the fast path")
		}
		s.record(nil, edge{proto: protoUDP}, clientAP, &q, res, time.Now(), pkt, reply)
	}
}

// TestTCPAcceptedWhileStoppingIsServed checks that a connection accepted
// at the moment the server starts stopping (during a handover, say) is
// served under the drain deadline, not closed with the client's query in
// it. The accept hook holds the accept loop until Shutdown has begun.
func TestTCPAcceptedWhileStoppingIsServed(t *testing.T) {
	port, err := testnet.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
	l, err := Listen(context.Background(), []netip.AddrPort{addr}, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Addrs: []netip.AddrPort{addr}}, Deps{Resolver: &fakeResolver{}},
		prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	var once sync.Once
	s.afterAccept = func() {
		once.Do(func() {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				stopped <- s.Shutdown(ctx)
			}()
			for !s.isClosing() {
				time.Sleep(time.Millisecond)
			}
		})
	}
	if err := s.Serve(l); err != nil {
		t.Fatal(err)
	}
	conn, err := dns.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m := new(dns.Msg)
	m.SetQuestion("late.example.", dns.TypeA)
	if err := conn.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	r, err := conn.ReadMsg()
	if err != nil {
		t.Fatalf("query on a connection accepted as the server stopped: %v", err)
	}
	if r.Id != m.Id || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("got %v, want one A record", r)
	}
	if err := <-stopped; err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// discardQueue is a replyQueue that sends nothing.
type discardQueue struct{ out []byte }

func (d *discardQueue) slot() []byte                               { return d.out[:0] }
func (d *discardQueue) queue(reply []byte, _ netip.AddrPort) error { d.out = reply; return nil }
func (d *discardQueue) lateReplies() *lateQueue                    { return nil }

// BenchmarkServeDatagramHit is a cache hit as the UDP read loop serves it
// (serveDatagram: parse, the fast path, the reply queued, the accounting,
// and the per-query panic guard), without the socket.
func BenchmarkServeDatagramHit(b *testing.B) {
	f := &fakeResolver{}
	s, err := New(Config{Addrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}}, Deps{Resolver: f},
		prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	m.SetEdns0(1232, false)
	pkt, _ := m.Pack()
	key, _ := wire.KeyOf(m)
	if _, err := f.Resolve(context.Background(), key, time.Now().Add(time.Minute)); err != nil {
		b.Fatal(err)
	}
	client := netip.MustParseAddrPort("10.0.0.1:5353")
	var q wire.Query
	rq := &discardQueue{out: make([]byte, 0, 4096)}
	b.ReportAllocs()
	for b.Loop() {
		s.serveDatagram(nil, pkt, client, &q, time.Now(), rq, nil)
	}
	if len(rq.out) == 0 {
		b.Fatal("not answered")
	}
}
