//go:build e2e

package e2e

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestAPIServerUp checks the shared apiserver and both agent identities:
// the ServiceAccount of deploy/base/rbac.yaml lists and watches what the
// zone is built from, gets a pod in its namespace and nothing more; with
// deploy/overlays/pod-access it also lists and watches pods.
func TestAPIServerUp(t *testing.T) {
	requireSuite(t)
	t.Logf("etcd + kube-apiserver start-up: %v", env.api.StartUp.Round(time.Millisecond))
	ns := newNamespace(t, "up")
	created := createService(t, serviceSpec(ns, "web", corev1.ServiceTypeClusterIP, true))
	if got := len(created.Spec.ClusterIPs); got != 2 {
		t.Errorf("dual-stack service: got %d cluster IPs %v, want 2", got, created.Spec.ClusterIPs)
	}
	for _, g := range []struct {
		name      string
		id        agentIdentity
		podAccess bool
	}{{"base", env.agent, false}, {"pod-access", env.podAgent, true}} {
		t.Run(g.name, func(t *testing.T) {
			sa := agentClient(t, g.id)
			ctx := apiCtx(t)
			list, err := sa.CoreV1().Services(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=web"})
			if err != nil {
				t.Fatalf("listing services as the agent: %v", err)
			}
			if len(list.Items) != 1 || !slices.Equal(list.Items[0].Spec.ClusterIPs, created.Spec.ClusterIPs) {
				t.Fatalf("listing services as the agent: got %+v, want web with %v", list.Items, created.Spec.ClusterIPs)
			}
			w, err := sa.CoreV1().Services(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				t.Fatalf("watching services as the agent: %v", err)
			}
			w.Stop()
			checkAgentAccess(ctx, t, sa, ns, g.podAccess)
		})
	}
}

// checkAgentAccess asserts least privilege: every call the agent makes is
// allowed and a sample of other verbs and resources is forbidden. Pods
// are listed and watched only with the pod-access grant; either grant gets
// a pod by name in the agent's own namespace (its restart check), and no
// other.
func checkAgentAccess(ctx context.Context, t *testing.T, sa kubernetes.Interface, ns string, podAccess bool) {
	t.Helper()
	opts := metav1.ListOptions{Limit: 1}
	type call struct {
		name string
		call func() error
	}
	podCalls := []call{
		{"list pods", func() error { _, err := sa.CoreV1().Pods("").List(ctx, opts); return err }},
		{"list pods of a node", func() error {
			_, err := sa.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-1"})
			return err
		}},
		{"watch pods", func() error {
			w, err := sa.CoreV1().Pods("").Watch(ctx, opts)
			if err == nil {
				w.Stop()
			}
			return err
		}},
	}
	allowed := []call{
		{"list services", func() error { _, err := sa.CoreV1().Services("").List(ctx, opts); return err }},
		{"list endpointslices", func() error { _, err := sa.DiscoveryV1().EndpointSlices("").List(ctx, opts); return err }},
		{"list namespaces", func() error { _, err := sa.CoreV1().Namespaces().List(ctx, opts); return err }},
		{"get its own pod", func() error {
			_, err := sa.CoreV1().Pods("kube-system").Get(ctx, "nodecache-e2e", metav1.GetOptions{})
			if apierrors.IsNotFound(err) { // allowed; there is no such pod
				return nil
			}
			return err
		}},
	}
	forbidden := []call{
		{"list secrets", func() error { _, err := sa.CoreV1().Secrets("").List(ctx, opts); return err }},
		{"list configmaps", func() error { _, err := sa.CoreV1().ConfigMaps(ns).List(ctx, opts); return err }},
		{"get service", func() error { _, err := sa.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{}); return err }},
		{"get a pod in another namespace", func() error { _, err := sa.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{}); return err }},
		{"delete service", func() error { return sa.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}) }},
		{"create service", func() error {
			_, err := sa.CoreV1().Services(ns).Create(ctx, serviceSpec(ns, "evil", corev1.ServiceTypeClusterIP, false), metav1.CreateOptions{})
			return err
		}},
		{"list nodes", func() error { _, err := sa.CoreV1().Nodes().List(ctx, opts); return err }},
	}
	if podAccess {
		allowed = append(allowed, podCalls...)
	} else {
		forbidden = append(forbidden, podCalls...)
	}
	for _, c := range allowed {
		if err := c.call(); err != nil {
			t.Errorf("%s as the agent: got %v, want allowed", c.name, err)
		}
	}
	for _, c := range forbidden {
		if err := c.call(); !apierrors.IsForbidden(err) {
			t.Errorf("%s as the agent: got %v, want Forbidden", c.name, err)
		}
	}
}

// TestNetnsRig checks the network half of the rig without the agent: a pod
// netns reaches a DNS server in the node netns over the veth with dig
// (UDP, TCP) and kdig, and a client in the node netns reaches the apiserver
// through the forwarder.
func TestNetnsRig(t *testing.T) {
	requireSuite(t)
	node := newNetNS(t, "node")
	p := addPod(t, node)
	up := startUpstream(t, node, p.Gateway)
	host, _, err := net.SplitHostPort(up.Addr)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(up.Addr)
	cases := []struct {
		name       string
		q          query
		wantRcode  string
		wantRecord []string
	}{
		{"dig udp A", query{Name: "www.example.com.", Type: "A"}, "NOERROR", []string{"192.0.2.10"}},
		{"dig tcp AAAA", query{Name: "www.example.com.", Type: "AAAA", TCP: true}, "NOERROR", []string{"2001:db8::10"}},
		{"kdig udp A", query{Tool: "kdig", Name: "www.example.com.", Type: "A"}, "NOERROR", []string{"192.0.2.10"}},
		{"kdig tcp nxdomain", query{Tool: "kdig", Name: "nope.example.com.", TCP: true}, "NXDOMAIN", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.q.Server = host
			c.q.Port = port
			a := mustQuery(t, p.NS, c.q)
			if a.Rcode != c.wantRcode {
				t.Errorf("rcode: got %s, want %s\n%s", a.Rcode, c.wantRcode, a.Raw)
			}
			qt := dnsType(t, c.q.Type)
			if got := a.Data(qt); !slices.Equal(got, c.wantRecord) {
				t.Errorf("records: got %v, want %v\n%s", got, c.wantRecord, a.Raw)
			}
			if !slices.Contains(a.Flags, "aa") {
				t.Errorf("flags: got %v, want aa among them", a.Flags)
			}
		})
	}
	if got, want := up.Queries.Load(), int64(len(cases)); got != want {
		t.Errorf("upstream query count: got %d, want %d", got, want)
	}

	fwd := forwardTCP(t, node, env.api.URL[len("https://"):])
	cfg := env.api.restConfig(env.api.AdminToken)
	cfg.Host = "https://" + fwd.Addr()
	cfg.Dial = node.dial
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Namespaces().Get(apiCtx(t), "kube-system", metav1.GetOptions{}); err != nil {
		t.Errorf("apiserver through the forwarder in %s: %v", node.Name, err)
	}
}
