//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// The stock Corefiles compared, with CoreDNS's kubernetes plugin, against
// nodecache running what `nodecache migrate` makes of them. Each is the
// corpus file (internal/cli/testdata/corpus, with its SOURCE), rendered
// for the rig by renderCorefile; imports are the corpus's import files.
// "stub-under-cluster" is kubeadm's Corefile with another cluster's
// zone forwarded, as the multi-cluster guides set it up.
var compareCases = []struct {
	name, corpus string
	extra        string   // appended to the Corefile
	imports      bool     // the corpus folder's import/ files go to custom/
	questions    []string // "NAME TYPE" beyond the common ones; {ns} is the test namespace
}{
	{name: "kubeadm", corpus: "kubeadm"},
	{name: "k3s", corpus: "k3s", questions: []string{"k3s-node1. A", "k3s-node1. AAAA"}},
	{name: "aks-custom-import", corpus: "aks", imports: true, questions: []string{
		"example1.org. A", "x.abc.com. A", "db.my.cluster.local. A", "y.puglife.local. A"}},
	{name: "stub-under-cluster", corpus: "kubeadm", extra: "other.svc.cluster.local:53 {\n    errors\n    cache 30\n    forward . 192.0.2.250\n}\n",
		questions: []string{"db.other.svc.cluster.local. A", "other.svc.cluster.local. A"}},
}

// commonQuestions are asked of every case: the cluster zone (ClusterIP,
// headless, ExternalName, SRV, reverse, pod records, negative answers) and
// names through the upstream. Two documented differences are left out or
// relaxed: dns-version.<zone> has TTL 28800 in nodecache (the zone's TTL
// in CoreDNS), and " ~ttl" compares without TTLs: an ExternalName's target
// keeps its own TTL in nodecache, where CoreDNS's cache writes every record
// of an answer with the smallest TTL.
var commonQuestions = []string{
	"cip.{ns}.svc.cluster.local. A", "cip.{ns}.svc.cluster.local. AAAA", "_http._tcp.cip.{ns}.svc.cluster.local. SRV",
	"hl.{ns}.svc.cluster.local. A", "web-0.hl.{ns}.svc.cluster.local. A", "_http._tcp.hl.{ns}.svc.cluster.local. SRV",
	"ext.{ns}.svc.cluster.local. A ~ttl", "nope.{ns}.svc.cluster.local. A", "10-244-1-9.{ns}.pod.cluster.local. A",
	"{cipPTR} PTR", "www.example.com. A", "nx.example.com. A", "alias.example.com. A",
}

// renderCorefile makes a stock Corefile runnable in the rig, the same text
// for CoreDNS and for migrate: every server block on {$PORT} (CoreDNS on
// its own port, migrate told 53), the kubernetes plugin pointed at the rig's
// API server, /etc/resolv.conf replaced by the rig's upstream, the files
// of k3s and AKS under dir, and the addresses of the import files' servers
// by the rig's stub server.
func renderCorefile(text, dir, kubeconfig, upstream, stub string) string {
	text = strings.ReplaceAll(text, "%{CLUSTER_DOMAIN}%", clusterDomain) // before the kubernetes line is matched
	text = regexp.MustCompile(`(?m)^(\S+):53 \{`).ReplaceAllString(text, "$1:{$$PORT} {")
	text = regexp.MustCompile(`(?m)^(\s*)kubernetes ([^{\n]*)\{`).ReplaceAllString(text, "${1}kubernetes $2{\n${1}  kubeconfig "+kubeconfig)
	text = strings.ReplaceAll(text, "forward . /etc/resolv.conf", "forward . "+upstream)
	text = strings.ReplaceAll(text, "/etc/coredns/NodeHosts", filepath.Join(dir, "NodeHosts"))
	text = strings.ReplaceAll(text, "/etc/coredns/custom/", filepath.Join(dir, "custom")+"/")
	text = strings.ReplaceAll(text, "import custom/", "import "+filepath.Join(dir, "custom")+"/")
	for _, ip := range []string{"192.11.0.1", "1.2.3.4", "2.3.4.5", "192.0.2.250"} {
		text = strings.ReplaceAll(text, "forward . "+ip, "forward . "+stub)
	}
	return text
}

