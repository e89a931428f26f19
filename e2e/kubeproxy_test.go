//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestKubeProxyIntercept runs the intercept overlay's setup next to the real kube-proxy (v1.35.4,
// from the build of the other Kubernetes binaries), in iptables mode and then in nftables mode, in
// a node netns of its own: kube-system/kube-dns has ClusterIP 10.96.0.10 and is backed by a DNS
// server in a pod netns, and kube-proxy reads both from the suite's API server and DNATs the
// ClusterIP to it. The agent then holds 169.254.20.10 and the ClusterIP. See
// testKubeProxyIntercept for what is checked.
func TestKubeProxyIntercept(t *testing.T) {
	requireSuite(t)
	kubeProxyBin(t)
	for _, m := range []struct{ proxy, agentMode, backend string }{
		// kube-proxy's iptables mode writes through iptables-nft here (the default
		// alternative); --iptables-mode auto finds its KUBE- chains there.
		{"iptables", "auto", "nft"},
		// nftables mode has no KUBE- chains in iptables: the backend is given.
		{"nftables", "nft", "nft"},
	} {
		t.Run(m.proxy, func(t *testing.T) { testKubeProxyIntercept(t, m.proxy, m.agentMode, m.backend) })
	}
}

// interceptRig is a node with kube-proxy, the kube-dns backend and the agent.
type interceptRig struct {
	agentRig
	kp           *kubeProxy
	backend      *dnsUpstream // kube-dns's only endpoint
	backendPod   *pod
	opts         agentOpts
	backendRules string // iptables backend of the agent's rules
}

// testKubeProxyIntercept: with kube-proxy alone the ClusterIP reaches the backend; with the agent
// both addresses are answered by the agent (its request counter moves, the backend's does not),
// over UDP and TCP, and conntrack holds no entry for DNS to either (a query straight to the
// backend is the tracked control). Then, under 100 UDP and 20 TCP queries a second to the
// ClusterIP: the agent stopped (SIGTERM) → kube-proxy's DNAT takes the queries to the backend;
// the agent started again → it answers them again; `kube-proxy --cleanup` and a new kube-proxy
// while the agent runs → the agent keeps answering, its rules are the same lines as before, none
// twice, and still no conntrack entry. No UDP query is lost, refused, SERVFAILed or wrong; the
// longest stretch without an answer around each switch is logged. A TCP connection open at the
// instant the agent's rules go or come is reset (its next packet is tracked and DNATed to the
// backend, or untracked and delivered to the agent, neither of which has the connection): that,
// within the switch, is the one TCP failure allowed; anything else fails.
func testKubeProxyIntercept(t *testing.T, proxyMode, agentMode, backendRules string) {
	node := newNetNS(t, "node")
	nsCommand(t, node, "sysctl", "-qw", "net.ipv4.ip_forward=1") // pod to pod through the node
	r := &interceptRig{backendRules: backendRules}
	r.node = node
	r.pod = addPod(t, node, linkLocalIP, kubeDNSIP)
	r.backendPod = addPod(t, node)
	r.backend = startUpstream(t, r.backendPod.NS, r.backendPod.IP)
	r.up = startUpstream(t, node, "127.0.0.1")
	createKubeDNS(t, r.backend.Addr)
	nodeName := "kp-" + proxyMode
	r.kp = startKubeProxy(t, node, proxyMode, nodeName, r.pod.Gateway)

	b0 := r.backend.Queries.Load()
	r.await(t, query{Server: kubeDNSIP, Name: "www.example.com."}, time.Now(), hasData(dns.TypeA, "192.0.2.10"))
	if r.backend.Queries.Load() == b0 {
		t.Fatalf("kube-proxy alone: %s answered without the backend seeing a query, want its DNAT to the backend", kubeDNSIP)
	}

	r.opts = agentOpts{NodeName: nodeName, ExtraLocalIPs: []string{kubeDNSIP},
		Flags: []string{"--iptables-mode=" + agentMode, "--sync-interval=1s"}}
	r.agent = startAgent(t, node, r.up, r.opts)
	r.checkAgentAnswers(t, "agent started")
	r.checkNoDNSConntrack(t, "agent started")
	before, err := ruleSnapshot(t, node, backendRules)
	if err != nil {
		t.Errorf("agent's rules at start: %v\n%s", err, strings.Join(before, "\n"))
	}
	r.checkSwitches(t, before)
}

