package corednsmetrics

import (
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestNamesOwnedHere fails on a CoreDNS-compatible name or server label
// written outside this package, in the non-test code of cmd/, pkg/ and
// internal/: one place owns them.
func TestNamesOwnedHere(t *testing.T) {
	written := regexp.MustCompile(`"coredns_[a-z_]*"|"dns://" ?\+`)
	root := filepath.Join("..", "..")
	for _, dir := range []string{"cmd", "pkg", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			if filepath.Base(filepath.Dir(path)) == "corednsmetrics" {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range written.FindAllString(string(data), -1) {
				t.Errorf("%s writes %s: take it from pkg/corednsmetrics", path, m)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestEveryNameIsCoreDNS registers every series and checks that each is
// named coredns_ once.
func TestEveryNameIsCoreDNS(t *testing.T) {
	collectors := []prometheus.Collector{DNSRequests(), DNSDoRequests(), DNSRequestDuration(), DNSRequestSize(),
		DNSResponseSize(), DNSResponses(), CacheRequests(), CacheHits(), CacheMisses(), CacheServedStale(),
		ProxyRequestDuration(), ProxyHealthcheckFailures(), ForwardRequests(), ForwardResponses(),
		ForwardRequestDuration(), ForwardHealthcheckFailures(), ForwardHealthcheckBroken(),
		ForwardMaxConcurrentRejects(), BuildInfo("v0"), Panics(), SetupErrors()}
	reg := prometheus.NewPedanticRegistry()
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	descs := []*prometheus.Desc{CacheEntries(), CacheEvictions(), CachePrefetches(), PluginEnabled()}
	ch := make(chan *prometheus.Desc, 64)
	for _, c := range collectors {
		c.Describe(ch)
	}
	close(ch)
	for d := range ch {
		descs = append(descs, d)
	}
	re := regexp.MustCompile(`fqName: "(coredns_[a-z_]+)"`)
	seen := map[string]bool{}
	for _, d := range descs {
		m := re.FindStringSubmatch(d.String())
		if m == nil {
			t.Errorf("%v: not a coredns_ name", d)
			continue
		}
		if seen[m[1]] {
			t.Errorf("%s defined twice", m[1])
		}
		seen[m[1]] = true
	}
}

func TestServerLabel(t *testing.T) {
	for in, want := range map[string]string{"169.254.20.10:53": "dns://169.254.20.10:53", "[fd00::a]:53": "dns://[fd00::a]:53"} {
		if got := ServerLabel(netip.MustParseAddrPort(in)); got != want {
			t.Errorf("ServerLabel(%s) = %q, want %q", in, got, want)
		}
	}
	if b := TimeBuckets(); len(b) != 16 || b[0] != 0.00025 || b[15] != 0.00025*(1<<15) {
		t.Errorf("TimeBuckets: got %v, want 0.25 ms doubling 16 times", b)
	}
}
