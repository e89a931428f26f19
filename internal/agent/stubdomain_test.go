package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/adminapi"
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

// TestAgentStubUnderClusterDomain: a stub domain below the cluster domain
// is forwarded to its servers (the most specific zone wins), the rest of
// the zone is answered from the fixture, and a reload that drops the stub
// gives the names back to the zone.
func TestAgentStubUnderClusterDomain(t *testing.T) {
	def := startUpstream(t)
	stub := startUpstream(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(file+".tmp", []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".tmp", file); err != nil {
			t.Fatal(err)
		}
	}
	write("stub-domain: ['other.svc.cluster.local=" + stub.Addr.String() + "']\n")
	port := freePort(t)
	cfg := testAgentConfig(t, def.Addr, dir, port, "--config", file, "--config-check-interval", "0")
	startAgent(t, cfg)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	r := ask(t, addr, "web.other.svc.cluster.local.", dns.TypeA)
	if len(r.Answer) != 1 || r.Authoritative || stub.Queries.Load() != 1 {
		t.Fatalf("under the stub: got %v (stub asked %d times), want the stub's 192.0.2.7", r, stub.Queries.Load())
	}
	if r := ask(t, addr, "web.demo.svc.cluster.local.", dns.TypeA); len(r.Answer) != 1 || !r.Authoritative {
		t.Errorf("beside the stub: got %v, want the zone's answer", r)
	}
	write("stub-domain: []\n")
	if _, err := adminapi.NewClient(cfg.AdminSocket).Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := ask(t, addr, "web2.other.svc.cluster.local.", dns.TypeA); r.Rcode != dns.RcodeNameError || !r.Authoritative {
		t.Errorf("after the reload dropped the stub: got %v, want the zone's NXDOMAIN", r)
	}
	if def.Queries.Load() != 0 {
		t.Errorf("the default upstream was asked %d times, want 0", def.Queries.Load())
	}
}
