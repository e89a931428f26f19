//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodecache/nodecache/e2e/tools/dnsload/loadrec"
)

const (
	kpClientNS = "e2e-kp"
	// kubernetesIP is the default/kubernetes ClusterIP: the first of the service CIDR.
	kubernetesIP = "10.96.0.1"
)

// TestRealNodeKubeProxy runs the intercept overlay on the real node next to kube-proxy v1.35.4, in
// iptables mode and then in nftables mode, as on a cluster whose kubelet's clusterDNS is the
// kube-dns ClusterIP. For the test the shared kubelet runs with clusterDNS 10.96.0.10 (restarted,
// and restarted with 169.254.20.10 at the end). Per mode, kube-proxy starts, then a CoreDNS
// Deployment on the pod network behind kube-system/kube-dns (10.96.0.10), which reaches the API
// server through the default/kubernetes Service (10.96.0.1:443 → the API server's advertise
// address, the node's IP) as the agent does once installed; a client pod with the kubelet's
// resolv.conf sends 40 UDP and 40 TCP queries a second to its nameserver. With kube-proxy alone
// CoreDNS answers; with the agent installed the agent answers (its counter moves, CoreDNS's does
// not) and conntrack has no DNS entry for either address; kube-proxy stopped, its rules flushed
// (`kube-proxy --cleanup`) and started again: still the agent, no query lost, the agent's rules as
// before and no rule line twice in iptables-save or nft list ruleset; five rollouts lose nothing;
// `kubectl delete -k` → CoreDNS answers through kube-proxy with the gap measured (at most 5 s);
// re-applying → the agent again, nothing lost.
func TestRealNodeKubeProxy(t *testing.T) {
	n := sharedRealNode(t)
	kubeProxyBin(t)
	if _, err := execOutput("test", "-x", corednsPath()); err != nil {
		t.Fatalf("no CoreDNS binary at %s (bench/build-coredns.sh builds it): %v", corednsPath(), err)
	}
	n.checkKubernetesEndpoint(t)
	// Before anything of this test is created: its restore, a cleanup, runs after theirs.
	n.setClusterDNS(t, kubeDNSIP)
	// CoreDNS's upstream: the agent's is on the node's loopback, which pods cannot reach.
	up := startUpstream(t, n.ns, n.link.NodeIP)
	for _, m := range []struct{ proxy, agentMode string }{{"iptables", "auto"}, {"nftables", "nft"}} {
		start := time.Now()
		t.Logf("=== kube-proxy in %s mode", m.proxy)
		n.checkKubeProxyMode(t, m.proxy, m.agentMode, up)
		t.Logf("=== kube-proxy in %s mode: %v", m.proxy, time.Since(start).Round(time.Second))
	}
}

