package agent

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/agent/agenttest"
)

// TestAgentDNSOverTLS runs an agent whose upstream is a DNS over TLS
// server on loopback with a certificate from a test CA (--upstream-tls-ca):
// queries are answered over one reused TLS connection.
func TestAgentDNSOverTLS(t *testing.T) {
	var accepts, queries atomic.Int64
	dir := t.TempDir()
	ln, caFile := agenttest.StartDoTServer(t, dir, &accepts, func(w dns.ResponseWriter, r *dns.Msg) {
		queries.Add(1)
		agenttest.Authoritative("192.0.2.99", false)(w, r)
	})
	plain := startUpstream(t)
	port := freePort(t)
	dot := "tls://" + ln.Addr().String() + "#dns.test"
	cfg := testAgentConfig(t, plain.Addr, dir, port, "--upstream-tls-ca", caFile, "--stub-domain", "secure.example="+dot)
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
}
