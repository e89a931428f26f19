//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// ipvsWarning starts the agent's log line about kube-ipvs0 (pkg/iface/ipvs.go).
const ipvsWarning = "kube-proxy in IPVS mode holds local IPs"

// TestIPVSDetection: kube-proxy's IPVS mode puts every ClusterIP on a link named kube-ipvs0, and
// IPVS then takes the packets to it before any NOTRACK rule matters. This kernel has no IPVS (and no
// dummy driver), so the link is an empty bridge with that name holding the kube-dns IP in a node
// netns: the agent started with that IP in --local-ip says so once in its log, in
// nodecache_iface_ipvs_held_ips, in `status` and as a doctor WARN, stays ready and keeps answering
// on the link-local IP; when the address leaves kube-ipvs0 the gauge drops to 0.
func TestIPVSDetection(t *testing.T) {
	requireSuite(t)
	const kubeDNS = "10.96.0.10"
	node := newNetNS(t, "node")
	mustIP(t, "-n", node.Name, "link", "add", "kube-ipvs0", "type", "bridge")
	mustIP(t, "-n", node.Name, "addr", "add", kubeDNS+"/32", "dev", "kube-ipvs0")
	mustIP(t, "-n", node.Name, "addr", "add", "10.96.0.1/32", "dev", "kube-ipvs0")
	r := &agentRig{node: node, pod: addPod(t, node, linkLocalIP, kubeDNS), up: startUpstream(t, node, "127.0.0.1")}
	r.agent = startAgent(t, node, r.up, agentOpts{ExtraLocalIPs: []string{kubeDNS}, Flags: []string{"--sync-interval=1s"}})

	if got := metricSum(t, r.agent.metrics(t), "nodecache_iface_ipvs_held_ips"); got != 1 {
		t.Errorf("nodecache_iface_ipvs_held_ips: got %v, want 1", got)
	}
	if got := strings.Count(r.agent.proc.logTail(1<<20), ipvsWarning); got != 1 {
		t.Errorf("agent log lines %q: got %d, want 1", ipvsWarning, got)
	}
	if code, body := r.agent.get(t, healthAddr, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with kube-ipvs0 holding %s: got %d %q, want 200", kubeDNS, code, body)
	}
	var st struct {
		Interface struct{ Interface struct{ IPVSHeld []string } } `json:"interface"`
	}
	r.agent.cliJSON(t, &st, "status")
	if got := st.Interface.Interface.IPVSHeld; !slices.Equal(got, []string{kubeDNS}) {
		t.Errorf("status IPVSHeld: got %v, want [%s]", got, kubeDNS)
	}
	if out, err := r.agent.cli(t, "status"); err != nil || !strings.Contains(out, "kube-ipvs0 holds "+kubeDNS) {
		t.Errorf("status: got %v\n%s\nwant a line saying kube-ipvs0 holds %s", err, out, kubeDNS)
	}
	fs, _ := r.agent.doctor(t, writeFile(t, "resolv.conf", "nameserver 10.0.0.2\n"))
	if got := findings(fs, "ipvs"); len(got) != 1 || got[0].Severity != "WARN" || !strings.Contains(got[0].Detail, kubeDNS) {
		t.Errorf("doctor ipvs findings: got %+v, want one WARN naming %s", got, kubeDNS)
	}
	if a := r.ask(t, query{Name: "www.example.com."}); a.Rcode != "NOERROR" || !slices.Equal(a.Data(dns.TypeA), []string{"192.0.2.10"}) {
		t.Errorf("www.example.com. at %s: got %v, want NOERROR [192.0.2.10]", linkLocalIP, a)
	}

	mustIP(t, "-n", node.Name, "addr", "del", kubeDNS+"/32", "dev", "kube-ipvs0")
	eventually(t, "nodecache_iface_ipvs_held_ips 0 after the address left kube-ipvs0", func() error {
		if got := metricSum(t, r.agent.metrics(t), "nodecache_iface_ipvs_held_ips"); got != 0 {
			return fmt.Errorf("got %v, want 0", got)
		}
		return nil
	})
	if got := strings.Count(r.agent.proc.logTail(1<<20), ipvsWarning); got != 1 {
		t.Errorf("agent log lines %q at the end: got %d, want still 1", ipvsWarning, got)
	}
}

// findings returns the doctor's findings of check.
func findings(fs []cliFinding, check string) []cliFinding {
	var out []cliFinding
	for _, f := range fs {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}
