package doctor

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nodecache/nodecache/internal/adminapi"
)

// fakeAgent answers the agent check without a socket.
type fakeAgent struct {
	st     adminapi.Status
	err    error
	ups    []adminapi.Upstream
	upsErr error
}

func (a fakeAgent) Status(context.Context) (adminapi.Status, error) { return a.st, a.err }
func (a fakeAgent) Upstreams(context.Context) ([]adminapi.Upstream, error) {
	return a.ups, a.upsErr
}

// TestDoctorAgent: what the agent says decides the agent finding, and its
// local IPs (not the fallback flags) are the ones the later checks use.
func TestDoctorAgent(t *testing.T) {
	ready := adminapi.Status{Version: "v1", Uptime: "5m", Serving: true,
		Config: map[string]string{"local-ip": "169.254.20.11:5353"}}
	notReady := ready
	notReady.NotReady = []string{"zone: not synced"}
	notServing := ready
	notServing.Serving = false
	tests := []struct {
		name   string
		agent  fakeAgent
		want   Severity
		detail string
	}{
		{"ready", fakeAgent{st: ready, ups: []adminapi.Upstream{{Addr: "10.0.0.2:53", Up: true}}}, OK, "nodecache v1 up 5m, serving and ready"},
		{"not ready", fakeAgent{st: notReady}, Fail, "not ready: zone: not synced"},
		{"not serving", fakeAgent{st: notServing}, Fail, "does not serve DNS"},
		{"unreachable", fakeAgent{err: errors.New("dial: no such file")}, Fail, "dial: no such file"},
		{"upstreams fail", fakeAgent{st: ready, upsErr: errors.New("500")}, OK, "serving and ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := fakeNode{}.env(t)
			e.Client = tt.agent
			got := e.checkAgent(context.Background())
			if len(got) != 1 || got[0].Severity != tt.want || !strings.Contains(got[0].Detail, tt.detail) {
				t.Fatalf("got %+v, want one %s containing %q", got, tt.want, tt.detail)
			}
			if len(e.ups) != len(tt.agent.ups) {
				t.Errorf("upstreams kept: got %d, want %d", len(e.ups), len(tt.agent.ups))
			}
			ips, port := e.agentLocalIPs()
			wantIP, wantPort := netip.MustParseAddr("169.254.20.11"), uint16(5353)
			if tt.agent.err != nil {
				wantIP, wantPort = netip.MustParseAddr("169.254.20.10"), 53 // the fallback flags
			}
			if len(ips) != 1 || ips[0] != wantIP || port != wantPort {
				t.Errorf("local IPs: got %v port %d, want [%s] port %d", ips, port, wantIP, wantPort)
			}
		})
	}
}

// TestDoctorDowngradeRefused: an agent that refuses the kube-dns
// ConfigMap's upstreamNameservers (they would replace DNS over TLS
// upstreams) gives one WARN naming them; one that refuses none gives none.
func TestDoctorDowngradeRefused(t *testing.T) {
	for _, tt := range []struct {
		refused []string
		want    []Severity
	}{
		{nil, nil},
		{[]string{"10.9.9.9:53"}, []Severity{Warn}},
	} {
		e := fakeNode{files: map[string]string{"/etc/resolv.conf": "nameserver 10.0.0.2\n"}}.env(t)
		e.Client = fakeAgent{st: adminapi.Status{Serving: true, DowngradeRefused: tt.refused}}
		e.checkAgent(context.Background())
		got := e.checkUpstreams(context.Background())
		if sev := severities(got, "kube-dns ConfigMap"); !slices.Equal(sev, tt.want) {
			t.Errorf("refused %v: got %v, want %v", tt.refused, sev, tt.want)
		}
		for _, f := range got {
			if f.Check == "kube-dns ConfigMap" && (!strings.Contains(f.Detail, "10.9.9.9:53") || f.Fix == "") {
				t.Errorf("finding %+v: want the refused server named and a fix", f)
			}
		}
	}
}
