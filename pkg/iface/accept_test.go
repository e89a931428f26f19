package iface

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestAcceptRulesRestrict: without a restriction one ACCEPT per address and
// port, as before; with interfaces and sources, the node's own queries (lo),
// each allowed pair, then DROP, in the form iptables -S prints.
func TestAcceptRulesRestrict(t *testing.T) {
	ip := netip.MustParseAddr("169.254.20.10")
	base := Config{LocalIPs: []netip.Addr{ip, netip.MustParseAddr("fd00::10")}, Port: 53}
	input := func(cfg Config, fam Family) []string {
		var out []string
		for _, r := range desiredRules(cfg, fam)[ourChains()[2]] {
			if strings.Contains(joinSpec(r), "-p udp") {
				out = append(out, joinSpec(r))
			}
		}
		return out
	}
	tail := " -p udp -m udp --dport 53 -m comment --comment nodecache -j "
	if got, want := input(base, FamilyV4), []string{"-d 169.254.20.10/32" + tail + "ACCEPT"}; !slices.Equal(got, want) {
		t.Errorf("no restriction: got %q, want %q", got, want)
	}
	cfg := base
	cfg.AcceptInterfaces = []string{"cali+", "eth1"}
	cfg.AcceptSources = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")}
	want := []string{
		"-d 169.254.20.10/32 -i lo" + tail + "ACCEPT",
		"-s 10.244.0.0/16 -d 169.254.20.10/32 -i cali+" + tail + "ACCEPT",
		"-s 10.244.0.0/16 -d 169.254.20.10/32 -i eth1" + tail + "ACCEPT",
		"-d 169.254.20.10/32" + tail + "DROP",
	}
	if got := input(cfg, FamilyV4); !slices.Equal(got, want) {
		t.Errorf("interfaces and sources:\ngot  %q\nwant %q", got, want)
	}
	v6 := input(cfg, FamilyV6)
	if len(v6) != 4 || !strings.HasPrefix(v6[1], "-s fd00:10:244::/56 -d fd00::10/128 -i cali+") {
		t.Errorf("IPv6 with sources of both families: got %q, want its own prefix only", v6)
	}
	cfg.AcceptInterfaces = nil
	if got := input(cfg, FamilyV4); len(got) != 3 || got[1] != "-s 10.244.0.0/16 -d 169.254.20.10/32"+tail+"ACCEPT" {
		t.Errorf("sources only: got %q, want lo, the source from any interface, DROP", got)
	}
}

func TestAcceptConfigValidate(t *testing.T) {
	v4 := []netip.Addr{netip.MustParseAddr("169.254.20.10")}
	dual := append(v4, netip.MustParseAddr("fd00::10"))
	p := netip.MustParsePrefix
	tests := []struct {
		name    string
		ips     []netip.Addr
		ifaces  []string
		sources []netip.Prefix
		want    string // empty: valid
	}{
		{"none", dual, nil, nil, ""},
		{"names and wildcards", v4, []string{"eth0", "cali+", "veth+"}, nil, ""},
		{"a bare +", v4, []string{"+"}, nil, "want a link name"},
		{"a + inside", v4, []string{"ca+li"}, nil, "want a link name"},
		{"too long", v4, []string{"averyveryverylongname"}, nil, "longer than"},
		{"empty name", v4, []string{""}, nil, "want a link name"},
		{"host bits", v4, nil, []netip.Prefix{p("10.244.1.5/16")}, "did you mean 10.244.0.0/16"},
		{"IPv4-mapped", v4, nil, []netip.Prefix{p("::ffff:10.0.0.0/104")}, "IPv4-mapped"},
		{"no IPv6 source for an IPv6 local IP", dual, nil, []netip.Prefix{p("10.244.0.0/16")}, "no ipv6 prefix"},
		{"both families", dual, nil, []netip.Prefix{p("10.244.0.0/16"), p("fd00::/8")}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{LocalIPs: tc.ips, AcceptInterfaces: tc.ifaces, AcceptSources: tc.sources}
			err := c.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
