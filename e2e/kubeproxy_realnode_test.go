//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodecache/nodecache/e2e/tools/dnsload/loadrec"
)

// CoreDNS on the real node: the binary the bench builds (v1.15.0), in a local image.
const (
	corednsBin     = "/root/.cache/nodecache-bench/bin/coredns-v1.15.0"
	corednsImage   = "docker.io/nodecache-e2e/coredns:1.15.0"
	corednsPort    = 1053 // on the node's InternalIP: the agent holds port 53 of its own IPs
	corednsMetrics = "127.0.0.1:9153"
	kpClientNS     = "e2e-kp"
)

// TestRealNodeKubeProxy runs the intercept overlay on the real node next to kube-proxy v1.35.4, in
// iptables mode and then in nftables mode: kube-system/kube-dns (10.96.0.10) is backed by a CoreDNS
// Deployment, and a client pod whose resolv.conf names 10.96.0.10 (dnsPolicy None: the rig's
// kubelet has clusterDNS 169.254.20.10 for the other tests) sends 40 UDP and 40 TCP queries a
// second to it. Per mode: with kube-proxy alone CoreDNS answers; with the agent installed the agent
// answers (its counter moves, CoreDNS's does not) and conntrack has no DNS entry for either
// address; five rollouts lose nothing; `kubectl delete -k` → CoreDNS answers through kube-proxy
// with the gap measured (at most 5 s); re-applying → the agent again, nothing lost.
//
// Not yet as the issue asks: CoreDNS runs on the host network (its pod network has no route to
// the rig's API server), and the agent reaches the API server through the rig's forwarder, not
// the `kubernetes` Service.
func TestRealNodeKubeProxy(t *testing.T) {
	n := sharedRealNode(t)
	kubeProxyBin(t)
	if _, err := execOutput("test", "-x", corednsBin); err != nil {
		t.Fatalf("no CoreDNS binary at %s (the bench builds it): %v", corednsBin, err)
	}
	n.startCoreDNS(t, n.link.NodeIP, corednsPort)
	for _, m := range []struct{ proxy, agentMode string }{{"iptables", "auto"}, {"nftables", "nft"}} {
		t.Logf("=== kube-proxy in %s mode", m.proxy)
		n.checkKubeProxyMode(t, m.proxy, m.agentMode)
	}
}

