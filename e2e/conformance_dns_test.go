//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The cluster DNS a conformance run tests, at 169.254.20.10 (the kubelet's
// clusterDNS): the DaemonSet as users install it, or CoreDNS for the
// comparison; and a preflight pod that fails fast on a broken setup.

const conformancePreflightNS = "conformance-preflight"

// installAgent installs the DaemonSet with `kubectl apply -k` (the rig's
// overlay over deploy/base, as TestRealNode does) and waits for its pod;
// t's cleanup uninstalls it. It returns the agent's metrics port (on the
// node's loopback).
func (n *realNode) installAgent(t *testing.T) int {
	t.Helper()
	ctx := t.Context()
	metricsPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	overlay := n.writeOverlay(t, metricsPort, agentImageTags[0])
	t.Cleanup(func() { n.uninstallAgent(t, overlay) })
	if _, err := n.kubectl(ctx, "apply", "-k", overlay); err != nil {
		t.Fatalf("installing the DaemonSet: %v", err)
	}
	n.waitAgents(ctx, 1, 3*time.Minute)
	return metricsPort
}

// startLinkLocalCoreDNS runs the bench's CoreDNS as the cluster DNS
// instead: 169.254.20.10 on the node's loopback, and a host-network CoreDNS
// bound to it on port 53 with the kubernetes plugin (no kube-proxy is
// needed: pods reach the IP through their default route to the node).
func (n *realNode) startLinkLocalCoreDNS(t *testing.T, coredns string) {
	t.Helper()
	if coredns != corednsPath() {
		t.Fatalf("CoreDNS binary %s is not the one startCoreDNS uses (%s)", coredns, corednsPath())
	}
	mustIP(t, "-n", n.ns.Name, "addr", "add", linkLocalIP+"/32", "dev", "lo")
	t.Cleanup(func() { _, _ = ipCmd("-n", n.ns.Name, "addr", "del", linkLocalIP+"/32", "dev", "lo") })
	n.startCoreDNS(t, linkLocalIP, n.upstream.Addr)
}

// conformancePreflight runs a pod with both images, as the DNS tests do,
// and wants each container Running within two minutes and its tools to
// work: the shell, seq, sleep, cat, hostname, getent and dig resolving
// kubernetes.default through the cluster DNS, and in agnhost also
// `/agnhost dns-suffix` and `/coredns -version`. A missing image or tool
// fails here with its name instead of after the suite's ten-minute waits.
func (n *realNode) conformancePreflight(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	n.namespace(t, conformancePreflightNS)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "preflight"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{
				{Name: "agnhost", Image: conformanceAgnhost, ImagePullPolicy: corev1.PullIfNotPresent},
				{Name: "jessie", Image: conformanceJessie, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"sh", "-c", "exec sleep 3600"}},
			},
		},
	}
	if _, err := n.admin.CoreV1().Pods(conformancePreflightNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := n.waitPod(ctx, conformancePreflightNS, pod.Name, 2*time.Minute)
	kubeIP := n.kubernetesServiceIP(t)
	script := "set -e; seq 1 2 >/dev/null; sleep 0; cat /etc/resolv.conf >/dev/null; hostname; " +
		"getent hosts kubernetes.default.svc.cluster.local; dig +short +search kubernetes.default"
	for _, c := range []string{"agnhost", "jessie"} {
		out, err := n.execIn(ctx, p, c, "sh", "-c", script)
		if err != nil {
			t.Fatalf("preflight in the %s container: %v", c, err)
		}
		if strings.Count(out, kubeIP) != 2 {
			t.Fatalf("preflight in the %s container: getent and dig should both give the kubernetes Service's %s, got:\n%s", c, kubeIP, out)
		}
	}
	for _, argv := range [][]string{{"/agnhost", "dns-suffix"}, {"/coredns", "-version"}} {
		if out, err := n.execIn(ctx, p, "agnhost", argv...); err != nil {
			t.Fatalf("preflight: %s in the agnhost image: %v", strings.Join(argv, " "), err)
		} else {
			t.Logf("preflight: %s: %s", strings.Join(argv, " "), strings.TrimSpace(out))
		}
	}
}

// kubernetesServiceIP is default/kubernetes' ClusterIP.
func (n *realNode) kubernetesServiceIP(t *testing.T) string {
	t.Helper()
	svc, err := n.admin.CoreV1().Services("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}
