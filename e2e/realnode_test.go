//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodecache/nodecache/e2e/tools/dnsload/loadrec"
)

// TestRealNode installs the DaemonSet with `kubectl apply -k` on a real
// kubelet and checks, in order, what a user meets: the agent's pod becomes
// Ready and sets up the node; a pod the kubelet gave `nameserver
// 169.254.20.10` resolves through it; rollouts under steady load lose
// nothing and restart nothing, and each pod's readiness is its own; a
// SIGKILL of the agent costs seconds, not the node's DNS, and leaves no
// duplicate rule; `kubectl delete -k` leaves the node clean. The steps share
// one cluster (it takes a minute to start), so they run in sequence.
func TestRealNode(t *testing.T) {
	n := sharedRealNode(t)
	ctx := t.Context()
	metricsPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	overlay := n.writeOverlay(t, metricsPort, agentImageTags[0])
	n.namespace(t, clientNS)
	t.Cleanup(func() { n.uninstallAgent(t, overlay) })

	// 1. Install.
	start := time.Now()
	if out, err := n.kubectl(ctx, "apply", "-k", overlay); err != nil {
		t.Fatalf("installing: %v", err)
	} else {
		t.Logf("kubectl apply -k:\n%s", out)
	}
	agent := n.waitAgents(ctx, 1, 3*time.Minute)[0]
	t.Logf("install: agent pod %s Ready %v after kubectl apply", agent.Name, time.Since(start).Round(100*time.Millisecond))
	if err := n.hostStateProblems(); err != nil {
		t.Fatalf("after install: %v", err)
	}

	// 2. A pod resolves through it.
	client := n.startClient(ctx)
	n.checkResolvConf(ctx, client)
	n.checkPodResolves(ctx, client, metricsPort)

	// 3 and 6. Rollouts under load; probes are each pod's own.
	n.checkRollouts(ctx, client)

	// 4. Crash.
	n.checkServingKill(ctx, client)
	n.checkServingOOM(ctx, client, metricsPort)
	n.checkCrash(ctx, client)

	// 5. Uninstall.
	n.uninstallAgent(t, overlay)
}

// uninstallAgent runs `kubectl delete -k` of the overlay, waits until no
// agent pod is left and wants the node clean. Nothing to delete is fine:
// tests call it from t.Cleanup too, so that a failed test leaves no agent
// on the shared node.
func (n *realNode) uninstallAgent(t testing.TB, overlay string) {
	t.Helper()
	ctx := context.Background()
	if out, err := n.kubectl(ctx, "delete", "-k", overlay, "--wait=true", "--ignore-not-found"); err != nil {
		t.Errorf("uninstalling: %v", err)
		return
	} else if strings.TrimSpace(out) != "" {
		t.Logf("kubectl delete -k:\n%s", out)
	}
	eventuallyWithin(t, 2*time.Minute, "no agent pod left", func() error {
		pods := n.agentPods(ctx)
		if len(pods) > 0 {
			return fmt.Errorf("%d agent pods left", len(pods))
		}
		return nil
	})
	eventuallyWithin(t, 30*time.Second, "the node clean after uninstall", n.leftovers)
}

const agentNS = "kube-system"
const clientNS = "e2e"