// checkKubernetesEndpoint wants default/kubernetes' EndpointSlice to name the node's IP and the
// API server's port, where the rig's forwarder listens.
func (n *realNode) checkKubernetesEndpoint(t *testing.T) {
	t.Helper()
	want := n.apiAdv.Addr()
	eventuallyWithin(t, time.Minute, "default/kubernetes' EndpointSlice naming "+want, func() error {
		es, err := n.admin.DiscoveryV1().EndpointSlices("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var got []string
		for _, e := range es.Endpoints {
			for _, p := range es.Ports {
				if p.Port != nil {
					got = append(got, fmt.Sprintf("%s:%d", strings.Join(e.Addresses, ","), *p.Port))
				}
			}
		}
		if !slices.Equal(got, []string{want}) {
			return fmt.Errorf("got %v, want [%s]", got, want)
		}
		return nil
	})
}

// checkKubeProxyMode is one mode's run of TestRealNodeKubeProxy.
func (n *realNode) checkKubeProxyMode(t *testing.T, mode, agentMode string, up *dnsUpstream) {
	ctx := t.Context()
	kp := runKubeProxy(t, n.ns, mode, nodeName, n.api, n.apiFwd.Addr(), kubernetesIP)
	// Ready only once its kubernetes plugin has synced through 10.96.0.1.
	n.startCoreDNS(t, "", up.Addr)
	kp.waitIPs = append(kp.waitIPs, kubeDNSIP)
	ns := kpClientNS + "-" + mode // each mode's namespace is deleted at the end of the test
	n.namespace(t, ns)
	client := n.startKubeDNSClient(ctx, ns)
	waitAnswered(t, n, client, "CoreDNS through kube-proxy's DNAT", time.Now())
	c0, t0 := n.corednsRequests(t), time.Now()
	n.checkKubeDNSClient(ctx, client, ns)
	time.Sleep(time.Until(t0.Add(3 * time.Second)))
	if got := n.corednsRequests(t) - c0; got < 100 {
		t.Errorf("kube-proxy alone: CoreDNS counted %v requests in %v of 80 q/s to %s, want them", got, time.Since(t0).Round(time.Second), kubeDNSIP)
	}

	metricsPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	overlay := n.writeInterceptOverlay(t, metricsPort, agentMode)
	t.Cleanup(func() { n.uninstallAgent(t, overlay) })
	if _, err := n.kubectl(ctx, "apply", "-k", overlay); err != nil {
		t.Fatalf("installing the intercept overlay: %v", err)
	}
	agent := n.waitAgents(ctx, 1, 3*time.Minute)[0]
	n.checkAgentViaKubernetesService(t, &agent)
	n.checkAgentAnswersKubeDNS(t, metricsPort, "installed")
	n.checkKubeDNSClient(ctx, client, ns)
	n.checkNoConntrackKubeDNS(t)

	n.checkKubeProxyRestart(t, kp, client, metricsPort)
	n.checkRollouts(ctx, client)

	deleteAt := time.Now()
	n.uninstallAgent(t, overlay)
	before := n.corednsRequests(t)
	time.Sleep(10 * time.Second)
	if n.corednsRequests(t) == before {
		t.Errorf("after kubectl delete -k: CoreDNS counted no request, want the client's queries through kube-proxy")
	}
	applyAt := time.Now()
	if _, err := n.kubectl(ctx, "apply", "-k", overlay); err != nil {
		t.Fatalf("re-applying the intercept overlay: %v", err)
	}
	n.waitAgents(ctx, 1, 3*time.Minute)
	ready := time.Now()
	time.Sleep(3 * time.Second)
	n.checkAgentAnswersKubeDNS(t, metricsPort, "re-applied")
	time.Sleep(5 * time.Second)
	secs := n.clientSeconds(client)
	gap := 0
	for _, s := range secs {
		if s.T >= deleteAt.Unix() && s.T <= applyAt.Unix() && (s.Lost > 0 || s.Rcodes["error"] > 0 || s.OK == 0) {
			gap++
		}
	}
	t.Logf("%s: after kubectl delete -k, seconds with a query lost or failed: %d", mode, gap)
	if gap > 5 {
		t.Errorf("%s: after kubectl delete -k %d seconds lost or failed queries, want at most 5", mode, gap)
	}
	for _, w := range []struct {
		what     string
		from, to time.Time
	}{{"kubectl delete -k", deleteAt, applyAt}, {"re-apply", applyAt, time.Now().Add(-3 * time.Second)}} {
		for _, proto := range []string{"udp", "tcp"} {
			sum := summarize(secsOf(secs, proto), w.from, w.to)
			t.Logf("%s: %s, %s: %s", mode, w.what, proto, sum)
			// A TCP connection open at the instant the agent's rules go or come is
			// reset (docs/operating.md): one such, at most, per switch, whether
			// the client's resend on a new connection was answered or not.
			resets := 0
			if proto == "tcp" && strings.Contains(sum.firstErr, "connection reset by peer") {
				resets = 1
			}
			if sum.lost != 0 || sum.rcodes["SERVFAIL"] != 0 || sum.rcodes["error"] > resets || sum.rcodes["error"]+sum.resent > 1 {
				t.Errorf("%s: %s, %s: lost %d, SERVFAIL %d, errors %d, resent %d (%s); want none (tcp: one reset at most)",
					mode, w.what, proto, sum.lost, sum.rcodes["SERVFAIL"], sum.rcodes["error"], sum.resent, sum.firstErr)
			}
		}
	}
	t.Logf("%s: re-apply: agent Ready %v after kubectl apply", mode, ready.Sub(applyAt).Round(100*time.Millisecond))
	// The next mode's load is its own client's alone.
	if err := n.admin.CoreV1().Pods(ns).Delete(ctx, client.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting the client: %v", err)
	}
	n.uninstallAgent(t, overlay)
	n.deleteCoreDNS(t)
	kp.stop(t)
	if out, err := kp.cleanup(); err != nil {
		t.Errorf("kube-proxy --cleanup: %v\n%s", err, out)
	}
}

// checkAgentViaKubernetesService wants the DaemonSet to leave KUBERNETES_SERVICE_HOST/PORT to the
// kubelet (10.96.0.1:443) and a process of the agent's container to hold an established connection
// to 10.96.0.1:443: the only way to the API server it has is the kubernetes Service through
// kube-proxy's DNAT.
func (n *realNode) checkAgentViaKubernetesService(t *testing.T, agent *corev1.Pod) {
	t.Helper()
	ds, err := n.admin.AppsV1().DaemonSets(agentNS).Get(t.Context(), "nodecache", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ds.Spec.Template.Spec.Containers[0].Env {
		if strings.HasPrefix(e.Name, "KUBERNETES_SERVICE_") {
			t.Errorf("the intercept overlay's DaemonSet sets %s=%s, want the kubelet's (the kubernetes Service)", e.Name, e.Value)
		}
	}
	eventually(t, "the agent's connection to "+kubernetesIP+":443", func() error {
		out, err := nsOutput(n.ns, "ss", "-Htnp", "state", "established", "dst", kubernetesIP+":443")
		if err != nil {
			return err
		}
		// The serving process is a child of the container's first; both are in its cgroup.
		id := containerID(agent)
		for _, m := range ssPID.FindAllStringSubmatch(out, -1) {
			if cg, err := os.ReadFile("/proc/" + m[1] + "/cgroup"); err == nil && id != "" && strings.Contains(string(cg), id) {
				return nil
			}
		}
		return fmt.Errorf("no established connection of a process of the agent's container %s to %s:443 in the node:\n%s", id, kubernetesIP, out)
	})
}

// ssPID finds the process IDs in ss -p output.
var ssPID = regexp.MustCompile(`pid=(\d+)`)

// checkKubeDNSClient wants the resolv.conf the kubelet wrote for the ClusterFirst client (clusterDNS
// 10.96.0.10, the namespace's search path, ndots:5), and glibc in the pod to find the Service web by
// its short name and an external name through it.
func (n *realNode) checkKubeDNSClient(ctx context.Context, client *corev1.Pod, ns string) {
	t := n.t
	out, err := n.exec(ctx, client, "/usr/local/bin/dnsload", "-cat", "/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nameserver " + kubeDNSIP + "\n", "search " + ns + ".svc.cluster.local svc.cluster.local cluster.local\n", "ndots:5"} {
		if !strings.Contains(out, want) {
			t.Errorf("client resolv.conf (written by the kubelet): got\n%s\nwant a line with %q", out, strings.TrimSpace(want))
		}
	}
	web, err := n.admin.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"web": web.Spec.ClusterIP, "www.example.com": "192.0.2.10"} {
		if out, err := n.exec(ctx, client, "getent", "ahostsv4", name); err != nil || !strings.Contains(out, want) {
			t.Errorf("getent ahostsv4 %s in the client: got %q, %v; want %s", name, out, err, want)
		}
	}
}

// checkKubeProxyRestart stops kube-proxy, flushes its rules with `kube-proxy --cleanup` and starts
// it again while the agent runs under the client's load: the agent keeps answering (its counter
// moves, CoreDNS's does not from the flush on), its rules are the lines they were, no rule line is
// in iptables-save or nft list ruleset twice, and the client loses nothing.
func (n *realNode) checkKubeProxyRestart(t *testing.T, kp *kubeProxy, client *corev1.Pod, metricsPort int) {
	t.Helper()
	before, err := ruleSnapshot(t, n.ns, "nft")
	if err != nil {
		t.Errorf("the agent's rules before kube-proxy's restart: %v", err)
	}
	c0 := n.corednsRequests(t)
	from := time.Now()
	kp.stop(t)
	if out, err := kp.cleanup(); err != nil {
		t.Errorf("kube-proxy --cleanup: %v\n%s", err, out)
	}
	if r := kp.rules(t); strings.Contains(r, kubeDNSIP) {
		t.Errorf("after kube-proxy --cleanup its %s rules still name %s:\n%s", kp.mode, kubeDNSIP, r)
	}
	kp.start(t)
	restarted := time.Now()
	t.Logf("%s: kube-proxy stopped, flushed and its rules back in %v", kp.mode, restarted.Sub(from).Round(100*time.Millisecond))
	n.checkAgentAnswersKubeDNS(t, metricsPort, "kube-proxy flushed and restarted")
	if c := n.corednsRequests(t); c != c0 {
		t.Errorf("kube-proxy flushed and restarted: CoreDNS counted %v requests, want 0 (the agent's rules win)", c-c0)
	}
	eventually(t, "the agent's rules as before kube-proxy's restart, none twice", func() error {
		after, err := ruleSnapshot(t, n.ns, "nft")
		if err == nil && !slices.Equal(after, before) {
			err = fmt.Errorf("got\n%s\nwant\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
		}
		return err
	})
	if dups := duplicateRules(t, n.ns); len(dups) > 0 {
		t.Errorf("after kube-proxy's restart, rule lines held twice:\n%s", strings.Join(dups, "\n"))
	}
	secs := n.clientSeconds(client)
	for _, proto := range []string{"udp", "tcp"} {
		sum := summarize(secsOf(secs, proto), from, restarted.Add(time.Second))
		t.Logf("%s: kube-proxy --cleanup and restart, %s: %s", kp.mode, proto, sum)
		if sum.sent == 0 || sum.lost != 0 || sum.rcodes["SERVFAIL"] != 0 || sum.rcodes["error"] != 0 || sum.resent != 0 {
			t.Errorf("kube-proxy --cleanup and restart, %s: sent %d, lost %d, SERVFAIL %d, errors %d, resent %d (%s); want queries and none of those",
				proto, sum.sent, sum.lost, sum.rcodes["SERVFAIL"], sum.rcodes["error"], sum.resent, sum.firstErr)
		}
	}
}

// duplicateRules lists each rule line that the node's iptables-save (nft and legacy, every table)
// or nft list ruleset holds more than once in one table and chain (counters aside).
func duplicateRules(t testing.TB, node *netNS) []string {
	t.Helper()
	var dups []string
	for _, save := range []string{"iptables-nft-save", "iptables-legacy-save"} {
		for _, d := range iptablesSaveDups(nsCommand(t, node, save)) {
			dups = append(dups, save+": "+d)
		}
	}
	for _, d := range nftRulesetDups(nsCommand(t, node, "nft", "list", "ruleset")) {
		dups = append(dups, "nft list ruleset: "+d)
	}
	return dups
}

// iptablesSaveDups lists the -A lines iptables-save output holds twice in one table.
func iptablesSaveDups(save string) []string {
	var dups []string
	table, seen := "", map[string]bool{}
	for _, line := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line
		case strings.HasPrefix(line, "-A "):
			if k := table + " " + line; seen[k] {
				dups = append(dups, k)
			} else {
				seen[k] = true
			}
		}
	}
	return dups
}

