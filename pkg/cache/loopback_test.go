package cache

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
)

// udpExchanger is the smallest real Exchanger: one UDP query to one server.
type udpExchanger struct {
	server netip.AddrPort
	client dns.Client
}

func (u *udpExchanger) Exchange(ctx context.Context, req *dns.Msg) (*dns.Msg, netip.AddrPort, error) {
	m, _, err := u.client.ExchangeContext(ctx, req, u.server.String())
	return m, u.server, err
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
	if r.Source != SourceUpstream || r.Server != addr || r.Msg == nil || len(r.Msg.Answer) != 1 {
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
	if r := resolve(t, c, qs); r.Source != SourceCache {
		t.Errorf("second Resolve: got source %v, want cache", r.Source)
	}
	if got := queries.Load(); got != 1 {
		t.Errorf("queries at the server: got %d, want 1", got)
	}
}