// TestMigrateMatchesCoreDNSCluster runs, for each stock Corefile, CoreDNS
// v1.15.0 with its kubernetes plugin against the suite's API server and
// nodecache with what migrate wrote of the same Corefile, in one node
// netns, and asks both the same questions: rcode, answer and authority
// records (TTLs to 5 s, SOA serials aside) must agree.
func TestMigrateMatchesCoreDNSCluster(t *testing.T) {
	requireSuite(t)
	coredns := os.Getenv("NODECACHE_COREDNS")
	if coredns == "" {
		home, _ := os.UserHomeDir()
		coredns = filepath.Join(home, ".cache", "nodecache-bench", "bin", "coredns-v1.15.0")
	}
	if _, err := os.Stat(coredns); err != nil {
		t.Fatalf("no CoreDNS binary (%v): bench/build-coredns.sh builds it, or set NODECACHE_COREDNS", err)
	}
	bin, err := agentBuild()
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t, "cmp")
	http := svcPort("http", corev1.ProtocolTCP, 80)
	cip := createService(t, serviceSpec(ns, "cip", corev1.ServiceTypeClusterIP, false, http))
	createService(t, headlessSpec(ns, "hl", http))
	createEndpointSlice(t, ns, "hl", discoveryv1.AddressTypeIPv4, []endpoint{
		{IP: "10.244.1.5", Hostname: "web-0", NodeName: "node-1"}, {IP: "10.244.1.6", NodeName: "node-1"},
		{IP: "10.244.1.7", NodeName: "node-1"}, {IP: "10.244.1.8", NotReady: true}}, http)
	createService(t, externalNameSpec(ns, "ext", "www.example.com"))
	cipPTR, _ := dns.ReverseAddr(cip.Spec.ClusterIP)

	for _, c := range compareCases {
		t.Run(c.name, func(t *testing.T) {
			node := newNetNS(t, "cmp")
			up := startUpstream(t, node, "127.0.0.1")
			stub, _ := startOtherCluster(t, node)
			api := forwardTCP(t, node, strings.TrimPrefix(env.api.URL, "https://"))
			dir := t.TempDir()
			adminKC := filepath.Join(dir, "admin.kubeconfig")
			if err := writeKubeconfig(adminKC, "https://"+api.Addr(), env.api.PKI.caPEM, env.api.AdminToken); err != nil {
				t.Fatal(err)
			}
			src, err := os.ReadFile(filepath.Join("..", "internal", "cli", "testdata", "corpus", c.corpus, "Corefile"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(dir, "custom"), 0o755); err != nil {
				t.Fatal(err)
			}
			if c.imports {
				files, _ := filepath.Glob(filepath.Join("..", "internal", "cli", "testdata", "corpus", c.corpus, "import", "*"))
				for _, f := range files {
					b, err := os.ReadFile(f)
					if err != nil {
						t.Fatal(err)
					}
					writeFileAt(t, filepath.Join(dir, "custom", filepath.Base(f)), renderCorefile(string(b), dir, adminKC, up.Addr, stub))
				}
			}
			writeFileAt(t, filepath.Join(dir, "NodeHosts"), "192.0.2.77 k3s-node1\n")
			corefile := filepath.Join(dir, "Corefile")
			writeFileAt(t, corefile, renderCorefile(string(src)+c.extra, dir, adminKC, up.Addr, stub))

			// nodecache: migrate, then run what it wrote on 127.0.0.1:53.
			cfg := filepath.Join(dir, "nodecache.yaml")
			out, err := exec.Command(bin, "migrate", "--corefile", corefile, "-o", cfg, "--var", "PORT=53",
				"--import-dir", filepath.Join(dir, "custom")).CombinedOutput()
			if err != nil {
				t.Fatalf("migrate: %v\n%s", err, out)
			}
			t.Logf("migrate:\n%s", out)
			sock, err := os.MkdirTemp("", "nc")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(sock) })
			agentKC := agentKubeconfig(t, env.agent, "https://"+api.Addr())
			nc := startNetnsProc(t, node, "nodecache", bin, "run", "--config", cfg, "--local-ip", "127.0.0.1", "--port", "53",
				"--setup-interface=false", "--setup-iptables=false", "--kubeconfig", agentKC, "--node-name", "node-1",
				"--health-addr", "127.0.0.1:18081", "--metrics-addr", "127.0.0.1:19253",
				"--admin-socket", filepath.Join(sock, "admin.sock"), "--handover-socket", filepath.Join(sock, "handover.sock"))
			cd := startNetnsProc(t, node, "coredns", "env", "PORT=1053", coredns, "-conf", corefile)

			ask := func(server, q string) (*dns.Msg, error) {
				name, typ, _ := strings.Cut(q, " ")
				m := new(dns.Msg)
				m.SetQuestion(name, dns.StringToType[typ])
				m.SetEdns0(1232, false)
				return exchangeIn(t.Context(), node, server, m)
			}
			ready := "cip." + ns + ".svc.cluster.local. A"
			for _, srv := range []struct {
				addr string
				p    *proc
			}{{"127.0.0.1:53", nc}, {"127.0.0.1:1053", cd}} {
				deadline := time.Now().Add(60 * time.Second)
				for {
					r, err := ask(srv.addr, ready)
					if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s never answered %s: %v %v\n%s", srv.p.name, ready, r, err, srv.p.logTail(6000))
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			qs := append(append([]string(nil), commonQuestions...), c.questions...)
			for _, q := range qs {
				q = strings.NewReplacer("{ns}", ns, "{cipPTR}", cipPTR).Replace(q)
				q, noTTL := strings.CutSuffix(q, " ~ttl")
				want, werr := ask("127.0.0.1:1053", q)
				got, gerr := ask("127.0.0.1:53", q)
				if werr != nil || gerr != nil {
					t.Errorf("%s: CoreDNS error %v, nodecache error %v", q, werr, gerr)
					continue
				}
				if w, g := compareSummary(want, noTTL), compareSummary(got, noTTL); w != g {
					t.Errorf("%s:\n  CoreDNS:   %s\n  nodecache: %s", q, w, g)
				}
			}
			if t.Failed() {
				t.Logf("Corefile:\n%s\nconfig:\n%s\nCoreDNS log:\n%s\nnodecache log:\n%s", readFile(t, corefile), readFile(t, cfg), cd.logTail(4000), nc.logTail(4000))
			}
		})
	}
}