// checkAgentAnswers asks both addresses over UDP and TCP and wants the agent to answer every
// query, the backend none.
func (r *interceptRig) checkAgentAnswers(t testing.TB, when string) {
	t.Helper()
	b0, q0 := r.backend.Queries.Load(), r.agent.requests(t)
	asked := 0
	for _, server := range []string{linkLocalIP, kubeDNSIP} {
		for _, tcp := range []bool{false, true} {
			for _, name := range []string{"www.example.com.", "kube-dns.kube-system.svc." + clusterDomain + "."} {
				a := r.ask(t, query{Server: server, Name: name, TCP: tcp})
				asked++
				if a.Rcode != "NOERROR" || len(a.Data(dns.TypeA)) != 1 {
					t.Errorf("%s: %s at %s (tcp=%v): got %v, want NOERROR with one A", when, name, server, tcp, a)
				}
			}
		}
	}
	if got := r.agent.requests(t) - q0; got < float64(asked) {
		t.Errorf("%s: the agent's request counter moved by %v for %d queries, want at least %d", when, got, asked, asked)
	}
	if got := r.backend.Queries.Load() - b0; got != 0 {
		t.Errorf("%s: the kube-dns backend got %d of %d queries, want 0 (the agent answers)", when, got, asked)
	}
}

// checkNoDNSConntrack flushes the node's conntrack table, asks both addresses over UDP and TCP and
// the backend directly (the control, forwarded by the node and so tracked there), and wants
// conntrack entries for the control only.
func (r *interceptRig) checkNoDNSConntrack(t testing.TB, when string) {
	t.Helper()
	nsCommand(t, r.node, "conntrack", "-F")
	for _, server := range []string{linkLocalIP, kubeDNSIP} {
		for _, tcp := range []bool{false, true} {
			if a := r.ask(t, query{Server: server, Name: "www.example.com.", TCP: tcp}); a.Rcode != "NOERROR" {
				t.Errorf("%s: www.example.com. at %s (tcp=%v): got %v, want NOERROR", when, server, tcp, a)
			}
		}
	}
	host, port, _ := net.SplitHostPort(r.backend.Addr)
	if a := r.ask(t, query{Server: host, Port: port, Name: "www.example.com."}); a.Rcode != "NOERROR" {
		t.Errorf("%s: the backend directly: got %v, want NOERROR", when, a)
	}
	tracked := nsCommand(t, r.node, "conntrack", "-L", "-f", "ipv4")
	for _, ip := range []string{linkLocalIP, kubeDNSIP} {
		if n := dnsFlows(tracked, ip); n != 0 {
			t.Errorf("%s: conntrack in the node: got %d DNS entries for %s, want none\n%s", when, n, ip, tracked)
		}
	}
	if !strings.Contains(tracked, "dst="+host+" ") {
		t.Errorf("%s: conntrack in the node: got no entry for the control query to %s, want one (is conntrack active?)\n%s", when, host, tracked)
	}
}

