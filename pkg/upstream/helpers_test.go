package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodecache/nodecache/pkg/wire"
)

// testServer is a loopback DNS server with its own handler on UDP and TCP
// of the same port. Counters exclude the ". NS" health probes.
type testServer struct {
	addr       netip.AddrPort
	udpQueries atomic.Int64
	tcpQueries atomic.Int64
	probes     atomic.Int64
	accepts    atomic.Int64 // TCP connections accepted
}

// caseEcho writes replies with the question name in the case it was sent
// (randomizeCase), as a server that echoes case does. Write passes raw
// bytes through unchanged.
type caseEcho struct {
	dns.ResponseWriter
	sent string
}

func (c caseEcho) WriteMsg(m *dns.Msg) error {
	if len(m.Question) == 1 && strings.EqualFold(m.Question[0].Name, c.sent) {
		m.Question[0].Name = c.sent
	}
	return c.ResponseWriter.WriteMsg(m)
}

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// startServer serves h on 127.0.0.1 over UDP and TCP on one port.
func startServer(tb testing.TB, h dns.HandlerFunc) *testServer {
	tb.Helper()
	return startServerWith(tb, h, nil)
}

// startServerWith is startServer with serveTCP, when non-nil, serving the
// TCP listener instead of miekg/dns; it must return when the listener
// closes.
func startServerWith(tb testing.TB, h dns.HandlerFunc, serveTCP func(net.Listener)) *testServer {
	tb.Helper()
	ts := &testServer{}
	pc, ln := listenPair(tb)
	ts.addr = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	counted := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		switch {
		case len(r.Question) == 1 && r.Question[0].Name == "." && r.Question[0].Qtype == dns.TypeNS:
			ts.probes.Add(1)
		case w.LocalAddr().Network() == "tcp":
			ts.tcpQueries.Add(1)
		default:
			ts.udpQueries.Add(1)
		}
		if len(r.Question) == 1 { // handlers see the name lowercased; replies echo the case sent, as servers do
			sent := r.Question[0].Name
			r.Question[0].Name = strings.ToLower(sent)
			w = caseEcho{ResponseWriter: w, sent: sent}
		}
		h(w, r)
	})
	servers := []*dns.Server{{PacketConn: pc, Handler: counted}}
	cl := countingListener{Listener: ln, n: &ts.accepts}
	if serveTCP == nil {
		servers = append(servers, &dns.Server{Listener: cl, Handler: counted})
	} else {
		done := make(chan struct{})
		go func() { defer close(done); serveTCP(cl) }()
		tb.Cleanup(func() { _ = ln.Close(); <-done })
	}
	for _, srv := range servers {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
		tb.Cleanup(func() { _ = srv.Shutdown() })
	}
	return ts
}

// listenPair listens on UDP and TCP of the same loopback port.
func listenPair(tb testing.TB) (net.PacketConn, net.Listener) {
	tb.Helper()
	for i := 0; ; i++ {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("listening on udp: %v", err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln
		}
		_ = pc.Close()
		if i == 20 {
			tb.Fatalf("listening on tcp next to udp: %v", err)
		}
	}
}

// answerA answers every query with one A record carrying ip.
func answerA(ip string) dns.HandlerFunc {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		_ = w.WriteMsg(replyA(r, ip))
	}
}

func replyA(r *dns.Msg, ip string) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Answer = []dns.RR{&dns.A{
		Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A:   net.ParseIP(ip),
	}}
	return m
}

// silent never answers.
func silent(dns.ResponseWriter, *dns.Msg) {}

// truncateUDP answers with TC over UDP and with ip over TCP.
func truncateUDP(ip string) dns.HandlerFunc {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		if w.LocalAddr().Network() == "tcp" {
			_ = w.WriteMsg(replyA(r, ip))
			return
		}
		m := new(dns.Msg)
		m.SetReply(r)
		m.Truncated = true
		_ = w.WriteMsg(m)
	}
}

