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

// startDoTServer serves h over DNS over TLS on loopback with a
// certificate for "dns.test" from a test CA written to dir; accepts, when
// not nil, counts the connections.
func startDoTServer(t *testing.T, dir string, accepts *atomic.Int64, h dns.HandlerFunc) (net.Listener, string) {
	t.Helper()
	ca, err := testnet.NewTestCA("dns.test")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &ca.Server)
	if err != nil {
		t.Fatal(err)
	}
	if accepts == nil {
		accepts = new(atomic.Int64)
	}
	serveOn(t, &dns.Server{Listener: countAccepts{ln, accepts}, Handler: h})
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ln, caFile
}

// TestAgentDNSOverTLS runs an agent whose upstream is a DNS over TLS
// server on loopback with a certificate from a test CA (--upstream-tls-ca):
// queries are answered over one reused TLS connection.
func TestAgentDNSOverTLS(t *testing.T) {
	var accepts, queries atomic.Int64
	dir := t.TempDir()
	ln, caFile := startDoTServer(t, dir, &accepts, func(w dns.ResponseWriter, r *dns.Msg) {
		queries.Add(1)
		compareUpstream("192.0.2.99", false)(w, r)
	})
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
