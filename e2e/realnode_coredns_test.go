//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// CoreDNS on the real node: the binary the bench builds (v1.15.0), in a local image, as the
// kube-system/coredns Deployment behind kube-system/kube-dns.
const (
	corednsBin   = "/root/.cache/nodecache-bench/bin/coredns-v1.15.0"
	corednsImage = "docker.io/nodecache-e2e/coredns:1.15.0"
)

// startCoreDNS imports the CoreDNS image and creates its RBAC, Corefile, Deployment (one replica)
// and kube-system/kube-dns (10.96.0.10, port 53 over UDP and TCP); cleanup deletes them. CoreDNS
// forwards to upstream. With hostBind empty it runs as on a real cluster: on the pod network,
// reaching the API server through the default/kubernetes Service (10.96.0.1:443, which needs
// kube-proxy), Ready once its `ready` plugin says the kubernetes plugin has synced. With hostBind
// it runs on the host network bound to hostBind:53 and reaches the API server through the rig's
// forwarder (no kube-proxy needed).
func (n *realNode) startCoreDNS(t *testing.T, hostBind, upstream string) {
	t.Helper()
	ctx := t.Context()
	tars, err := writeImages(mkdir(t, n.dir, "images-coredns"), []imageSpec{{Ref: corednsImage,
		Files: []imageFile{{Src: corednsPath(), Dst: "/coredns"}, {Src: "/etc/nsswitch.conf", Dst: "/etc/nsswitch.conf"}}, Entrypoint: []string{"/coredns"}}})
	if err != nil {
		t.Fatal(err)
	}
	n.importTars(ctx, tars)
	bind, metrics := "", ":9153"
	if hostBind != "" {
		bind, metrics = "bind "+hostBind, "127.0.0.1:9153"
	}
	corefile := fmt.Sprintf(`.:53 {
    %s
    errors
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        fallthrough in-addr.arpa ip6.arpa
    }
    prometheus %s
    forward . %s
    cache 30
}
`, bind, metrics, upstream)
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
			_, err := c.AppsV1().Deployments(ns).Create(ctx, n.corednsDeployment(labels, hostBind != ""), metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Labels: labels},
				Spec: corev1.ServiceSpec{ClusterIP: kubeDNSIP, Selector: labels, Ports: []corev1.ServicePort{
					{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(53)},
					{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(53)},
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
	start := time.Now()
	var pod corev1.Pod
	eventuallyWithin(t, 2*time.Minute, "a Ready CoreDNS pod", func() error {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || !podReady(&pods.Items[0]) {
			why := make([]string, 0, len(pods.Items))
			for _, p := range pods.Items {
				why = append(why, p.Name+": "+podWhy(&p))
			}
			return fmt.Errorf("%d CoreDNS pods, want one Ready: %s", len(pods.Items), strings.Join(why, "; "))
		}
		pod = pods.Items[0]
		return nil
	})
	n.corednsMetrics = "127.0.0.1:9153"
	if hostBind == "" {
		n.corednsMetrics = net.JoinHostPort(pod.Status.PodIP, "9153")
	}
	t.Logf("CoreDNS pod %s (IP %s) Ready %v after its Deployment was created", pod.Name, pod.Status.PodIP, time.Since(start).Round(100*time.Millisecond))
	eventuallyWithin(t, time.Minute, "CoreDNS serving metrics", func() error {
		resp, err := nsHTTPClient(n.ns).Get("http://" + n.corednsMetrics + "/metrics")
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
}

// corednsDeployment is CoreDNS's Deployment: on the host network with the rig's forwarder as its
// API server, or on the pod network with the kubelet's KUBERNETES_SERVICE_HOST/PORT (the
// default/kubernetes Service) and a readiness probe on the `ready` plugin, as kubeadm deploys it.
func (n *realNode) corednsDeployment(labels map[string]string, hostNetwork bool) *appsv1.Deployment {
	ctr := corev1.Container{
		Name: "coredns", Image: corednsImage, ImagePullPolicy: corev1.PullNever,
		Args:         []string{"-conf", "/etc/coredns/Corefile"},
		VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns"}},
	}
	if hostNetwork {
		_, apiPort, _ := net.SplitHostPort(n.apiFwd.Addr())
		ctr.Env = []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
			{Name: "KUBERNETES_SERVICE_PORT", Value: apiPort}}
	} else {
		ctr.Ports = []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
			{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP}}
		ctr.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: "coredns", HostNetwork: hostNetwork, DNSPolicy: corev1.DNSDefault,
					TerminationGracePeriodSeconds: ptr.To[int64](2),
					Containers:                    []corev1.Container{ctr},
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
	n.corednsMetrics = ""
}

// corednsRequests is CoreDNS's coredns_dns_requests_total, read in the node netns.
func (n *realNode) corednsRequests(t testing.TB) float64 {
	t.Helper()
	resp, err := nsHTTPClient(n.ns).Get("http://" + n.corednsMetrics + "/metrics")
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