// writeOverlay writes a kustomization over deploy/base that runs the
// imported image and points the agent at the rig: the API server through
// the node's forwarder, the test upstream, metrics on the node's loopback,
// and the hostPath state under the rig's directory.
func (n *realNode) writeOverlay(t *testing.T, metricsPort int, tag string) string {
	t.Helper()
	dir := mkdir(t, n.dir, "overlay")
	base, err := filepath.Abs("../deploy/base")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	_, apiPort, _ := net.SplitHostPort(n.apiFwd.Addr())
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: ghcr.io/nodecache/nodecache
    newName: %s
    newTag: %s
patches:
  - patch: |-
      apiVersion: apps/v1
      kind: DaemonSet
      metadata:
        name: nodecache
        namespace: kube-system
      spec:
        # Long enough that the surge pair is seen by the test's sampler.
        minReadySeconds: 3
        template:
          spec:
            containers:
              - name: nodecache
                imagePullPolicy: Never
                args:
                  - run
                  - --config=/etc/nodecache/config.yaml
                  - --metrics-addr=127.0.0.1:%d
                  - --pod-state-dir=/var/run/nodecache-pod
                  - --upstream=%s
                env:
                  - name: KUBERNETES_SERVICE_HOST
                    value: "127.0.0.1"
                  - name: KUBERNETES_SERVICE_PORT
                    value: "%s"
            volumes:
              - name: run
                hostPath:
                  path: %s
                  type: DirectoryOrCreate
`, rel, agentRepo, tag, metricsPort, n.upstream.Addr, apiPort, filepath.Join(n.dir, "run-nodecache"))
	writeRigFile(t, filepath.Join(dir, "kustomization.yaml"), k)
	return dir
}

// agentPods lists the agent's pods, oldest first.
func (n *realNode) agentPods(ctx context.Context) []corev1.Pod {
	list, err := n.admin.CoreV1().Pods(agentNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nodecache"})
	if err != nil {
		n.t.Logf("listing agent pods: %v", err)
		return nil
	}
	pods := list.Items
	sort.Slice(pods, func(i, j int) bool { return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp) })
	return pods
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitAgents waits until exactly want agent pods exist, all Running and
// Ready.
func (n *realNode) waitAgents(ctx context.Context, want int, d time.Duration) []corev1.Pod {
	var pods []corev1.Pod
	eventuallyWithin(n.t, d, fmt.Sprintf("%d agent pod(s) Ready", want), func() error {
		pods = n.agentPods(ctx)
		if len(pods) != want {
			return fmt.Errorf("%d agent pods", len(pods))
		}
		for i := range pods {
			if !podReady(&pods[i]) {
				return fmt.Errorf("agent pod %s not ready: %s %s", pods[i].Name, pods[i].Status.Phase, podWhy(&pods[i]))
			}
		}
		return nil
	})
	return pods
}

// hostStateProblems checks the node: the link with the link-local address,
// the NOTRACK rules, and every nodecache rule once.
func (n *realNode) hostStateProblems() error {
	out, err := ipCmd("-n", n.ns.Name, "addr", "show", "dev", "nodelocaldns")
	if err != nil {
		return fmt.Errorf("link nodelocaldns: %w", err)
	}
	if !strings.Contains(out, linkLocalIP+"/") {
		return fmt.Errorf("link nodelocaldns lacks %s:\n%s", linkLocalIP, out)
	}
	var all strings.Builder
	for _, be := range []string{"nft", "legacy"} {
		for _, table := range []string{"raw", "filter"} {
			save, err := nsOutput(n.ns, "iptables-"+be+"-save", "-t", table)
			if err != nil {
				return err
			}
			seen := map[string]int{}
			for _, line := range strings.Split(save, "\n") {
				if strings.HasPrefix(line, "-A ") && strings.Contains(line, "nodecache") {
					seen[line]++
				}
			}
			for line, c := range seen {
				if c != 1 {
					return fmt.Errorf("iptables-%s -t %s: %d copies of %q", be, table, c, line)
				}
			}
			all.WriteString(save)
		}
	}
	return checkNotrackRules(all.String())
}

// leftovers says what nodecache left on the node: its link, its address,
// any nodecache rule or chain in either backend.
func (n *realNode) leftovers() error {
	var left []string
	if _, err := ipCmd("-n", n.ns.Name, "link", "show", "dev", "nodelocaldns"); err == nil {
		left = append(left, "link nodelocaldns")
	}
	if out, _ := ipCmd("-n", n.ns.Name, "addr", "show"); strings.Contains(out, linkLocalIP+"/") {
		left = append(left, "address "+linkLocalIP)
	}
	for _, be := range []string{"nft", "legacy"} {
		for _, fam := range []string{"iptables", "ip6tables"} {
			for _, table := range []string{"raw", "filter"} {
				save, err := nsOutput(n.ns, fam+"-"+be+"-save", "-t", table)
				if err != nil {
					return err
				}
				for _, line := range strings.Split(save, "\n") {
					if strings.Contains(line, "NODECACHE") || strings.Contains(line, "nodecache") {
						left = append(left, fam+"-"+be+" "+table+": "+line)
					}
				}
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left on the node:\n%s", strings.Join(left, "\n"))
	}
	return nil
}

func nsOutput(ns *netNS, argv ...string) (string, error) {
	out, err := execOutput("ip", append([]string{"netns", "exec", ns.Name}, argv...)...)
	if err != nil {
		return out, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out)
	}
	return out, nil
}

// startClient creates the objects the client resolves and the client pod,
// which runs dnsload from its start.
func (n *realNode) startClient(ctx context.Context) *corev1.Pod {
	t := n.t
	c := n.admin
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clientNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	web, err := c.CoreV1().Services(clientNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.webIP = web.Spec.ClusterIP
	if _, err := c.CoreV1().Services(clientNS).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.dbIPs = []string{"10.244.7.11", "10.244.7.12"}
	var eps []discoveryv1.Endpoint
	for _, ip := range n.dbIPs {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	if _, err := c.DiscoveryV1().EndpointSlices(clientNS).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "db-1", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Port: ptr.To[int32](5432), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := strings.Join([]string{
		"web." + clientNS + ".svc.cluster.local.,A",
		"db." + clientNS + ".svc.cluster.local.,A",
		"www.example.com.,A",
		"kubernetes.default.svc.cluster.local.,A",
	}, ";")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers: []corev1.Container{{
				Name: "dnsload", Image: clientRepo, ImagePullPolicy: corev1.PullNever,
				Args: []string{"-server", linkLocalIP + ":53", "-qps", "40", "-timeout", "2s", "-names", names},
			}},
		},
	}
	if _, err := c.CoreV1().Pods(clientNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return n.waitPod(ctx, clientNS, "client", 2*time.Minute)
}

// checkResolvConf wants the resolv.conf the kubelet wrote for a
// ClusterFirst pod: the agent's IP, the namespace's search path, ndots:5.
func (n *realNode) checkResolvConf(ctx context.Context, client *corev1.Pod) {
	t := n.t
	out, err := n.exec(ctx, client, "/usr/local/bin/dnsload", "-cat", "/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("client pod /etc/resolv.conf (written by the kubelet):\n%s", out)
	for _, want := range []string{
		"nameserver " + linkLocalIP,
		"search " + clientNS + ".svc.cluster.local svc.cluster.local cluster.local",
		"ndots:5",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("client resolv.conf: want a line with %q", want)
		}
	}
}

// checkPodResolves resolves through the pod's own resolver: glibc getent by
// short name (the search path) and FQDN, dig for the headless Service and an
// external name; then the agent's metrics must have counted queries.
func (n *realNode) checkPodResolves(ctx context.Context, client *corev1.Pod, metricsPort int) {
	t := n.t
	before := n.agentRequests(metricsPort)
	for _, name := range []string{"web", "web." + clientNS, "web." + clientNS + ".svc.cluster.local"} {
		out, err := n.exec(ctx, client, "getent", "ahostsv4", name)
		if err != nil {
			t.Errorf("getent ahostsv4 %s in the client pod: %v", name, err)
			continue
		}
		if !strings.Contains(out, n.webIP) {
			t.Errorf("getent ahostsv4 %s: got\n%s\nwant the ClusterIP %s", name, out, n.webIP)
		}
	}
	out, err := n.exec(ctx, client, "dig", "+short", "+search", "db")
	if err != nil {
		t.Errorf("dig db: %v", err)
	}
	got := strings.Fields(out)
	slices.Sort(got)
	if !slices.Equal(got, n.dbIPs) {
		t.Errorf("dig +search db (headless): got %v, want %v", got, n.dbIPs)
	}
	out, err = n.exec(ctx, client, "getent", "ahostsv4", "www.example.com")
	if err != nil || !strings.Contains(out, "192.0.2.10") {
		t.Errorf("getent ahostsv4 www.example.com (through the upstream): got %q, %v; want 192.0.2.10", out, err)
	}
	if after := n.agentRequests(metricsPort); after <= before {
		t.Errorf("nodecache_server_requests_total: %v before the client's queries, %v after; want it counting them", before, after)
	} else {
		t.Logf("agent counted %v requests (from %v)", after, before)
	}
}

// agentRequests reads nodecache_server_requests_total from the serving
// agent's metrics listener (the node's loopback) through `kubectl
// port-forward`.
func (n *realNode) agentRequests(port int) float64 {
	return metricSum(n.t, n.agentMetrics(port), "nodecache_server_requests_total")
}

// agentMetrics reads the serving agent's /metrics through `kubectl
// port-forward`.
func (n *realNode) agentMetrics(port int) string {
	t := n.t
	pods := n.agentPods(t.Context())
	if len(pods) == 0 {
		t.Fatal("no agent pod to read metrics from")
	}
	addr, stop, err := n.portForward(t.Context(), &pods[len(pods)-1], port)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // the test's own forward
	if err != nil {
		t.Fatalf("agent metrics through kubectl port-forward: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("agent metrics: %v", err)
	}
	return string(b)
}

// surgeSample is what the sampler saw of the agent pods at one moment.
type surgeSample struct {
	at   time.Time
	pods []corev1.Pod
}

// rolloutStep is one change that rolls the DaemonSet: a name for the log
// and what makes it.
type rolloutStep struct {
	name string
	run  func(ctx context.Context) error
}

// kubectlRollouts are five rollouts made with kubectl: rollout restart and
// set image, alternately.
func (n *realNode) kubectlRollouts() []rolloutStep {
	var steps []rolloutStep
	for _, step := range [][]string{
		{"rollout", "restart", "daemonset/nodecache"},
		{"set", "image", "daemonset/nodecache", "nodecache=" + agentImage(agentImageTags[1])},
		{"rollout", "restart", "daemonset/nodecache"},
		{"set", "image", "daemonset/nodecache", "nodecache=" + agentImage(agentImageTags[0])},
		{"rollout", "restart", "daemonset/nodecache"},
	} {
		steps = append(steps, rolloutStep{"kubectl " + strings.Join(step, " "), func(ctx context.Context) error {
			_, err := n.kubectl(ctx, append([]string{"-n", agentNS}, step...)...)
			return err
		}})
	}
	return steps
}

// checkRollouts runs five rollouts (restart and image change, alternately)
// while the client pod's load runs, and checks what each must keep.
func (n *realNode) checkRollouts(ctx context.Context, client *corev1.Pod) {
	n.checkRolloutsWith(ctx, client, n.kubectlRollouts())
}

// checkRolloutsWith runs the rollouts of steps, one after another, while
// the client pod's load runs, and checks what each must keep.
func (n *realNode) checkRolloutsWith(ctx context.Context, client *corev1.Pod, steps []rolloutStep) {
	t := n.t
	steadyFrom := time.Now()
	time.Sleep(10 * time.Second) // a steady-state window to compare against
	steadyTo := time.Now()

	sctx, stop := context.WithCancel(ctx)
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		hostBad     []string
		maxRestarts = map[string]int32{}
		samples     []surgeSample
	)
	wg.Add(2)
	go func() { // link and rules present throughout
		defer wg.Done()
		for sctx.Err() == nil {
			if err := n.hostStateProblems(); err != nil {
				mu.Lock()
				hostBad = append(hostBad, time.Now().Format("15:04:05.000")+" "+err.Error())
				mu.Unlock()
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()
	go func() { // restarts and readiness of every agent pod
		defer wg.Done()
		for sctx.Err() == nil {
			pods := n.agentPods(sctx)
			mu.Lock()
			for _, p := range pods {
				for _, cs := range p.Status.ContainerStatuses {
					maxRestarts[p.Name] = max(maxRestarts[p.Name], cs.RestartCount)
				}
			}
			if len(pods) > 1 {
				samples = append(samples, surgeSample{at: time.Now(), pods: pods})
			}
			mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
	}()

	rolloutFrom := time.Now()
	var perRollout []time.Duration
	for i, step := range steps {
		t0 := time.Now()
		if err := step.run(ctx); err != nil {
			t.Fatalf("rollout %d (%s): %v", i+1, step.name, err)
		}
		if _, err := n.kubectl(ctx, "-n", agentNS, "rollout", "status", "daemonset/nodecache", "--timeout=3m"); err != nil {
			n.logAgents(ctx)
			t.Fatalf("rollout %d (%s): %v", i+1, step.name, err)
		}
		n.waitAgents(ctx, 1, 2*time.Minute)
		perRollout = append(perRollout, time.Since(t0))
	}
	rolloutTo := time.Now()
	stop()
	wg.Wait()
	t.Logf("5 rollouts took %v (each %v)", rolloutTo.Sub(rolloutFrom).Round(time.Second), roundAll(perRollout))

	// Each pod at most once, each restart count 0.
	for name, r := range maxRestarts {
		if r != 0 {
			t.Errorf("agent pod %s: restartCount reached %d during the rollouts, want 0", name, r)
		}
	}
	if len(maxRestarts) != len(steps)+1 {
		t.Errorf("saw %d agent pods over %d rollouts, want %d", len(maxRestarts), len(steps), len(steps)+1)
	}
	for _, b := range hostBad {
		t.Errorf("host state during the rollouts: %s", b)
	}
	// Readiness is each pod's own: during a surge the pod that handed
	// over reports not ready while the new one reports ready. An HTTP probe
	// on a shared port would make both say the same.
	split := 0
	for _, s := range samples {
		// The old pod's own container still running, never restarted,
		// and reporting not ready: its process says it serves nothing.
		if len(s.pods) == 2 && !podReady(&s.pods[0]) && podReady(&s.pods[1]) && runningNeverRestarted(&s.pods[0]) {
			split++
		}
	}
	t.Logf("surge samples: %d with two pods, %d with the old pod not ready and the new one ready", len(samples), split)
	if split == 0 {
		t.Errorf("no surge sample showed the old pod not ready beside a ready new one: readiness is not per pod")
	}

	// The client's view: nothing lost, no SERVFAIL, latency against steady
	// state. Wait for the last second's queries to time out or answer.
	time.Sleep(3 * time.Second)
	secs := n.clientSeconds(client)
	steady := summarize(secs, steadyFrom, steadyTo)
	roll := summarize(secs, rolloutFrom, rolloutTo)
	t.Logf("steady state  %s", steady)
	t.Logf("during rollouts %s", roll)
	if steady.sent < 100 || roll.sent < 100 {
		t.Fatalf("the client sent %d queries in steady state and %d during rollouts: the load did not run", steady.sent, roll.sent)
	}
	for _, s := range []windowSummary{steady, roll} {
		if s.lost != 0 || s.rcodes["SERVFAIL"] != 0 || s.rcodes["error"] != 0 || s.resent != 0 {
			t.Errorf("%s: lost %d, SERVFAIL %d, errors %d, TCP resent %d (%s); want none", s.name, s.lost, s.rcodes["SERVFAIL"], s.rcodes["error"], s.resent, s.firstErr)
		}
	}
}

func runningNeverRestarted(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil || cs.RestartCount != 0 {
			return false
		}
	}
	return true
}

func roundAll(ds []time.Duration) []string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Round(100*time.Millisecond).String())
	}
	return s
}

func (n *realNode) logAgents(ctx context.Context) {
	for _, p := range n.agentPods(ctx) {
		n.t.Logf("agent pod %s: %s ready=%v %s", p.Name, p.Status.Phase, podReady(&p), podWhy(&p))
		for _, f := range podLogFiles(n.dir, p.Namespace, p.Name) {
			b, _ := os.ReadFile(f)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			n.t.Logf("--- %s ---\n%s", f, b)
		}
	}
}

// podLogFiles are the kubelet's log files of a pod's containers.
func podLogFiles(dir, ns, name string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "pod-logs", ns+"_"+name+"_*", "*", "*.log*"))
	return m
}