// compareSummary is what a client sees of an answer: rcode and the answer
// and authority records, sorted (loadbalance shuffles both sides), names
// lowercased, TTLs rounded to 5 s (a cache entry a second older on one
// side does not count; none with noTTL), SOA serials zeroed (each server
// counts its own).
func compareSummary(r *dns.Msg, noTTL bool) string {
	var rrs []string
	for _, sec := range [][]dns.RR{r.Answer, r.Ns} {
		for _, rr := range sec {
			rr = dns.Copy(rr)
			rr.Header().Ttl = (rr.Header().Ttl + 2) / 5 * 5
			if noTTL {
				rr.Header().Ttl = 0
			}
			if soa, ok := rr.(*dns.SOA); ok {
				soa.Serial = 0
			}
			rrs = append(rrs, strings.ToLower(rr.String()))
		}
	}
	sort.Strings(rrs)
	return fmt.Sprintf("%s [%s]", dns.RcodeToString[r.Rcode], strings.Join(rrs, " | "))
}

// exchangeIn sends m over UDP from inside ns to server and reads the reply.
func exchangeIn(ctx context.Context, ns *netNS, server string, m *dns.Msg) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := ns.dial(ctx, "udp", server)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	co := &dns.Conn{Conn: c, UDPSize: 1232}
	if err := co.WriteMsg(m); err != nil {
		return nil, err
	}
	return co.ReadMsg()
}

// startNetnsProc runs argv inside ns until the test ends.
func startNetnsProc(t *testing.T, ns *netNS, name string, argv ...string) *proc {
	t.Helper()
	p, err := startProc(name, filepath.Join(t.TempDir(), name+".log"), append([]string{"ip", "netns", "exec", ns.Name}, argv...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(10 * time.Second) })
	return p
}

func writeFileAt(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	return string(b)
}