var nftCounters = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// nftRulesetDups lists the lines nft list ruleset output holds twice in one chain, set or map of
// one table, counters aside.
func nftRulesetDups(ruleset string) []string {
	var dups []string
	table, ctx, seen := "", "", map[string]bool{}
	for _, line := range strings.Split(ruleset, "\n") {
		l := strings.TrimSpace(nftCounters.ReplaceAllString(line, "counter"))
		f := strings.Fields(l)
		switch {
		case len(f) == 0 || l == "}" || strings.HasPrefix(l, "#"):
		case f[0] == "table":
			table = strings.TrimSuffix(l, " {")
			ctx = table
		case f[0] == "chain" || f[0] == "set" || f[0] == "map" || f[0] == "flowtable":
			ctx = table + " " + strings.TrimSuffix(l, " {")
		default:
			if k := ctx + ": " + l; seen[k] {
				dups = append(dups, k)
			} else {
				seen[k] = true
			}
		}
	}
	return dups
}

// TestDuplicateRuleLines: the duplicate finders of TestRealNodeKubeProxy find a rule held twice in
// one chain, and not the same rule in two chains or tables.
func TestDuplicateRuleLines(t *testing.T) {
	save := "*raw\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j NODECACHE\n-A OUTPUT -j NODECACHE\nCOMMIT\n" +
		"*nat\n-A PREROUTING -j NODECACHE\n-A KUBE-SERVICES -d 10.96.0.10/32 -j KUBE-SVC-X\n"
	if d := iptablesSaveDups(save); len(d) != 0 {
		t.Errorf("iptables-save without a duplicate: got %v", d)
	}
	if d := iptablesSaveDups(save + "-A KUBE-SERVICES -d 10.96.0.10/32 -j KUBE-SVC-X\n"); len(d) != 1 {
		t.Errorf("iptables-save with one rule twice: got %v, want it once", d)
	}
	ruleset := `# Warning: table ip raw is managed by iptables-nft, do not touch!
table ip raw {
	chain PREROUTING {
		type filter hook prerouting priority raw; policy accept;
		counter packets 10 bytes 600 jump NODECACHE
	}
	chain OUTPUT {
		type filter hook output priority raw; policy accept;
		counter packets 3 bytes 180 jump NODECACHE
	}
}
table ip kube-proxy {
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.1 . tcp . 443 : goto service-A,
			     10.96.0.10 . udp . 53 : goto service-B }
	}
	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
	}
}
`
	if d := nftRulesetDups(ruleset); len(d) != 0 {
		t.Errorf("nft ruleset without a duplicate: got %v", d)
	}
	twice := strings.Replace(ruleset, "counter packets 10 bytes 600 jump NODECACHE\n",
		"counter packets 10 bytes 600 jump NODECACHE\n\t\tcounter packets 0 bytes 0 jump NODECACHE\n", 1)
	if d := nftRulesetDups(twice); len(d) != 1 || !strings.Contains(d[0], "chain PREROUTING") {
		t.Errorf("nft ruleset with a jump twice in PREROUTING: got %v, want it once", d)
	}
}

