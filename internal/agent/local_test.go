package agent

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"
)

// TestAgentStaticAndRewrite runs an agent with static records and name
// rewrites and checks what pods get: static names answered before the
// upstream, others falling through, rewritten names answered for the
// target (static, cluster zone or upstream) under the name asked.
func TestAgentStaticAndRewrite(t *testing.T) {
	up := startUpstream(t)
	port := freePort(t)
	cfg := testAgentConfig(t, up.Addr, t.TempDir(), port,
		"--static-record", "10.0.0.5 db.example.internal",
		"--static-record", "2001:db8::5 db.example.internal",
		"--static-ttl", "60s",
		"--rewrite-name", "orders.example.com web.demo.svc.cluster.local",
		"--rewrite-name", "exact shop.example.com www.example.org",
		"--rewrite-name", "exact find.example.com search.demo.svc.cluster.local",
		"--rewrite-name", "suffix .old.example.com. .example.internal.",
	)
	startAgent(t, cfg)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	tests := []struct {
		name   string
		qtype  uint16
		rcode  int
		answer []string
	}{
		{"db.example.internal.", dns.TypeA, dns.RcodeSuccess, []string{"db.example.internal.\t60\tIN\tA\t10.0.0.5"}},
		{"DB.example.internal.", dns.TypeAAAA, dns.RcodeSuccess, []string{"DB.example.internal.\t60\tIN\tAAAA\t2001:db8::5"}},
		{"db.example.internal.", dns.TypeTXT, dns.RcodeSuccess, nil},
		{"5.0.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"5.0.0.10.in-addr.arpa.\t60\tIN\tPTR\tdb.example.internal."}},
		{"orders.example.com.", dns.TypeA, dns.RcodeSuccess, []string{"orders.example.com.\t5\tIN\tA\t10.96.0.10"}},
		{"shop.example.com.", dns.TypeA, dns.RcodeSuccess, []string{"shop.example.com.\t300\tIN\tA\t192.0.2.7"}},
		{"db.old.example.com.", dns.TypeA, dns.RcodeSuccess, []string{"db.example.internal.\t60\tIN\tA\t10.0.0.5"}},
		{"nx.old.example.com.", dns.TypeA, dns.RcodeNameError, nil},
		// to an ExternalName service: its CNAME, then the chased name's records
		{"find.example.com.", dns.TypeA, dns.RcodeSuccess, []string{"find.example.com.\t5\tIN\tCNAME\twww.example.com.", "www.example.com.\t300\tIN\tA\t192.0.2.7"}},
	}
	for _, tt := range tests {
		r := ask(t, addr, tt.name, tt.qtype)
		if r.Rcode != tt.rcode || len(r.Answer) != len(tt.answer) || r.Question[0].Name != tt.name {
			t.Errorf("%s %s: got %v, want rcode %s, question %s and %v", tt.name, dns.TypeToString[tt.qtype], r,
				dns.RcodeToString[tt.rcode], tt.name, tt.answer)
			continue
		}
		for i, rr := range r.Answer {
			if rr.String() != tt.answer[i] {
				t.Errorf("%s: record %d: got %q, want %q", tt.name, i, rr.String(), tt.answer[i])
			}
		}
	}
	before := up.Queries.Load()
	ask(t, addr, "db.example.internal.", dns.TypeA)
	ask(t, addr, "www.example.net.", dns.TypeA) // falls through to the upstream
	if got := up.Queries.Load() - before; got != 1 {
		t.Errorf("got %d upstream queries, want 1 (the static name is never forwarded)", got)
	}
}
