package kubezone

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestDashedIP(t *testing.T) {
	cases := []struct{ ip, want string }{
		{"10.1.2.3", "10-1-2-3"},
		{"fd00::1", "fd00--1"},
		{"fd00::", "fd00--0"},
		{"2001:db8:1:2:3:4:5:6", "2001-db8-1-2-3-4-5-6"},
		{"fd00:1234:5678:9abc:def0:1234:5678:9abc", "fd00-1234-5678-9abc-def0-1234-5678-9abc"},
	}
	for _, c := range cases {
		a := netip.MustParseAddr(c.ip)
		if got := dashedIP(a); got != c.want {
			t.Errorf("dashedIP(%s): got %q, want %q", c.ip, got, c.want)
		}
		if back, ok := parseDashedIP(c.want); !ok || back != a {
			t.Errorf("parseDashedIP(%q): got %v %v, want %v", c.want, back, ok, a)
		}
	}
	for _, bad := range []string{"web", "10-1-2", "10-1-2-3-4", "1-2-3-400", "-", "fd00-1-ffff1", "10-1-2-3%eth0"} {
		if a, ok := parseDashedIP(bad); ok {
			t.Errorf("parseDashedIP(%q): got %v, want no address", bad, a)
		}
	}
}

func TestReverseName(t *testing.T) {
	cases := []struct{ ip, want string }{
		{"10.96.0.1", "1.0.96.10.in-addr.arpa."},
		{"192.168.255.200", "200.255.168.192.in-addr.arpa."},
		{"fd00::1", "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa."},
	}
	for _, c := range cases {
		got := reverseName(netip.MustParseAddr(c.ip))
		want, _ := dns.ReverseAddr(c.ip)
		if got != c.want || got != want {
			t.Errorf("reverseName(%s): got %q, want %q (miekg: %q)", c.ip, got, c.want, want)
		}
	}
}

func TestValidName(t *testing.T) {
	cases := []struct {
		name string
		want bool
	}{
		{"a.b.", true},
		{strings.Repeat("a", 63) + ".b.", true},
		{strings.Repeat("a", 64) + ".b.", false},
		{strings.Repeat("abcdefg.", 31) + "x.", true},   // 250 bytes
		{strings.Repeat("abcdefg.", 32) + "xy.", false}, // 259 bytes
		{"a..b.", false},
	}
	for _, c := range cases {
		if got := validName(c.name); got != c.want {
			t.Errorf("validName(%d bytes): got %v, want %v", len(c.name), got, c.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name    string
		cfg     Config
		wantErr string
		check   func(Config) bool
	}{
		{name: "zero value gets defaults", cfg: Config{}, check: func(c Config) bool {
			return c.Domain == "cluster.local." && c.TTL == 5*time.Second && c.NegativeTTL == 5*time.Second &&
				c.Pods == PodsInsecure && c.SnapshotInterval == 10*time.Second && c.RelistSpread == 30*time.Second
		}},
		{name: "negative relist spread kept (no spread)", cfg: Config{RelistSpread: -1}, check: func(c Config) bool {
			return c.RelistSpread == -1
		}},
		{name: "domain normalised", cfg: Config{Domain: "Cluster.Example"}, check: func(c Config) bool {
			return c.Domain == "cluster.example."
		}},
		{name: "bad pods mode", cfg: Config{Pods: "sometimes"}, wantErr: "pods mode"},
		{name: "sub-second TTL", cfg: Config{TTL: 1500 * time.Millisecond}, wantErr: "ttl"},
		{name: "negative TTL too long", cfg: Config{NegativeTTL: 48 * time.Hour}, wantErr: "negative ttl"},
		{name: "bad domain", cfg: Config{Domain: "a..b"}, wantErr: "domain"},
		{name: "invalid local IP", cfg: Config{LocalIPs: []netip.Addr{{}}}, wantErr: "local IPs"},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: got error %v, want one mentioning %q", c.name, err, c.wantErr)
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: got error %v, want none", c.name, err)
		case c.check != nil && !c.check(c.cfg):
			t.Errorf("%s: got %+v, want defaults applied", c.name, c.cfg)
		}
	}
}

func TestLoadFixtureErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ name, body, wantErr string }{
		{"unsupported kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "unsupported kind"},
		{"not yaml", "apiVersion: v1\nkind: [\n", "document 0"},
	}
	for _, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".yaml")
		if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadFixture(path); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: got %v, want error mentioning %q", c.name, err, c.wantErr)
		}
	}
	if _, err := LoadFixture(filepath.Join(dir, "missing.yaml")); !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("missing file: got %v, want not-exist", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestFixtureAndList(t *testing.T) {
	fixtureZone(t, fixtureConfig(), func(t *testing.T, z *Zone) {
		st := z.Stats()
		// Pods: the fake clientset ignores the spec.nodeName field selector, so
		// the node-b pod is watched too (PodByIP still filters it out).
		want := Stats{Namespaces: 2, Services: 10, EndpointSlices: 8, Endpoints: 11, Pods: 3, LocalPods: 3,
			Synced: true, Source: SourceAPI, Names: st.Names, Generation: st.Generation}
		if st != want {
			t.Errorf("Stats: got %+v, want %+v", st, want)
		}
		// Endpoint host names and reverse names are answered from the
		// service entries and the PTR index, not the table: the names of
		// the zone are the table's (empty non-terminals included) plus the
		// owners of every listed record.
		names := map[string]bool{}
		z.tab.each(func(name string, _ *node) { names[name] = true })
		for _, r := range z.List("") {
			names[r.Name] = true
		}
		if st.Names != len(names) || len(names) < 60 {
			t.Errorf("Stats.Names: got %d, want %d (names in the table and answered lazily)", st.Names, len(names))
		}
		recs := z.List("default")
		var got []string
		for _, r := range recs {
			got = append(got, r.Name+" "+r.Type+" "+r.Data)
		}
		wantRecs := []string{
			"1.0.96.10.in-addr.arpa. PTR kubernetes.default.svc.cluster.local.",
			"10-244-1-60.shop.default.svc.cluster.local. A 10.244.1.60",
			"10.0.168.192.in-addr.arpa. PTR 192-168-0-10.kubernetes.default.svc.cluster.local.",
			"192-168-0-10.kubernetes.default.svc.cluster.local. A 192.168.0.10",
			"60.0.96.10.in-addr.arpa. PTR shop.default.svc.cluster.local.",
			"60.1.244.10.in-addr.arpa. PTR 10-244-1-60.shop.default.svc.cluster.local.",
			"_https._tcp.kubernetes.default.svc.cluster.local. SRV 0 100 443 kubernetes.default.svc.cluster.local.",
			"_https._tcp.shop.default.svc.cluster.local. SRV 0 100 443 shop.default.svc.cluster.local.",
			"kubernetes.default.svc.cluster.local. A 10.96.0.1",
			"kubernetes.default.svc.cluster.local. SRV 0 100 443 kubernetes.default.svc.cluster.local.",
			"shop.default.svc.cluster.local. A 10.96.0.60",
			"shop.default.svc.cluster.local. SRV 0 100 443 shop.default.svc.cluster.local.",
		}
		if strings.Join(got, "\n") != strings.Join(wantRecs, "\n") {
			t.Errorf("List(default):\ngot  %q\nwant %q", got, wantRecs)
		}
	})
}
