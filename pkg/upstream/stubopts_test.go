package upstream

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestStubOptions checks each per-stub setting on real loopback servers:
// the stub's policy and TCP-only queries apply to it and not to the
// default servers.
func TestStubOptions(t *testing.T) {
	def := startServer(t, answerA("192.0.2.1"))
	a := startServer(t, answerA("192.0.2.31"))
	b := startServer(t, answerA("192.0.2.32"))
	cfg := testConfig(def)
	cfg.Policy = PolicyRoundRobin
	cfg.StubDomains = map[string][]netip.AddrPort{"corp.example.": {a.addr, b.addr}}
	cfg.StubOptions = map[string]StubOptions{"corp.example.": {Policy: PolicySequential, ForceTCP: true}}
	f, _ := newTestForwarder(t, cfg, hooks{})
	for i := 0; i < 4; i++ {
		if got, _ := exchangeA(t, f, "db.corp.example."); got != "192.0.2.31" {
			t.Fatalf("query %d: got %s, want the first stub server every time (sequential)", i, got)
		}
	}
	if got := a.udpQueries.Load(); got != 0 {
		t.Errorf("got %d UDP queries at the stub server, want 0 (force-tcp)", got)
	}
	if got := a.tcpQueries.Load(); got != 4 {
		t.Errorf("got %d TCP queries at the stub server, want 4", got)
	}
	if got := a.accepts.Load(); got != 1 {
		t.Errorf("got %d TCP connections, want 1 reused", got)
	}
	exchangeA(t, f, "www.example.")
	if def.udpQueries.Load() != 1 || def.tcpQueries.Load() != 0 {
		t.Errorf("default server: got %d UDP and %d TCP queries, want 1 and 0", def.udpQueries.Load(), def.tcpQueries.Load())
	}
}

// TestStubMaxInFlight checks that a stub's cap refuses beyond it while
// other names still go out.
func TestStubMaxInFlight(t *testing.T) {
	def := startServer(t, answerA("192.0.2.1"))
	hold := make(chan struct{})
	slow := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		<-hold
		_ = w.WriteMsg(replyA(r, "192.0.2.40"))
	})
	t.Cleanup(func() { close(hold) })
	cfg := testConfig(def)
	cfg.StubDomains = map[string][]netip.AddrPort{"slow.example.": {slow.addr}}
	cfg.StubOptions = map[string]StubOptions{"slow.example.": {MaxInFlight: 1, TryTimeout: 3 * time.Second}}
	f, _ := newTestForwarder(t, cfg, hooks{})
	started := make(chan struct{})
	go func() {
		close(started)
		_, _, _ = exchange(context.Background(), f, query("a.slow.example.", dns.TypeA))
	}()
	<-started
	for slow.udpQueries.Load() == 0 {
		time.Sleep(time.Millisecond) // until the first query holds the stub's slot
	}
	if _, _, err := exchange(context.Background(), f, query("b.slow.example.", dns.TypeA)); !errors.Is(err, ErrOverloaded) {
		t.Errorf("second stub query: got %v, want ErrOverloaded", err)
	}
	exchangeA(t, f, "www.example.") // the default servers are not capped by the stub
}

// TestStubOptionsValidate checks that Config.Validate refuses options of
// a domain that is not a stub and an unknown policy.
func TestStubOptionsValidate(t *testing.T) {
	cfg := Config{Servers: []netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:53")},
		StubOptions: map[string]StubOptions{"nope.example.": {}}}
	if err := cfg.Validate(); err == nil {
		t.Error("options for a domain that is not a stub: got no error")
	}
	cfg.StubDomains = map[string][]netip.AddrPort{"nope.example.": cfg.Servers}
	cfg.StubOptions["nope.example."] = StubOptions{Policy: "fastest"}
	if err := cfg.Validate(); err == nil {
		t.Error("unknown stub policy: got no error")
	}
}