// checkKubeProxyMode is one mode's run of TestRealNodeKubeProxy.
func (n *realNode) checkKubeProxyMode(t *testing.T, mode, agentMode string) {
	ctx := t.Context()
	kp := runKubeProxy(t, n.ns, mode, nodeName, n.api, n.apiFwd.Addr())
	ns := kpClientNS + "-" + mode // each mode's namespace is deleted at the end of the test
	n.namespace(t, ns)
	client := n.startKubeDNSClient(ctx, ns)
	waitAnswered(t, n, client, "CoreDNS through kube-proxy's DNAT", time.Now())
	if got := n.corednsRequests(t); got == 0 {
		t.Errorf("kube-proxy alone: CoreDNS counted no request, want the client's queries")
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
	n.waitAgents(ctx, 1, 3*time.Minute)
	n.checkAgentAnswersKubeDNS(t, metricsPort, "installed")
	n.checkNoConntrackKubeDNS(t)

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
			// reset (docs/operating.md): one such, at most, per switch.
			resets := 0
			if proto == "tcp" && strings.Contains(sum.firstErr, "connection reset by peer") {
				resets = 1
			}
			if sum.lost != 0 || sum.rcodes["SERVFAIL"] != 0 || sum.rcodes["error"] > resets {
				t.Errorf("%s: %s, %s: lost %d, SERVFAIL %d, errors %d (%s); want none (tcp: one reset at most)",
					mode, w.what, proto, sum.lost, sum.rcodes["SERVFAIL"], sum.rcodes["error"], sum.firstErr)
			}
		}
	}
	t.Logf("%s: re-apply: agent Ready %v after kubectl apply", mode, ready.Sub(applyAt).Round(100*time.Millisecond))
	n.uninstallAgent(t, overlay)
	kp.stop(t)
	if out, err := kp.cleanup(); err != nil {
		t.Errorf("kube-proxy --cleanup: %v\n%s", err, out)
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

// checkNoConntrackKubeDNS flushes the node's conntrack table and, after 3 s of the client's load
// and a query of the node to the link-local IP, wants no DNS entry for either address.
func (n *realNode) checkNoConntrackKubeDNS(t testing.TB) {
	t.Helper()
	nsCommand(t, n.ns, "conntrack", "-F")
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

// writeInterceptOverlay writes deploy/overlays/intercept-kube-dns's change over the rig's overlay.
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
`, filepath.Base(rig), kubeDNSIP, agentMode)
	writeRigFile(t, filepath.Join(dir, "kustomization.yaml"), k)
	return dir
}

// corednsRequests is CoreDNS's coredns_dns_requests_total, read in the node netns.
func (n *realNode) corednsRequests(t testing.TB) float64 {
	t.Helper()
	resp, err := nsHTTPClient(n.ns).Get("http://" + corednsMetrics + "/metrics")
	if err != nil {
		t.Fatalf("CoreDNS metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("CoreDNS metrics: %v", err)
	}
	return metricSum(t, string(b), "coredns_dns_requests_total")
}

// startKubeDNSClient starts the load client in namespace ns with 10.96.0.10 as its nameserver.
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
			DNSPolicy:                     corev1.DNSNone,
			DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{kubeDNSIP},
				Searches: []string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local"},
				Options:  []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("5")}}},
			Containers: []corev1.Container{{
				Name: "dnsload", Image: clientRepo, ImagePullPolicy: corev1.PullNever,
				Args: []string{"-server", kubeDNSIP + ":53", "-qps", "40", "-timeout", "2s", "-names", names},
			}},
		},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return n.waitPod(ctx, ns, "client", 2*time.Minute)
}

// startCoreDNS imports the CoreDNS image and creates its RBAC, Corefile, Deployment (one replica on
// the host network, bound to bind:port) and kube-system/kube-dns (10.96.0.10, port 53 to CoreDNS's);
// cleanup deletes them.
func (n *realNode) startCoreDNS(t *testing.T, bind string, port int32) {
	t.Helper()
	ctx := t.Context()
	tars, err := writeImages(mkdir(t, n.dir, "images-coredns"), []imageSpec{{Ref: corednsImage,
		Files: []imageFile{{Src: corednsPath(), Dst: "/coredns"}, {Src: "/etc/nsswitch.conf", Dst: "/etc/nsswitch.conf"}}, Entrypoint: []string{"/coredns"}}})
	if err != nil {
		t.Fatal(err)
	}
	n.importTars(ctx, tars)
	_, apiPort, _ := net.SplitHostPort(n.apiFwd.Addr())
	corefile := fmt.Sprintf(`.:%d {
    bind %s
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        fallthrough in-addr.arpa ip6.arpa
    }
    prometheus %s
    forward . %s
    cache 30
}
`, port, bind, corednsMetrics, n.upstream.Addr)
	const ns = "kube-system"
	labels := map[string]string{"k8s-app": "kube-dns"}
	c := n.admin
	objs := []func() error{
		func() error {
			_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "coredns"}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-coredns"},
				Rules: []rbacv1.PolicyRule{
					{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
					{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
				}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-coredns"},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-coredns"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "coredns", Namespace: ns}}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "e2e-coredns"},
				Data: map[string]string{"Corefile": corefile}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.AppsV1().Deployments(ns).Create(ctx, corednsDeployment(labels, apiPort), metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Labels: labels},
				Spec: corev1.ServiceSpec{ClusterIP: kubeDNSIP, Selector: labels, Ports: []corev1.ServicePort{
					{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(port)},
					{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(port)},
				}}}, metav1.CreateOptions{})
			return err
		},
	}
	t.Cleanup(func() { n.deleteCoreDNS(t) })
	for _, create := range objs {
		if err := create(); err != nil {
			t.Fatalf("creating CoreDNS: %v", err)
		}
	}
	eventuallyWithin(t, 2*time.Minute, "CoreDNS serving metrics", func() error {
		_, err := nsHTTPClient(n.ns).Get("http://" + corednsMetrics + "/metrics")
		return err
	})
}

func corednsDeployment(labels map[string]string, apiPort string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: "coredns", HostNetwork: true, DNSPolicy: corev1.DNSDefault,
					TerminationGracePeriodSeconds: ptr.To[int64](2),
					Containers: []corev1.Container{{
						Name: "coredns", Image: corednsImage, ImagePullPolicy: corev1.PullNever,
						Args: []string{"-conf", "/etc/coredns/Corefile"},
						Env: []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
							{Name: "KUBERNETES_SERVICE_PORT", Value: apiPort}},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns"}},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "e2e-coredns"}}}}},
				},
			},
		},
	}
}

// deleteCoreDNS removes what startCoreDNS created and waits for its pods to go.
func (n *realNode) deleteCoreDNS(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "kube-system"
	c := n.admin
	for _, err := range []error{
		c.CoreV1().Services(ns).Delete(ctx, "kube-dns", metav1.DeleteOptions{}),
		c.AppsV1().Deployments(ns).Delete(ctx, "coredns", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}),
		c.CoreV1().ConfigMaps(ns).Delete(ctx, "e2e-coredns", metav1.DeleteOptions{}),
		c.RbacV1().ClusterRoleBindings().Delete(ctx, "e2e-coredns", metav1.DeleteOptions{}),
		c.RbacV1().ClusterRoles().Delete(ctx, "e2e-coredns", metav1.DeleteOptions{}),
		c.CoreV1().ServiceAccounts(ns).Delete(ctx, "coredns", metav1.DeleteOptions{}),
	} {
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting CoreDNS: %v", err)
		}
	}
	err := poll(ctx, time.Second, nil, func(ctx context.Context) error {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err == nil && len(pods.Items) > 0 {
			err = fmt.Errorf("%d CoreDNS pods left", len(pods.Items))
		}
		return err
	})
	if err != nil {
		t.Errorf("waiting for CoreDNS to go: %v", err)
	}
}