// testConfig returns a Config with short timeouts for servers.
func testConfig(servers ...*testServer) Config {
	cfg := Config{
		Policy:        PolicySequential,
		TryTimeout:    time.Second,
		Deadline:      5 * time.Second,
		ProbeInterval: 5 * time.Millisecond,
	}
	for _, s := range servers {
		cfg.Servers = append(cfg.Servers, s.addr)
	}
	return cfg
}

// newTestForwarder builds a Forwarder on a fresh registry, closed at the
// end of the test.
func newTestForwarder(tb testing.TB, cfg Config, h hooks) (*Forwarder, *prometheus.Registry) {
	tb.Helper()
	reg := prometheus.NewRegistry()
	f, err := newForwarder(cfg, reg, slog.New(slog.DiscardHandler), h)
	if err != nil {
		tb.Fatalf("newForwarder: %v", err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return f, reg
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

// exchange asks f for the entry of req's key (its name lowercased, its
// type, class, DO and CD) and unpacks the reply, after checking that it
// comes read once: scanned, or unpacked, not both.
func exchange(ctx context.Context, f *Forwarder, req *dns.Msg) (*dns.Msg, netip.AddrPort, error) {
	return exchangeBy(ctx, f, req, time.Time{})
}

// exchangeBy is exchange with a deadline beside ctx.
func exchangeBy(ctx context.Context, f *Forwarder, req *dns.Msg, by time.Time) (*dns.Msg, netip.AddrPort, error) {
	key, err := wire.KeyOf(req)
	if err != nil {
		return nil, netip.AddrPort{}, err
	}
	r, from, err := f.Exchange(ctx, key, by)
	if err != nil {
		return nil, from, err
	}
	if r.Scanned == (r.Msg != nil) {
		return nil, from, fmt.Errorf("reply scanned %t, unpacked %t: want exactly one", r.Scanned, r.Msg != nil)
	}
	resp := new(dns.Msg)
	if err := resp.Unpack(r.Raw); err != nil {
		return nil, from, fmt.Errorf("unpacking the reply of %s: %w", from, err)
	}
	if resp.Rcode != r.Rcode() {
		return nil, from, fmt.Errorf("reply rcode %d, read as %d", resp.Rcode, r.Rcode())
	}
	return resp, from, nil
}

// exchangeA runs one A query for name and returns the address answered.
func exchangeA(tb testing.TB, f *Forwarder, name string) (string, netip.AddrPort) {
	tb.Helper()
	resp, from, err := exchange(context.Background(), f, query(name, dns.TypeA))
	if err != nil {
		tb.Fatalf("Exchange(%s): %v", name, err)
	}
	if len(resp.Answer) != 1 {
		tb.Fatalf("Exchange(%s): got %d answers, want 1: %v", name, len(resp.Answer), resp)
	}
	return resp.Answer[0].(*dns.A).A.String(), from
}

func counterValue(tb testing.TB, f *Forwarder, vec string, labels ...string) float64 {
	tb.Helper()
	switch vec {
	case "requests":
		return testutil.ToFloat64(f.m.requests.WithLabelValues(labels...))
	case "errors":
		return testutil.ToFloat64(f.m.errors.WithLabelValues(labels...))
	case "healthy":
		return testutil.ToFloat64(f.m.healthy.WithLabelValues(labels...))
	}
	tb.Fatalf("unknown metric %s", vec)
	return 0
}

// waitEvent waits for a health change on ch; the bound only guards
// against a hang and is no timing assertion.
func waitEvent(tb testing.TB, ch <-chan healthEvent, want healthEvent) {
	tb.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-timeout:
			tb.Fatalf("no health event %+v", want)
		}
	}
}

type healthEvent struct {
	addr netip.AddrPort
	up   bool
}

func healthEvents() (hooks, <-chan healthEvent) {
	ch := make(chan healthEvent, 256)
	return hooks{healthChanged: func(a netip.AddrPort, up bool) {
		select {
		case ch <- healthEvent{a, up}:
		default: // a test that floods events reads none of them
		}
	}}, ch
}

func attemptKind(err error) string {
	var ae *AttemptError
	if errors.As(err, &ae) {
		return ae.Kind
	}
	return ""
}