// clientSeconds reads the client pod's per-second records with `kubectl
// logs` (one JSON object a line).
func (n *realNode) clientSeconds(client *corev1.Pod) []loadrec.Second {
	t := n.t
	out, err := n.podLogs(t.Context(), client)
	if err != nil {
		t.Fatalf("client pod logs: %v", err)
	}
	var secs []loadrec.Second
	for _, line := range strings.Split(out, "\n") {
		var s loadrec.Second
		if err := json.Unmarshal([]byte(line), &s); err == nil {
			secs = append(secs, s)
		}
	}
	return secs
}

type windowSummary struct {
	name           string
	sent, ok, lost int
	resent         int // TCP queries answered on a second connection (loadrec.Second.Resent)
	rcodes         map[string]int
	p50, p99       time.Duration
	firstErr       string
}

func (w windowSummary) String() string {
	s := fmt.Sprintf("%s: sent %d, answered %d, lost %d, rcodes %v, p50 %v, p99 %v",
		w.name, w.sent, w.ok, w.lost, w.rcodes, w.p50, w.p99)
	if w.resent > 0 {
		s += fmt.Sprintf(", %d TCP queries resent on a new connection and answered", w.resent)
	}
	if w.firstErr != "" {
		s += fmt.Sprintf(", first error %q", w.firstErr)
	}
	return s
}