// checkSwitches runs the load and the three switches; before is the agent's rules at start.
func (r *interceptRig) checkSwitches(t *testing.T, before []string) {
	names := []loadName{
		{Name: "www.example.com.", Type: dns.TypeA, Rcode: dns.RcodeSuccess},
		{Name: "txt.example.com.", Type: dns.TypeTXT, Rcode: dns.RcodeSuccess},
		{Name: "nope.example.com.", Type: dns.TypeA, Rcode: dns.RcodeNameError},
	}
	server := kubeDNSIP + ":53"
	const timeout = 2 * time.Second
	udp := startLoad(t, r.pod.NS, server, names, 100, 4, timeout)
	tcp := startLoadNet(t, r.pod.NS, "tcp", server, names, 20, 2, timeout)
	udp.waitAnswered(t, time.Now(), 200)

	// The agent goes: kube-proxy's DNAT takes over.
	b0 := r.backend.Queries.Load()
	stopAt := time.Now()
	r.agent.stop(t)
	stopped := time.Now()
	eventually(t, "queries reaching the backend after the agent stopped", func() error {
		if r.backend.Queries.Load() == b0 {
			return fmt.Errorf("the backend got none")
		}
		return nil
	})
	udp.waitAnswered(t, stopped, 200)

	// The agent comes back and takes the ClusterIP again.
	backAt := time.Now()
	r.agent = startAgent(t, r.node, r.up, r.opts)
	ready := time.Now()
	udp.waitAnswered(t, ready, 50)
	b1 := r.backend.Queries.Load()
	udp.waitAnswered(t, ready, 250)
	if got := r.backend.Queries.Load() - b1; got != 0 {
		t.Errorf("agent back: the backend got %d more queries, want 0", got)
	}

	// kube-proxy's rules flushed and written again while the agent runs.
	cleanAt := time.Now()
	r.kp.stop(t)
	if out, err := r.kp.cleanup(); err != nil {
		t.Errorf("kube-proxy --cleanup: %v\n%s", err, out)
	}
	r.kp.start(t)
	restarted := time.Now()
	udp.waitAnswered(t, restarted, 200)
	if got := r.backend.Queries.Load() - b1; got != 0 {
		t.Errorf("kube-proxy flushed and restarted: the backend got %d more queries, want 0 (the agent's rules still win)", got)
	}
	eventually(t, "the agent's rules as at start, none twice", func() error {
		after, err := ruleSnapshot(t, r.node, r.backendRules)
		if err == nil && !slices.Equal(after, before) {
			err = fmt.Errorf("got\n%s\nwant\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
		}
		return err
	})
	r.checkNoDNSConntrack(t, "kube-proxy restarted")

	results, err := udp.stop()
	tresults, terr := tcp.stop()
	if err != nil || terr != nil {
		t.Fatalf("load: udp %v, tcp %v", err, terr)
	}
	switches := []struct {
		what string
		w    window
	}{
		{"agent stopped", window{stopAt.Add(-timeout), stopped.Add(time.Second)}},
		{"agent back", window{backAt, ready.Add(time.Second)}},
		{"kube-proxy --cleanup and restart", window{cleanAt, restarted.Add(time.Second)}},
	}
	for _, w := range switches {
		in, _ := summarise(results, []window{w.w})
		tin, _ := summarise(tresults, []window{w.w})
		t.Logf("%s: longest UDP gap %v, TCP %v; udp %v; tcp %v", w.what, longestGap(results, w.w).Round(time.Millisecond),
			longestGap(tresults, w.w).Round(time.Millisecond), in, tin)
	}
	s := stats(results)
	t.Logf("udp load: %v", s)
	if s.N == 0 || s.Outcomes[loadOK] != s.N {
		t.Errorf("udp load: got %v %v, want every query answered with its rcode", s, s.Details)
	}
	t.Logf("tcp load: %v", stats(tresults))
	flips := []window{switches[0].w, switches[1].w}
	for _, q := range tresults {
		reset := strings.Contains(q.Detail, "connection reset by peer")
		inFlip := slices.ContainsFunc(flips, func(w window) bool { return w.holds(q.Sent) })
		if q.Outcome != loadOK && !(reset && inFlip) {
			t.Errorf("tcp query sent at %v: got %s (%s), want an answer with its rcode, or a reset while the agent's rules come or go",
				q.Sent.Format(time.StampMicro), q.Outcome, q.Detail)
		}
	}
}

// longestGap is the longest stretch of w in which no answer with the wanted rcode arrived.
func longestGap(rs []loadResult, w window) time.Duration {
	var at []time.Time
	for _, r := range rs {
		if a := r.Sent.Add(r.RTT); r.Outcome == loadOK && w.holds(a) {
			at = append(at, a)
		}
	}
	slices.SortFunc(at, time.Time.Compare)
	prev, gap := w.From, time.Duration(0)
	for _, a := range at {
		gap = max(gap, a.Sub(prev))
		prev = a
	}
	return max(gap, w.To.Sub(prev))
}
