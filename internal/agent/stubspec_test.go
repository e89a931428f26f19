package agent

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/upstream"
)

func TestParseStubSpec(t *testing.T) {
	s, err := parseStubSpec("Corp.Example=10.0.0.1,10.0.0.2:5353 policy=sequential force-tcp timeout=1s max-concurrent=20 max-ttl=30s max-negative-ttl=5s", &upstreamTLS{})
	if err != nil {
		t.Fatal(err)
	}
	want := stubSpec{domain: "corp.example.",
		servers: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:53"), netip.MustParseAddrPort("10.0.0.2:5353")},
		opts:    upstream.StubOptions{Policy: "sequential", ForceTCP: true, TryTimeout: time.Second, MaxInFlight: 20},
		limit:   cache.ZoneLimit{MaxTTL: 30 * time.Second, MaxNegativeTTL: 5 * time.Second}}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Errorf("got %+v, want %+v", s, want)
	}
	for _, bad := range []string{"", "corp.example", "corp.example=10.0.0.1 max-ttl=500ms", "corp.example=10.0.0.1 fast", "corp.example=10.0.0.1 timeout=-1s"} {
		if _, err := parseStubSpec(bad, &upstreamTLS{}); err == nil {
			t.Errorf("%q: got no error", bad)
		}
	}
}

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
