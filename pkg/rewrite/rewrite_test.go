package rewrite

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

func TestParseAndApply(t *testing.T) {
	var rs Rules
	for _, spec := range []string{
		"orders.example.com orders.shop.svc.cluster.local",
		"suffix .legacy.example.com. .example.com.",
		"Exact API.Example.Org api.internal answer auto",
	} {
		r, err := Parse(spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", spec, err)
		}
		rs = append(rs, r)
	}
	tests := []struct{ name, want string }{
		{"orders.example.com.", "orders.shop.svc.cluster.local."},
		{"x.orders.example.com.", ""},
		{"db.legacy.example.com.", "db.example.com."},
		{"legacy.example.com.", ""},
		{"api.example.org.", "api.internal."},
		{"www.example.org.", ""},
	}
	for _, tt := range tests {
		got, _, ok := rs.Apply(tt.name)
		if (tt.want == "") == ok || got != tt.want {
			t.Errorf("Apply(%s): got %q %v, want %q", tt.name, got, ok, tt.want)
		}
	}
	for _, bad := range []string{"", "a", "exact a", "prefix a b", "a b c", "exact a..b c"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q): got no error", bad)
		}
	}
}

func TestRevert(t *testing.T) {
	reply := func(asked string) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(asked, dns.TypeA)
		m.Answer = []dns.RR{
			&dns.CNAME{Hdr: dns.RR_Header{Name: asked, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 5}, Target: "lb." + asked},
			&dns.A{Hdr: dns.RR_Header{Name: "lb." + asked, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(10, 0, 0, 1)},
		}
		return m
	}
	exact, _ := Parse("orders.example.com orders.shop.svc.cluster.local")
	m := reply("orders.shop.svc.cluster.local.")
	exact.Revert(m, "Orders.Example.com.", "orders.shop.svc.cluster.local.")
	if m.Question[0].Name != "Orders.Example.com." || m.Answer[0].Header().Name != "Orders.Example.com." ||
		m.Answer[1].Header().Name != "lb.orders.shop.svc.cluster.local." {
		t.Errorf("exact: got %v, want the question and the owner of the CNAME written back, nothing else", m)
	}
	suffix, _ := Parse("suffix .legacy.example.com. .example.com.")
	m = reply("db.example.com.")
	suffix.Revert(m, "db.legacy.example.com.", "db.example.com.")
	if m.Question[0].Name != "db.legacy.example.com." || m.Answer[0].Header().Name != "db.example.com." {
		t.Errorf("suffix: got %v, want only the question written back", m)
	}
	auto, _ := Parse("suffix .legacy.example.com. .example.com. answer auto")
	m = reply("db.example.com.")
	auto.Revert(m, "db.legacy.example.com.", "db.example.com.")
	if m.Answer[0].Header().Name != "db.legacy.example.com." || m.Answer[0].(*dns.CNAME).Target != "lb.db.legacy.example.com." ||
		m.Answer[1].Header().Name != "lb.db.legacy.example.com." {
		t.Errorf("suffix answer auto: got %v, want every name under the suffix written back", m)
	}
}
