package doctor

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/internal/testnet"
	"github.com/nodecache/nodecache/pkg/iface"
)

// countingServer answers every query on 127.0.0.1, UDP and TCP, and counts
// them.
func countingServer(t *testing.T) (uint16, *atomic.Int64) {
	t.Helper()
	port, err := testnet.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		n.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		_ = w.WriteMsg(m)
	})
	addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String()
	for _, proto := range []string{"udp", "tcp"} {
		started := make(chan struct{})
		srv := &dns.Server{Addr: addr, Net: proto, Handler: h, NotifyStartedFunc: func() { close(started) }}
		go func() { _ = srv.ListenAndServe() }()
		<-started
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return port, &n
}

// TestDoctorProbesOnlyLinkAddresses: the listener check sends queries only
// to addresses a link of this node holds. An address no link holds would go
// out by the default route (to the gateway, off the node); the check says
// so instead of sending anything.
func TestDoctorProbesOnlyLinkAddresses(t *testing.T) {
	port, queries := countingServer(t)
	lo := netip.MustParseAddr("127.0.0.1")
	tests := []struct {
		name    string
		held    []netip.Addr
		queries int64
		want    []string
	}{
		{"held", []netip.Addr{lo}, 2, []string{"udp 127.0.0.1:", "tcp 127.0.0.1:", "answers"}},
		{"held by no link", []netip.Addr{netip.MustParseAddr("10.1.2.3")}, 0,
			[]string{"not probed: no link of this node holds 127.0.0.1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := fakeNode{}.env(t)
			e.LocalIPs, e.Port = []netip.Addr{lo}, port
			e.LinkAddrs = func() ([]netip.Addr, error) { return tc.held, nil }
			before := queries.Load()
			fs := e.checkListeners(context.Background())
			if got := queries.Load() - before; got != tc.queries {
				t.Errorf("queries sent: got %d, want %d", got, tc.queries)
			}
			var sb strings.Builder
			Print(&sb, fs)
			for _, w := range tc.want {
				if !strings.Contains(sb.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, sb.String())
				}
			}
		})
	}
}

// TestDoctorInspectsWithTheAgentsRestriction: the rules doctor inspects
// directly are built with the agent's --accept-interfaces and
// --accept-sources, so that a restricted chain is not reported as drift.
func TestDoctorInspectsWithTheAgentsRestriction(t *testing.T) {
	e := fakeNode{}.env(t)
	e.st = &adminapi.Status{Config: map[string]string{"local-ip": "169.254.20.10:53",
		"accept-interfaces": "cali+,eth1", "accept-sources": "10.244.0.0/16"}}
	var got iface.Config
	e.Inspect = func(_ context.Context, cfg iface.Config) (iface.Status, error) { got = cfg; return iface.Status{}, nil }
	e.checkInterface(context.Background())
	if !slices.Equal(got.AcceptInterfaces, []string{"cali+", "eth1"}) ||
		!slices.Equal(got.AcceptSources, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}) {
		t.Errorf("inspected with interfaces %v and sources %v, want the agent's", got.AcceptInterfaces, got.AcceptSources)
	}
}
