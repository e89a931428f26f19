package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/testnet"
)

// TestAgentDNSOverTLS runs an agent whose upstream is a DNS over TLS
// server on loopback with a certificate from a test CA (--upstream-tls-ca):
// queries are answered over one reused TLS connection.
func TestAgentDNSOverTLS(t *testing.T) {
	ca, err := testnet.NewTestCA("dns.test")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &ca.Server)
	if err != nil {
		t.Fatal(err)
	}
	var accepts, queries atomic.Int64
	srv := &dns.Server{Listener: countAccepts{ln, &accepts}, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 99)}}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	plain := startUpstream(t)
	port := freePort(t)
	dot := "tls://" + ln.Addr().String() + "#dns.test"
	cfg := testAgentConfig(t, plain.addr, dir, port, "--upstream-tls-ca", caFile, "--stub-domain", "secure.example="+dot)
	startAgent(t, cfg)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; i < 3; i++ {
		r := ask(t, addr, fmt.Sprintf("n%d.secure.example.", i), dns.TypeA)
		if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.99" {
			t.Fatalf("query %d: got %v, want the TLS server's answer", i, r)
		}
	}
	if accepts.Load() != 1 || queries.Load() != 3 {
		t.Errorf("got %d TLS connections and %d queries, want 1 and 3", accepts.Load(), queries.Load())
	}
	for _, bad := range []string{"tls://nope#x", "tls://[::1]:53x"} {
		if _, err := (&upstreamTLS{servers: map[netip.AddrPort]*tls.Config{}}).parseList(bad); err == nil {
			t.Errorf("%s: got no error", bad)
		}
	}
}

type countAccepts struct {
	net.Listener
	n *atomic.Int64
}

func (l countAccepts) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}
