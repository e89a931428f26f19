//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// apiCtx is the context for one API call from a test.
func apiCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newNamespace creates a namespace named prefix-<random> and removes it and
// everything in it on cleanup. With no controller-manager a deleted namespace
// stays Terminating, so cleanup deletes its objects itself and then clears
// the namespace finalizer.
func newNamespace(t testing.TB, prefix string) string {
	t.Helper()
	c := env.api.Admin
	ns, err := c.CoreV1().Namespaces().Create(apiCtx(t),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { deleteNamespace(t, c, ns.Name) })
	return ns.Name
}

func deleteNamespace(t testing.TB, c kubernetes.Interface, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zero := int64(0)
	del := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	all := metav1.ListOptions{}
	errs := []error{
		c.CoreV1().Pods(name).DeleteCollection(ctx, del, all),
		c.DiscoveryV1().EndpointSlices(name).DeleteCollection(ctx, del, all),
	}
	if svcs, err := c.CoreV1().Services(name).List(ctx, all); err != nil {
		errs = append(errs, err)
	} else {
		// Services have no deletecollection.
		for _, s := range svcs.Items {
			errs = append(errs, c.CoreV1().Services(name).Delete(ctx, s.Name, del))
		}
	}
	errs = append(errs, c.CoreV1().Namespaces().Delete(ctx, name, del))
	for _, err := range errs {
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleaning namespace %s: %v", name, err)
		}
	}
	ns, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Errorf("getting namespace %s: %v", name, err)
		return
	}
	ns.Spec.Finalizers = nil
	if _, err := c.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("finalizing namespace %s: %v", name, err)
	}
}

// svcPort is a named TCP or UDP service port.
func svcPort(name string, proto corev1.Protocol, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port}
}

// serviceSpec returns a Service of type typ (ClusterIP, NodePort,
// LoadBalancer) in ns, dual-stack when dual is set.
func serviceSpec(ns, name string, typ corev1.ServiceType, dual bool, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: typ, Ports: ports},
	}
	if len(ports) == 0 {
		s.Spec.Ports = []corev1.ServicePort{svcPort("http", corev1.ProtocolTCP, 80)}
	}
	if dual {
		p := corev1.IPFamilyPolicyRequireDualStack
		s.Spec.IPFamilyPolicy = &p
	}
	return s
}

// headlessSpec returns a headless Service (clusterIP: None).
func headlessSpec(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	s := serviceSpec(ns, name, corev1.ServiceTypeClusterIP, false, ports...)
	s.Spec.ClusterIP = corev1.ClusterIPNone
	return s
}

// externalNameSpec returns an ExternalName Service pointing at target.
func externalNameSpec(ns, name, target string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: target},
	}
}

func createService(t testing.TB, s *corev1.Service) *corev1.Service {
	t.Helper()
	got, err := env.api.Admin.CoreV1().Services(s.Namespace).Create(apiCtx(t), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating service %s/%s: %v", s.Namespace, s.Name, err)
	}
	return got
}

func deleteService(t testing.TB, ns, name string) {
	t.Helper()
	if err := env.api.Admin.CoreV1().Services(ns).Delete(apiCtx(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting service %s/%s: %v", ns, name, err)
	}
}

// endpoint is one address of an EndpointSlice.
type endpoint struct {
	IP       string
	Hostname string // empty: none
	NotReady bool
	NodeName string
}

// createEndpointSlice writes an EndpointSlice for service svc directly, as
// the endpointslice controller would (there is none in the rig).
func createEndpointSlice(t testing.TB, ns, svc string, family discoveryv1.AddressType, eps []endpoint, ports ...corev1.ServicePort) *discoveryv1.EndpointSlice {
	t.Helper()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, GenerateName: svc + "-",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "nodecache-e2e"},
		},
		AddressType: family,
	}
	for _, e := range eps {
		ready := !e.NotReady
		ep := discoveryv1.Endpoint{Addresses: []string{e.IP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
		if e.Hostname != "" {
			ep.Hostname = &e.Hostname
		}
		if e.NodeName != "" {
			ep.NodeName = &e.NodeName
		}
		es.Endpoints = append(es.Endpoints, ep)
	}
	for _, p := range ports {
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: &p.Name, Protocol: &p.Protocol, Port: &p.Port})
	}
	got, err := env.api.Admin.DiscoveryV1().EndpointSlices(ns).Create(apiCtx(t), es, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating endpointslice for %s/%s: %v", ns, svc, err)
	}
	return got
}

// createPod creates a pod bound to node with the given hostname and
// subdomain and sets its status IPs, as a kubelet would.
func createPod(t testing.TB, ns, name, node, hostname, subdomain string, ips ...string) *corev1.Pod {
	t.Helper()
	c := env.api.Admin.CoreV1().Pods(ns)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName: node, Hostname: hostname, Subdomain: subdomain,
			Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none"}},
		},
	}
	got, err := c.Create(apiCtx(t), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	got.Status.Phase = corev1.PodRunning
	for _, ip := range ips {
		got.Status.PodIPs = append(got.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		got.Status.PodIP = ips[0]
	}
	if got, err = c.UpdateStatus(apiCtx(t), got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("setting status of pod %s/%s: %v", ns, name, err)
	}
	return got
}