// secsOf returns the seconds of proto.
func secsOf(secs []loadrec.Second, proto string) []loadrec.Second {
	var out []loadrec.Second
	for _, s := range secs {
		if s.Proto == proto {
			out = append(out, s)
		}
	}
	return out
}

// waitAnswered waits until the client's load has a second after since with every query answered.
func waitAnswered(t testing.TB, n *realNode, client *corev1.Pod, what string, since time.Time) {
	t.Helper()
	eventuallyWithin(t, 2*time.Minute, what, func() error {
		for _, s := range n.clientSeconds(client) {
			if s.T > since.Unix() && s.Sent > 0 && s.OK == s.Sent {
				return nil
			}
		}
		return fmt.Errorf("no second after %s with every query answered", since.Format("15:04:05"))
	})
}

// checkAgentAnswersKubeDNS wants the agent's request counter to move over 5 s of the client's
// load and CoreDNS's to stay.
func (n *realNode) checkAgentAnswersKubeDNS(t testing.TB, metricsPort int, when string) {
	t.Helper()
	a0, c0 := n.agentRequests(metricsPort), n.corednsRequests(t)
	time.Sleep(5 * time.Second)
	a1, c1 := n.agentRequests(metricsPort), n.corednsRequests(t)
	t.Logf("%s: over 5 s the agent counted %v requests, CoreDNS %v", when, a1-a0, c1-c0)
	if a1-a0 < 100 {
		t.Errorf("%s: the agent counted %v requests in 5 s of 80 q/s to %s, want them", when, a1-a0, kubeDNSIP)
	}
	if c1 != c0 {
		t.Errorf("%s: CoreDNS counted %v requests, want 0 (the agent intercepts %s)", when, c1-c0, kubeDNSIP)
	}
}

