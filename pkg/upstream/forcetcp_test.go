package upstream

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestForceTCPDefaultServers: with Config.ForceTCP the default servers
// are asked over TCP only, and probed over TCP when down (a server that
// answers no UDP comes back); stub domains keep UDP.
func TestForceTCPDefaultServers(t *testing.T) {
	var answering atomic.Bool
	answering.Store(true)
	var udpSeen atomic.Int64
	tcpOnly := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		if w.LocalAddr().Network() != "tcp" {
			udpSeen.Add(1)
			return // no UDP answer at all, as behind a path that drops it
		}
		if answering.Load() {
			answerA("192.0.2.50")(w, r)
		}
	})
	stub := startServer(t, answerA("192.0.2.51"))
	cfg := testConfig(tcpOnly)
	cfg.ForceTCP = true
	cfg.TryTimeout, cfg.FailThreshold, cfg.ProbeInterval = 200*time.Millisecond, 2, 20*time.Millisecond
	cfg.StubDomains = map[string][]netip.AddrPort{"corp.example.": {stub.addr}}
	h, events := healthEvents()
	f, _ := newTestForwarder(t, cfg, h)

	for i := range 3 {
		if got, _ := exchangeA(t, f, "www.example."); got != "192.0.2.50" {
			t.Fatalf("query %d: got %q, want 192.0.2.50 over TCP", i, got)
		}
	}
	if udpSeen.Load() != 0 || tcpOnly.tcpQueries.Load() != 3 {
		t.Errorf("default server: got %d UDP and %d TCP queries, want 0 and 3", udpSeen.Load(), tcpOnly.tcpQueries.Load())
	}
	if got, _ := exchangeA(t, f, "db.corp.example."); got != "192.0.2.51" || stub.udpQueries.Load() != 1 || stub.tcpQueries.Load() != 0 {
		t.Errorf("stub: got %q with %d UDP and %d TCP queries, want 192.0.2.51 over UDP", got, stub.udpQueries.Load(), stub.tcpQueries.Load())
	}

	answering.Store(false)
	for range cfg.FailThreshold {
		_, _, _ = exchange(t.Context(), f, query("down.example.", dns.TypeA))
	}
	waitEvent(t, events, healthEvent{tcpOnly.addr, false})
	answering.Store(true)
	waitEvent(t, events, healthEvent{tcpOnly.addr, true}) // only a TCP probe can bring it back
	if udpSeen.Load() != 0 {
		t.Errorf("got %d UDP datagrams at the TCP-only server, want 0 (queries and probes over TCP)", udpSeen.Load())
	}
}
