//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
)

// The real node's link to the host: a veth pair, the host end in the host
// netns and the node end (eth0) in the node's, on a /24 the host routes
// nowhere else, plus a host route to the pod network via the node. The API
// server (host netns) then reaches the kubelet by the node's InternalIP and
// pods by their IPs, as it does in a real cluster. Nothing else is routed:
// the node's default route stays on a bridge with no uplink, so no packet
// of the node or its pods leaves for the host's own network.

// nodeSubnets are the /24s the node link may use, first free wins.
var nodeSubnets = []string{"10.199.0.0/24", "10.198.0.0/24", "172.31.199.0/24"}

// nodeLink is the veth between host and node.
type nodeLink struct {
	HostIf         string // host end, in the host netns
	HostIP, NodeIP string // the node's InternalIP is NodeIP
}

// hostRoutedPrefixes lists every prefix the host netns routes or holds an
// address in, but its default route.
func hostRoutedPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	routes, err := ipCmd("-4", "-o", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	addrs, err := ipCmd("-4", "-o", "addr", "show")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(routes, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		if len(f) > 1 && (dst == "local" || dst == "broadcast" || dst == "unicast" || dst == "blackhole" || dst == "unreachable" || dst == "prohibit") {
			dst = f[1]
		}
		if dst == "default" {
			continue
		}
		if p, ok := parsePrefix(dst); ok {
			out = append(out, p)
		}
	}
	for _, line := range strings.Split(addrs, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" {
				if p, ok := parsePrefix(f[i+1]); ok {
					out = append(out, p.Masked())
				}
			}
		}
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, bool) {
	if !strings.Contains(s, "/") {
		s += "/32"
	}
	p, err := netip.ParsePrefix(s)
	return p, err == nil
}

// freeSubnet picks the first candidate that overlaps nothing the host
// routes or holds; an error names what each candidate clashed with.
func freeSubnet(candidates []string, routed []netip.Prefix) (netip.Prefix, error) {
	var why []string
	for _, c := range candidates {
		p := netip.MustParsePrefix(c)
		clash := ""
		for _, r := range routed {
			if r.Overlaps(p) {
				clash = r.String()
				break
			}
		}
		if clash == "" {
			return p, nil
		}
		why = append(why, c+" overlaps the host's "+clash)
	}
	return netip.Prefix{}, fmt.Errorf("no free subnet for the node link: %s", strings.Join(why, "; "))
}

// linkNode creates the veth between the host and the node netns and the
// host's route to the pod network, refusing a subnet (node link or pods)
// that the host already routes.
func linkNode(t testing.TB, ns *netNS, podNet string) nodeLink {
	t.Helper()
	routed, err := hostRoutedPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := freeSubnet([]string{podNet}, routed); err != nil {
		t.Fatalf("the pod network %s: %v", podNet, err)
	}
	sub, err := freeSubnet(nodeSubnets, routed)
	if err != nil {
		t.Fatal(err)
	}
	host := sub.Addr().Next()
	l := nodeLink{HostIf: fmt.Sprintf("nch%d", os.Getpid()), HostIP: host.String(), NodeIP: host.Next().String()}
	mustIP(t, "link", "add", l.HostIf, "type", "veth", "peer", "name", "eth0", "netns", ns.Name)
	t.Cleanup(func() {
		// Deleting the netns removes the pair too; this covers a failed start.
		_, _ = ipCmd("link", "del", l.HostIf)
	})
	mustIP(t, "addr", "add", l.HostIP+"/24", "dev", l.HostIf)
	mustIP(t, "link", "set", l.HostIf, "up")
	mustIP(t, "-n", ns.Name, "addr", "add", l.NodeIP+"/24", "dev", "eth0")
	mustIP(t, "-n", ns.Name, "link", "set", "eth0", "up")
	mustIP(t, "route", "add", podNet, "via", l.NodeIP, "dev", l.HostIf)
	// The node routes between its pods and the link.
	if _, err := nsOutput(ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		t.Fatal(err)
	}
	t.Logf("real node: link %s %s (host) <-> eth0 %s (node), pods %s via the node", l.HostIf, l.HostIP, l.NodeIP, podNet)
	return l
}

// TestNodeSubnetChoice: the node link never takes a subnet the host routes
// or holds an address in, this host's own network included.
func TestNodeSubnetChoice(t *testing.T) {
	routed := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.2/32").Masked()}
	if got, err := freeSubnet(nodeSubnets, routed); err != nil || got.String() != "172.31.199.0/24" {
		t.Errorf("freeSubnet with 10/8 routed: got %v, %v; want 172.31.199.0/24", got, err)
	}
	if _, err := freeSubnet([]string{"192.0.2.0/24"}, []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}); err == nil {
		t.Error("freeSubnet took a routed /24")
	}
	host, err := hostRoutedPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range host {
		if _, err := freeSubnet([]string{p.Masked().String()}, host); err == nil {
			t.Errorf("freeSubnet took %s, which this host routes", p)
		}
	}
	t.Logf("host prefixes: %v", host)
}