// checkNoConntrackKubeDNS deletes the node's conntrack entries to port 53 (those of kube-proxy's
// DNAT before the agent came; a full flush would also cut the API connections kube-proxy DNATs)
// and, after 3 s of the client's load and a query of the node to the link-local IP, wants no DNS
// entry for either address.
func (n *realNode) checkNoConntrackKubeDNS(t testing.TB) {
	t.Helper()
	for _, proto := range []string{"udp", "tcp"} {
		// Exit status 1 when there was none to delete.
		out, _ := nsOutput(n.ns, "conntrack", "-D", "-f", "ipv4", "-p", proto, "--orig-port-dst", "53")
		if !strings.Contains(out, "flow entries have been deleted") {
			t.Errorf("conntrack -D -p %s --orig-port-dst 53 in the node: %s", proto, out)
		}
	}
	time.Sleep(3 * time.Second)
	q := new(dns.Msg)
	q.SetQuestion("kube-dns.kube-system.svc.cluster.local.", dns.TypeA)
	err := n.ns.do(func() error {
		r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(q, linkLocalIP+":53")
		if err == nil && r.Rcode != dns.RcodeSuccess {
			err = fmt.Errorf("rcode %s", dns.RcodeToString[r.Rcode])
		}
		return err
	})
	if err != nil {
		t.Errorf("the node asking %s: %v", linkLocalIP, err)
	}
	tracked := nsCommand(t, n.ns, "conntrack", "-L", "-f", "ipv4")
	for _, ip := range []string{linkLocalIP, kubeDNSIP} {
		if c := dnsFlows(tracked, ip); c != 0 {
			t.Errorf("conntrack in the node: got %d DNS entries for %s, want none\n%s", c, ip, tracked)
		}
	}
}