// summarize adds up the seconds in [from, to] and takes percentiles from
// the merged latency histograms (loadrec.BucketUpper).
func summarize(secs []loadrec.Second, from, to time.Time) windowSummary {
	w := windowSummary{name: from.Format("15:04:05") + "-" + to.Format("15:04:05"), rcodes: map[string]int{}}
	buckets := map[int]int{}
	for _, s := range secs {
		if s.T < from.Unix() || s.T > to.Unix() {
			continue
		}
		w.sent += s.Sent
		w.ok += s.OK
		w.lost += s.Lost
		w.resent += s.Resent
		for k, v := range s.Rcodes {
			w.rcodes[k] += v
		}
		for k, v := range s.Buckets {
			buckets[k] += v
		}
		if w.firstErr == "" && s.Err != "" {
			w.firstErr = s.Proto + ": " + s.Err
		}
	}
	keys := make([]int, 0, len(buckets))
	total := 0
	for k, v := range buckets {
		keys = append(keys, k)
		total += v
	}
	sort.Ints(keys)
	pct := func(p float64) time.Duration {
		need := int(math.Ceil(p * float64(total)))
		seen := 0
		for _, k := range keys {
			seen += buckets[k]
			if seen >= need {
				return loadrec.BucketUpper(k)
			}
		}
		return 0
	}
	if total > 0 {
		w.p50, w.p99 = pct(0.50), pct(0.99)
	}
	return w
}

