package iface

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// logCapture is a slog.Handler that keeps every record.
type logCapture struct {
	mu      *sync.Mutex
	records *[]slog.Record
}

func newLogCapture() logCapture { return logCapture{mu: &sync.Mutex{}, records: &[]slog.Record{}} }

func (l logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l logCapture) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l logCapture) WithGroup(string) slog.Handler            { return l }
func (l logCapture) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.records = append(*l.records, r)
	return nil
}

// count returns the records at level whose message contains substr.
func (l logCapture) count(level slog.Level, substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range *l.records {
		if r.Level == level && strings.Contains(r.Message, substr) {
			n++
		}
	}
	return n
}

// env is one Manager over stateful fakes.
type env struct {
	cfg   Config
	ops   *opLog
	links *fakeLinks
	rules *fakeRules
	reg   *prometheus.Registry
	logs  logCapture
	m     *Manager
}

func baseConfig(ips ...string) Config {
	cfg := Config{SetupInterface: true, SetupIPTables: true, ExtraTCPPorts: []uint16{8080}}
	for _, s := range ips {
		cfg.LocalIPs = append(cfg.LocalIPs, netip.MustParseAddr(s))
	}
	return cfg
}

// newEnv builds fakes, lets prepare change them (a predecessor's leftovers), then the Manager.
func newEnv(t testing.TB, cfg Config, prepare func(*env)) *env {
	t.Helper()
	e := &env{cfg: cfg, ops: &opLog{}, reg: prometheus.NewRegistry(), logs: newLogCapture()}
	e.links, e.rules = newFakeLinks(e.ops), newFakeRules(e.ops)
	if prepare != nil {
		prepare(e)
	}
	m, err := NewWithBackends(cfg, e.links, e.rules, e.reg, slog.New(e.logs))
	if err != nil {
		t.Fatalf("NewWithBackends: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	e.m = m
	return e
}

func (e *env) setup(t testing.TB) {
	t.Helper()
	if err := e.m.Setup(context.Background()); err != nil {
		t.Fatalf("Setup: got error %v, want nil", err)
	}
}

func (e *env) readds(kind string) float64 {
	return testutil.ToFloat64(e.m.met.readds.WithLabelValues(kind))
}

func (e *env) errs(kind string) float64 {
	return testutil.ToFloat64(e.m.met.errors.WithLabelValues(kind))
}

// wantAddrs is the sorted "ip/bits" form of the configured local IPs.
func (e *env) wantAddrs() []string {
	var out []string
	for _, ip := range e.cfg.LocalIPs {
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()).String())
	}
	slices.Sort(out)
	return out
}

// assertConverged checks the fakes directly (not through the Manager) against the contract.
func (e *env) assertConverged(t testing.TB) {
	t.Helper()
	name := e.cfg.InterfaceName
	if name == "" {
		name = DefaultInterfaceName
	}
	l, _ := e.links.LinkByName(name)
	if l == nil {
		t.Fatalf("link %s: got absent, want present", name)
	}
	if l.Attrs().Flags&1 == 0 {
		t.Errorf("link %s: got down, want up", name)
	}
	if got, want := e.links.addrStrings(name), e.wantAddrs(); !slices.Equal(got, want) {
		t.Errorf("addresses: got %v, want %v", got, want)
	}
	endpoints := 3 // udp/53, tcp/53, tcp/8080
	for _, fam := range []Family{FamilyV4, FamilyV6} {
		n := 0
		for _, ip := range e.cfg.LocalIPs {
			if familyOf(ip) == fam {
				n++
			}
		}
		perChain := map[chainRef]int{}
		for i, ref := range ourChains() {
			perChain[ref] = n * endpoints
			if i == 1 { // raw OUTPUT: destination and source
				perChain[ref] *= 2
			}
		}
		for _, ref := range ourChains() {
			rules, exists, _ := e.rules.ListRules(fam, ref.Table, ref.Chain)
			if n == 0 {
				if exists {
					t.Errorf("%s %s/%s: got chain, want none (no local IP of the family)", fam, ref.Table, ref.Chain)
				}
				continue
			}
			if got, want := len(rules), perChain[ref]; got != want {
				t.Errorf("%s %s/%s: got %d rules, want %d:\n%s", fam, ref.Table, ref.Chain, got, want, joinLines(rules))
			}
			if got := len(slices.Compact(slices.Sorted(slices.Values(rules)))); got != len(rules) {
				t.Errorf("%s %s/%s: got %d distinct of %d rules, want no duplicates", fam, ref.Table, ref.Chain, got, len(rules))
			}
			parent := e.rules.get(fam, ref.Table, ref.Parent)
			jump := "-m comment --comment nodecache -j " + ref.Chain
			if got := strings.Count(joinLines(parent)+"\n", jump+"\n"); got != 1 {
				t.Errorf("%s %s/%s: got %d jumps to %s, want 1", fam, ref.Table, ref.Parent, got, ref.Chain)
			}
			if len(parent) == 0 || parent[0] != jump {
				t.Errorf("%s %s/%s: got first rule %q, want the jump", fam, ref.Table, ref.Parent, first(parent))
			}
		}
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
