package agent

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"
)

// TestAgentStubDomainSettings runs an agent whose stub domain has its
// own TTL cap: answers under it are capped, others are not.
func TestAgentStubDomainSettings(t *testing.T) {
	def := startUpstream(t)
	stub := startUpstream(t)
	port := freePort(t)
	cfg := testAgentConfig(t, def.Addr, t.TempDir(), port,
		"--stub-domain", "example.org="+stub.Addr.String()+" max-ttl=30s policy=sequential")
	startAgent(t, cfg)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	r := ask(t, addr, "www.example.org.", dns.TypeA)
	if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 30 {
		t.Fatalf("got %v, want one A record with TTL 30 (capped from 300)", r.Answer)
	}
	if stub.Queries.Load() != 1 || def.Queries.Load() != 0 {
		t.Errorf("got %d queries at the stub and %d at the default upstream, want 1 and 0", stub.Queries.Load(), def.Queries.Load())
	}
	r = ask(t, addr, "www.example.net.", dns.TypeA)
	if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 300 {
		t.Errorf("outside the stub: got %v, want TTL 300", r.Answer)
	}
}
