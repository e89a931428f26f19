package cli

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/nodecache/nodecache/pkg/iface"
)

// TestIfaceLineIPVS: status names the local IPs kube-ipvs0 holds.
func TestIfaceLineIPVS(t *testing.T) {
	s := iface.InterfaceStatus{State: iface.StateOK, Name: "nodelocaldns", Present: true, Kind: "dummy", Up: true,
		Addresses: []netip.Addr{netip.MustParseAddr("169.254.20.10"), netip.MustParseAddr("10.96.0.10")},
		IPVSHeld:  []netip.Addr{netip.MustParseAddr("10.96.0.10")}}
	if got, want := ifaceLine(s), "kube-ipvs0 holds 10.96.0.10 (IPVS: not intercepted)"; !strings.Contains(got, want) {
		t.Errorf("ifaceLine: got %q, want it to contain %q", got, want)
	}
	s.IPVSHeld = nil
	if got := ifaceLine(s); strings.Contains(got, "kube-ipvs0") {
		t.Errorf("ifaceLine without IPVS: got %q, want no kube-ipvs0", got)
	}
}