// checkCrash SIGKILLs the agent's process inside its container: the kubelet
// restarts it; report the time to the first answer and the client's losses,
// and want the rules whole and single.
func (n *realNode) checkCrash(ctx context.Context, client *corev1.Pod) {
	t := n.t
	agent := n.waitAgents(ctx, 1, time.Minute)[0]
	pid := n.agentPID(ctx, &agent)
	killedAt := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
	// The signal is asynchronous: an answer from the dying process, or the
	// pod's status from before the kill, would end the waits below early.
	eventuallyWithin(t, 30*time.Second, fmt.Sprintf("agent process %d gone", pid), func() error {
		if processGone(pid) {
			return nil
		}
		return fmt.Errorf("pid %d still running", pid)
	})
	firstAnswer := n.untilAnswer(killedAt)
	var restarted corev1.Pod
	eventuallyWithin(t, 2*time.Minute, "the agent container restarted and Ready", func() error {
		pods := n.agentPods(ctx)
		if len(pods) != 1 || restartCount(&pods[0]) < 1 || !podReady(&pods[0]) {
			return fmt.Errorf("agent pods %d, want one Ready with a restart", len(pods))
		}
		restarted = pods[0]
		return nil
	})
	time.Sleep(3 * time.Second) // the last second's queries answer or time out
	w := summarize(n.clientSeconds(client), killedAt.Add(-time.Second), killedAt.Add(firstAnswer+time.Second))
	t.Logf("crash: kill -9 of the agent (pid %d): first answer after %v; restartCount %d; client during the outage %s",
		pid, firstAnswer.Round(10*time.Millisecond), restartCount(&restarted), w)
	if got := restartCount(&restarted); got != 1 {
		t.Errorf("restartCount after kill -9: got %d, want 1 (the kubelet restarts the container)", got)
	}
	if err := n.hostStateProblems(); err != nil {
		t.Errorf("after the crash and restart: %v", err)
	}

	// SIGTERM to the container alone (what the kubelet sends when it
	// restarts a container, e.g. after failed liveness probes): the pod is
	// not being deleted, so the link and rules must stay throughout.
	pid = n.agentPID(ctx, &restarted)
	sctx, stop := context.WithCancel(ctx)
	var bad []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sctx.Err() == nil {
			if err := n.hostStateProblems(); err != nil {
				bad = append(bad, err.Error())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	termAt := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("kill -TERM %d: %v", pid, err)
	}
	eventuallyWithin(n.t, 2*time.Minute, "the agent container restarted and Ready", func() error {
		pods := n.agentPods(ctx)
		if len(pods) != 1 || restartCount(&pods[0]) != 2 || !podReady(&pods[0]) {
			return fmt.Errorf("agent pods %d, want one Ready with restartCount 2", len(pods))
		}
		return nil
	})
	restartedIn := time.Since(termAt)
	stop()
	<-done
	t.Logf("container restart: SIGTERM of the agent (pid %d): Ready again after %v; %d host-state samples, every 100 ms, bad",
		pid, restartedIn.Round(100*time.Millisecond), len(bad))
	if len(bad) > 0 {
		t.Errorf("host state while the container restarted (want it kept), %d samples bad; first: %s", len(bad), bad[0])
		n.logAgents(ctx)
	}
	if err := n.hostStateProblems(); err != nil {
		t.Errorf("after the container restart: %v", err)
	}
}

// processGone says whether pid has exited (no such process, or a zombie
// its parent has not reaped yet).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) STATE ...: comm may hold spaces, so read after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

func restartCount(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// agentPID is the host PID of the agent container's process.
func (n *realNode) agentPID(ctx context.Context, agent *corev1.Pod) int {
	out, err := n.ctr(ctx, "tasks", "ls")
	if err != nil {
		n.t.Fatal(err)
	}
	id := containerID(agent)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == id && f[2] == "RUNNING" {
			var pid int
			if _, err := fmt.Sscan(f[1], &pid); err == nil {
				return pid
			}
		}
	}
	n.t.Fatalf("no running task for the agent container %s in:\n%s", id, out)
	return 0
}

// untilAnswer asks the link-local IP from the node until the agent answers
// a Service name, and returns the time since from.
func (n *realNode) untilAnswer(from time.Time) time.Duration {
	q := new(dns.Msg)
	q.SetQuestion("web."+clientNS+".svc.cluster.local.", dns.TypeA)
	var took time.Duration
	eventuallyWithin(n.t, 3*time.Minute, "an answer from the agent", func() error {
		var r *dns.Msg
		err := n.ns.do(func() error {
			var err error
			r, _, err = (&dns.Client{Timeout: 300 * time.Millisecond}).Exchange(q, linkLocalIP+":53")
			return err
		})
		if err != nil {
			return err
		}
		if r.Rcode != dns.RcodeSuccess {
			return fmt.Errorf("rcode %s", dns.RcodeToString[r.Rcode])
		}
		took = time.Since(from)
		return nil
	})
	return took
}
