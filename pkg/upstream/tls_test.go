package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/testnet"
)

// tlsServer is a DNS over TLS server on loopback with a certificate for
// "dns.test" from its own CA.
type tlsServer struct {
	addr    netip.AddrPort
	roots   *x509.CertPool
	accepts atomic.Int64
	queries atomic.Int64
}

func startTLSServer(t *testing.T, ip string) *tlsServer {
	t.Helper()
	ca, err := testnet.NewTestCA("dns.test")
	if err != nil {
		t.Fatal(err)
	}
	ts := &tlsServer{roots: ca.Roots}
	ln, err := tls.Listen("tcp", ip+":0", &ca.Server)
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = ln.Addr().(*net.TCPAddr).AddrPort()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		ts.queries.Add(1)
		_ = w.WriteMsg(replyA(r, "192.0.2.53"))
	})
	// MaxTCPQueries -1: no limit, so that the connections the server closes
	// (miekg/dns closes one after 128 queries by default) do not count as
	// the client's handshakes.
	srv := &dns.Server{Listener: countingListener{Listener: ln, n: &ts.accepts}, Handler: h, MaxTCPQueries: -1}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ts
}

// TestTLSUpstream forwards over DNS over TLS to a server whose
// certificate a test CA signed: answers come back on one reused
// connection, the wrong server name is refused, and a stub domain can
// use TLS too.
func TestTLSUpstream(t *testing.T) {
	ts := startTLSServer(t, "127.0.0.1")
	plain := startServer(t, answerA("192.0.2.1"))
	cfg := testConfig(plain)
	cfg.Servers = []netip.AddrPort{ts.addr}
	cfg.StubDomains = map[string][]netip.AddrPort{"plain.example.": {plain.addr}}
	cfg.TLS = map[netip.AddrPort]*tls.Config{ts.addr: {ServerName: "dns.test", RootCAs: ts.roots, MinVersion: tls.VersionTLS12}}
	f, _ := newTestForwarder(t, cfg, hooks{})
	for i := 0; i < 3; i++ {
		if got, from := exchangeA(t, f, "www.example.org."); got != "192.0.2.53" || from != ts.addr {
			t.Fatalf("query %d: got %s from %v, want 192.0.2.53 from the TLS server", i, got, from)
		}
	}
	if got := ts.accepts.Load(); got != 1 {
		t.Errorf("got %d TLS connections for 3 queries, want 1 reused", got)
	}
	if got, _ := exchangeA(t, f, "x.plain.example."); got != "192.0.2.1" {
		t.Errorf("stub over UDP: got %s", got)
	}

	bad := testConfig(plain)
	bad.Servers = []netip.AddrPort{ts.addr}
	bad.Deadline = 500 * time.Millisecond
	bad.TLS = map[netip.AddrPort]*tls.Config{ts.addr: {ServerName: "other.test", RootCAs: ts.roots, MinVersion: tls.VersionTLS12}}
	fb, _ := newTestForwarder(t, bad, hooks{})
	before := ts.queries.Load()
	if _, _, err := exchange(context.Background(), fb, query("www.example.org.", dns.TypeA)); err == nil {
		t.Error("wrong server name: got an answer, want the certificate refused")
	}
	if ts.queries.Load() != before {
		t.Error("wrong server name: the query reached the server")
	}

	bad.TLS[ts.addr] = &tls.Config{}
	if err := bad.Validate(); err == nil {
		t.Error("TLS server without a server name: got no error")
	}
}

// TestTLSFloodHandshakes: a flood of unique names, 200 at a time, to a DNS
// over TLS server costs at most dotMaxConns handshakes, not one per query
// past the idle pool; every query is answered.
func TestTLSFloodHandshakes(t *testing.T) {
	ts := startTLSServer(t, "127.0.0.1")
	cfg := testConfig()
	cfg.Servers = []netip.AddrPort{ts.addr}
	cfg.MaxInFlight = 1000
	cfg.TLS = map[netip.AddrPort]*tls.Config{ts.addr: {ServerName: "dns.test", RootCAs: ts.roots, MinVersion: tls.VersionTLS12}}
	f, _ := newTestForwarder(t, cfg, hooks{})
	const queries, parallel = 2000, 200
	var failed atomic.Int64
	sem := make(chan struct{}, parallel)
	done := make(chan struct{}, queries)
	for i := range queries {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; done <- struct{}{} }()
			if _, _, err := exchange(context.Background(), f, query(fmt.Sprintf("n%d.example.org.", i), dns.TypeA)); err != nil {
				failed.Add(1)
			}
		}()
	}
	for range queries {
		<-done
	}
	hs := ts.accepts.Load()
	t.Logf("%d unique names, %d in parallel: %d TLS handshakes (%.4f per query), %d failed", queries, parallel, hs,
		float64(hs)/queries, failed.Load())
	if failed.Load() != 0 {
		t.Errorf("%d of %d queries failed, want all answered", failed.Load(), queries)
	}
	if hs > dotMaxConns {
		t.Errorf("TLS handshakes: got %d, want at most %d", hs, dotMaxConns)
	}
}
