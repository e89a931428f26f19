package iface

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vishvananda/netlink"
)

// addIPVSLink puts kube-proxy's kube-ipvs0 there with cidrs, as IPVS mode leaves it.
func addIPVSLink(e *env, cidrs ...string) {
	e.links.addExisting(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: IPVSLinkName}})
	for _, c := range cidrs {
		e.links.externalAddrAdd(IPVSLinkName, c)
	}
}

func (e *env) ipvsGauge() float64 { return testutil.ToFloat64(e.m.met.ipvsHeld) }

// TestIPVSHoldsLocalIP: kube-ipvs0 carrying the intercepted kube-dns IP is reported (status, gauge,
// one warning) without failing Setup or leaving the state unconverged, and Check sees it too.
func TestIPVSHoldsLocalIP(t *testing.T) {
	e := newEnv(t, baseConfig("169.254.20.10", "10.96.0.10"), func(e *env) {
		addIPVSLink(e, "10.96.0.1/32", "10.96.0.10/32")
	})
	e.setup(t)
	e.assertConverged(t)
	want := []netip.Addr{netip.MustParseAddr("10.96.0.10")}
	st := e.m.Status()
	if !slices.Equal(st.Interface.IPVSHeld, want) {
		t.Errorf("Status().Interface.IPVSHeld: got %v, want %v", st.Interface.IPVSHeld, want)
	}
	if !st.Converged() || st.Interface.State != StateOK {
		t.Errorf("state with kube-ipvs0 holding a local IP: got %s (converged %t), want ok", st.Interface.State, st.Converged())
	}
	if got := e.ipvsGauge(); got != 1 {
		t.Errorf("nodecache_iface_ipvs_held_ips: got %v, want 1", got)
	}
	if err := e.m.reconcile(context.Background(), true); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if got := e.logs.count(slog.LevelWarn, "IPVS"); got != 1 {
		t.Errorf("IPVS warnings after two reconciles: got %d, want 1", got)
	}
	checked, err := e.m.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !slices.Equal(checked.Interface.IPVSHeld, want) {
		t.Errorf("Check().Interface.IPVSHeld: got %v, want %v", checked.Interface.IPVSHeld, want)
	}

	e.links.externalAddrDel(IPVSLinkName, "10.96.0.10/32")
	if err := e.m.reconcile(context.Background(), false); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if got := e.m.Status().Interface.IPVSHeld; len(got) != 0 {
		t.Errorf("IPVSHeld after kube-ipvs0 dropped the IP: got %v, want none", got)
	}
	if got := e.ipvsGauge(); got != 0 {
		t.Errorf("nodecache_iface_ipvs_held_ips after kube-ipvs0 dropped the IP: got %v, want 0", got)
	}
	if got := e.logs.count(slog.LevelInfo, "kube-ipvs0 no longer holds"); got != 1 {
		t.Errorf("info lines when the IP left kube-ipvs0: got %d, want 1", got)
	}
	if got := e.logs.count(slog.LevelWarn, "IPVS"); got != 1 {
		t.Errorf("IPVS warnings: got %d, want still 1", got)
	}
}

// TestIPVSAbsent: no kube-ipvs0, or one holding only other Service IPs, reports nothing.
func TestIPVSAbsent(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cidrs []string // nil: no kube-ipvs0 at all
	}{
		{"no link", nil},
		{"other service IPs", []string{"10.96.0.1/32", "10.96.0.20/32"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, baseConfig("169.254.20.10", "10.96.0.10"), func(e *env) {
				if tt.cidrs != nil {
					addIPVSLink(e, tt.cidrs...)
				}
			})
			e.setup(t)
			if got := e.m.Status().Interface.IPVSHeld; len(got) != 0 {
				t.Errorf("IPVSHeld: got %v, want none", got)
			}
			if got := e.ipvsGauge(); got != 0 {
				t.Errorf("nodecache_iface_ipvs_held_ips: got %v, want 0", got)
			}
			if got := e.logs.count(slog.LevelWarn, "IPVS") + e.logs.count(slog.LevelInfo, "kube-ipvs0"); got != 0 {
				t.Errorf("IPVS log lines: got %d, want 0", got)
			}
		})
	}
}
