package kubezone

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Builders of API objects for tests.

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// service builds a Service; ips "None" makes it headless, a name ending in
// "." an ExternalName.
func service(ns, name string, ips []string, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: ports}}
	if len(ips) == 1 && strings.HasSuffix(ips[0], ".") {
		s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, ips[0]
		return s
	}
	s.Spec.ClusterIPs = ips
	if len(ips) > 0 {
		s.Spec.ClusterIP = ips[0]
	}
	return s
}

func svcPort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port}
}

// ep is an endpoint: hostname may be empty; ready nil means ready.
type ep struct {
	addrs    []string
	hostname string
	ready    *bool
}

func slice(ns, name, svc string, ports []discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: ports,
	}
	for _, e := range eps {
		d := discoveryv1.Endpoint{Addresses: e.addrs, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}}
		if e.hostname != "" {
			d.Hostname = &e.hostname
		}
		if a, err := netip.ParseAddr(e.addrs[0]); err == nil && a.Is6() {
			es.AddressType = discoveryv1.AddressTypeIPv6
		}
		es.Endpoints = append(es.Endpoints, d)
	}
	return es
}

func slicePort(name string, port int32) discoveryv1.EndpointPort {
	p := corev1.ProtocolTCP
	return discoveryv1.EndpointPort{Name: &name, Protocol: &p, Port: &port}
}

func pod(ns, name, node string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:   corev1.PodSpec{NodeName: node, DNSPolicy: corev1.DNSClusterFirst},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	return p
}

func objs(o ...runtime.Object) []runtime.Object { return o }

func ptrTo[T any](v T) *T { return &v }
