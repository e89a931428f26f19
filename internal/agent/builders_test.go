package agent

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/iface"
	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/tap"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// mustConfig parses args as `nodecache run` does.
func mustConfig(t testing.TB, args ...string) *Config {
	t.Helper()
	cfg, err := ParseConfig(args)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return cfg
}

// writeTestFile writes content to name in a new temporary directory and
// returns its path.
func writeTestFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var (
	addr = netip.MustParseAddrPort
	ip   = netip.MustParseAddr
)

func TestUpstreamConfig(t *testing.T) {
	local := []netip.AddrPort{addr("169.254.20.10:53")}
	t.Run("defaults", func(t *testing.T) {
		c, stubs, err := upstreamConfig(mustConfig(t, "--upstream", "10.0.0.1,10.0.0.2:5353"), local, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := upstream.Config{Servers: []netip.AddrPort{addr("10.0.0.1:53"), addr("10.0.0.2:5353")},
			StubDomains: map[string][]netip.AddrPort{}, StubOptions: map[string]upstream.StubOptions{},
			Policy: upstream.PolicyRandom, TryTimeout: 2 * time.Second, Deadline: 5 * time.Second,
			MaxInFlight: 1000, LocalAddrs: local}
		if !reflect.DeepEqual(c, want) {
			t.Errorf("got %+v, want %+v", c, want)
		}
		if len(stubs.limits) != 0 {
			t.Errorf("stub limits: got %v, want none", stubs.limits)
		}
	})
	t.Run("flags", func(t *testing.T) {
		c, stubs, err := upstreamConfig(mustConfig(t, "--upstream", "tls://9.9.9.9#dns.quad9.net",
			"--upstream-policy", "sequential", "--upstream-timeout", "1s", "--upstream-deadline", "3s",
			"--max-upstream-inflight", "50", "--stub-domain", "Corp.Example=10.1.1.1 force-tcp max-ttl=30s",
			"--upstream-force-tcp"), local, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !c.ForceTCP {
			t.Errorf("--upstream-force-tcp: got ForceTCP false, want true")
		}
		if !reflect.DeepEqual(c.Servers, []netip.AddrPort{addr("9.9.9.9:853")}) || c.TLS[addr("9.9.9.9:853")].ServerName != "dns.quad9.net" {
			t.Errorf("servers: got %v with TLS %v, want 9.9.9.9:853 verified as dns.quad9.net", c.Servers, c.TLS)
		}
		if c.Policy != upstream.PolicySequential || c.TryTimeout != time.Second || c.Deadline != 3*time.Second || c.MaxInFlight != 50 {
			t.Errorf("got policy %q, timeout %v, deadline %v, in flight %d; want sequential, 1s, 3s, 50", c.Policy, c.TryTimeout, c.Deadline, c.MaxInFlight)
		}
		if !reflect.DeepEqual(c.StubDomains["corp.example."], []netip.AddrPort{addr("10.1.1.1:53")}) || !c.StubOptions["corp.example."].ForceTCP {
			t.Errorf("stub domain: got %v %+v, want corp.example. to 10.1.1.1:53 over TCP", c.StubDomains, c.StubOptions)
		}
		if got := stubs.limits["corp.example."]; got != (cache.ZoneLimit{MaxTTL: 30 * time.Second}) {
			t.Errorf("stub TTL cap: got %+v, want MaxTTL 30s", got)
		}
	})
	t.Run("kube-dns ConfigMap replaces --upstream", func(t *testing.T) {
		dir := filepath.Dir(writeTestFile(t, "upstreamNameservers", `["10.9.9.9"]`))
		if err := os.WriteFile(filepath.Join(dir, "stubDomains"), []byte(`{"acme.local": ["10.2.2.2"]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		c, _, err := upstreamConfig(mustConfig(t, "--upstream", "10.0.0.1", "--kube-dns-config-dir", dir), local, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(c.Servers, []netip.AddrPort{addr("10.9.9.9:53")}) || len(c.StubDomains["acme.local."]) != 1 {
			t.Errorf("got servers %v, stubs %v; want 10.9.9.9:53 and acme.local.", c.Servers, c.StubDomains)
		}
	})
	t.Run("kube-dns ConfigMap never replaces tls:// upstreams", func(t *testing.T) {
		dir := filepath.Dir(writeTestFile(t, "upstreamNameservers", `["10.9.9.9"]`))
		c, stubs, err := upstreamConfig(mustConfig(t, "--upstream", "10.0.0.1,tls://9.9.9.9#dns.quad9.net", "--kube-dns-config-dir", dir), local, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := []netip.AddrPort{addr("10.0.0.1:53"), addr("9.9.9.9:853")}; !reflect.DeepEqual(c.Servers, want) {
			t.Errorf("servers: got %v, want %v (--upstream's, TLS kept)", c.Servers, want)
		}
		checkRefusedUpstreams(t, stubs, []netip.AddrPort{addr("10.9.9.9:53")})
	})
	for _, bad := range [][]string{
		{"--upstream", "not-an-address"},
		{"--upstream", "tls://nope"},
		{"--upstream-tls-ca", "/nonexistent/ca.pem"},
		{"--stub-domain", "corp.example=10.0.0.1 fast"},
		{"--upstream", "10.0.0.1", "--upstream-policy", "fastest"},
	} {
		if _, _, err := upstreamConfig(mustConfig(t, bad...), local, nil); err == nil {
			t.Errorf("%q: got no error", bad)
		}
	}
}

func TestCacheConfigFromFlags(t *testing.T) {
	for _, tt := range []struct {
		args        []string
		stale       time.Duration
		prefetchOff bool
	}{
		{nil, time.Hour, false},
		{[]string{"--prefetch=false", "--stale-max-age=0s"}, -1, true},
	} {
		cfg, err := ParseConfig(tt.args)
		if err != nil {
			t.Fatal(err)
		}
		c := cacheConfig(cfg, nil)
		if c.StaleMaxAge != tt.stale || (c.PrefetchPercent < 0) != tt.prefetchOff {
			t.Errorf("%q: got stale %v, prefetch percent %d; want %v, prefetch off %v", tt.args, c.StaleMaxAge, c.PrefetchPercent, tt.stale, tt.prefetchOff)
		}
	}
	limits := map[string]cache.ZoneLimit{"corp.example.": {MaxTTL: time.Minute}}
	c := cacheConfig(mustConfig(t, "--cache-size", "2MiB", "--max-ttl", "10m", "--max-negative-ttl", "1m"), limits)
	if c.MaxBytes != 2<<20 || c.MaxTTL != 10*time.Minute || c.MaxNegativeTTL != time.Minute ||
		!reflect.DeepEqual(c.ZoneLimits, limits) {
		t.Errorf("got %+v, want 2MiB, caps 10m and 1m and the stub limits", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("the config built from valid flags does not validate: %v", err)
	}
}

func TestZoneLimitsFor(t *testing.T) {
	stubs := stubConfig{limits: map[string]cache.ZoneLimit{"corp.example.": {MaxTTL: time.Minute}}}
	got := zoneLimitsFor(mustConfig(t, "--max-ttl", "10m", "--max-negative-ttl", "30s"), stubs)
	want := map[string]cache.ZoneLimit{".": {MaxTTL: 10 * time.Minute, MaxNegativeTTL: 30 * time.Second}, "corp.example.": {MaxTTL: time.Minute}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestZoneConfig(t *testing.T) {
	got := zoneConfig(mustConfig(t, "--cluster-domain", "k8s.example", "--ttl", "7s", "--negative-ttl", "3s",
		"--pods", "verified", "--watch-pods", "--node-name", "node-1", "--local-ip", "127.0.0.5",
		"--zone-snapshot", "/var/lib/nodecache/zone", "--zone-snapshot-max-age", "2h"))
	want := kubezone.Config{Domain: "k8s.example", TTL: 7 * time.Second, NegativeTTL: 3 * time.Second,
		Pods: kubezone.PodsVerified, NodeName: "node-1", LocalIPs: []netip.Addr{ip("127.0.0.5")},
		SnapshotPath: "/var/lib/nodecache/zone", SnapshotMaxAge: 2 * time.Hour, RelistSpread: kubezone.DefaultRelistSpread}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// --relist-spread 0 relists at once: kubezone's "no spread" is negative,
	// its zero the default.
	for flag, want := range map[string]time.Duration{"0s": -1, "10s": 10 * time.Second} {
		if got := zoneConfig(mustConfig(t, "--relist-spread", flag)).RelistSpread; got != want {
			t.Errorf("--relist-spread %s: got %v, want %v", flag, got, want)
		}
	}
}

func TestServerConfig(t *testing.T) {
	resolv := writeTestFile(t, "resolv.conf", "nameserver 10.0.0.2\nsearch corp.example. lab.example\n")
	addrs := []netip.AddrPort{addr("127.0.0.5:53")}
	got := serverConfig(mustConfig(t, "--upstream", resolv, "--cluster-domain", "k8s.example",
		"--max-tcp-conns", "7", "--tcp-idle-timeout", "3s", "--max-tcp-conns-per-client", "2",
		"--max-inflight-per-client", "3", "--autopath", "--watch-pods", "--client-qps-limit", "50", "--client-burst", "9",
		"--loadbalance", "--suppress-aaaa", "k8s.example,corp.example"),
		addrs, []string{"corp.example."})
	want := server.Config{Addrs: addrs, MaxTCPConns: 7, TCPIdleTimeout: 3 * time.Second, MaxTCPConnsPerClient: 2,
		MaxInFlightPerClient: 3, Domain: "k8s.example", StubDomains: []string{"corp.example."}, Autopath: true,
		AutopathSearch: []string{"corp.example", "lab.example"}, ClientQPS: 50, ClientBurst: 9,
		LoadBalance: true, SuppressAAAA: []string{"k8s.example", "corp.example"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := serverConfig(mustConfig(t, "--upstream", "10.0.0.1"), addrs, nil); got.AutopathSearch != nil {
		t.Errorf("--upstream as addresses: got autopath search %v, want none", got.AutopathSearch)
	}
}

func TestIfaceConfig(t *testing.T) {
	got := IfaceConfig(mustConfig(t, "--local-ip", "169.254.20.10,10.96.0.10", "--port", "5353",
		"--health-addr", "10.96.0.10:8081", "--metrics-addr", "127.0.0.1:9253", "--interface-name", "nc0",
		"--iptables-mode", "nft", "--sync-interval", "30s", "--setup-iptables=false"))
	want := iface.Config{InterfaceName: "nc0", LocalIPs: []netip.Addr{ip("169.254.20.10"), ip("10.96.0.10")},
		Port: 5353, ExtraTCPPorts: []uint16{8081}, SetupInterface: true, SetupIPTables: false,
		IPTablesMode: iface.ModeNFT, SyncInterval: 30 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// By default health and metrics listen on the first local IP: both
	// ports need the rules.
	if got := IfaceConfig(mustConfig(t)).ExtraTCPPorts; !reflect.DeepEqual(got, []uint16{8080, 9253}) {
		t.Errorf("default health and metrics ports: got %v, want [8080 9253]", got)
	}
}

func TestTapConfig(t *testing.T) {
	got := tapConfig(mustConfig(t, "--dnstap", "unix:///run/dnstap.sock", "--node-name", "node-1"), "v1.2", "host-1")
	if want := (tap.Config{Addr: "unix:///run/dnstap.sock", Identity: "node-1", Version: "nodecache v1.2"}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := tapConfig(mustConfig(t, "--node-name", ""), "v1.2", "host-1"); got.Identity != "host-1" {
		t.Errorf("without --node-name: got identity %q, want the hostname", got.Identity)
	}
}

func TestStubDomainNames(t *testing.T) {
	got := stubDomainNames(stubConfig{servers: map[string][]netip.AddrPort{"b.example.": nil, "a.example.": nil}})
	slices.Sort(got)
	if strings.Join(got, " ") != "a.example. b.example." {
		t.Errorf("got %v, want a.example. and b.example.", got)
	}
}