// writeInterceptOverlay writes deploy/overlays/intercept-kube-dns's change over the rig's overlay,
// without the rig's KUBERNETES_SERVICE_HOST/PORT: the agent reaches the API server through the
// kubernetes Service, as on a cluster with kube-proxy.
func (n *realNode) writeInterceptOverlay(t *testing.T, metricsPort int, agentMode string) string {
	t.Helper()
	rig := n.writeOverlay(t, metricsPort, agentImageTags[0])
	dir := mkdir(t, n.dir, "overlay-intercept")
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../%s
patches:
  - target:
      kind: DaemonSet
      name: nodecache
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --local-ip=169.254.20.10,%s
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --iptables-mode=%s
  # The API server through the kubernetes Service, as the kubelet sets it, not the rig's forwarder.
  - patch: |-
      apiVersion: apps/v1
      kind: DaemonSet
      metadata:
        name: nodecache
        namespace: kube-system
      spec:
        template:
          spec:
            containers:
              - name: nodecache
                env:
                  - name: KUBERNETES_SERVICE_HOST
                    $patch: delete
                  - name: KUBERNETES_SERVICE_PORT
                    $patch: delete
`, filepath.Base(rig), kubeDNSIP, agentMode)
	writeRigFile(t, filepath.Join(dir, "kustomization.yaml"), k)
	return dir
}

// startKubeDNSClient starts the load client in namespace ns; it asks the nameserver of the
// resolv.conf the kubelet wrote, clusterDNS.
func (n *realNode) startKubeDNSClient(ctx context.Context, ns string) *corev1.Pod {
	t := n.t
	c := n.admin
	if _, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := strings.Join([]string{
		"web." + ns + ".svc.cluster.local.,A",
		"www.example.com.,A",
		"kube-dns.kube-system.svc.cluster.local.,A",
	}, ";")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			// ClusterFirst: the kubelet writes its resolv.conf, and dnsload asks its nameserver.
			Containers: []corev1.Container{{
				Name: "dnsload", Image: clientRepo, ImagePullPolicy: corev1.PullNever,
				Args: []string{"-resolv-conf", "/etc/resolv.conf", "-qps", "40", "-timeout", "2s", "-names", names},
			}},
		},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return n.waitPod(ctx, ns, "client", 2*time.Minute)
}
