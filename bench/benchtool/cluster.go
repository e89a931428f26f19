package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// clusterSpec describes a synthetic cluster: Services spread over
// Namespaces, each ClusterIP service with one EndpointSlice of Endpoints
// ready addresses. Every Headless-th service is headless (0: none).
type clusterSpec struct {
	Namespaces int // at least 1
	Services   int // at most 65,000 (ClusterIPs come from 10.96.0.0/16)
	Endpoints  int // per service, at most 65,000 in total per namespace index
	Headless   int
}

// Validate checks the sizes the address plan can hold.
func (c clusterSpec) Validate() error {
	switch {
	case c.Namespaces < 1:
		return errors.New("cluster: want at least one namespace")
	case c.Services < 1 || c.Services > 65000:
		return fmt.Errorf("cluster: %d services: want 1 to 65000", c.Services)
	case c.Endpoints < 0 || c.Endpoints > 250:
		return fmt.Errorf("cluster: %d endpoints per service: want 0 to 250", c.Endpoints)
	case c.Headless < 0:
		return fmt.Errorf("cluster: headless every %d services: want 0 or more", c.Headless)
	}
	return nil
}

func nsName(i int) string  { return "ns-" + strconv.Itoa(i) }
func svcName(i int) string { return "svc-" + strconv.Itoa(i) }

// svcNS is the namespace index of service i.
func (c clusterSpec) svcNS(i int) int { return i % c.Namespaces }

func (c clusterSpec) headless(i int) bool { return c.Headless > 0 && i%c.Headless == c.Headless-1 }

// clusterIP is service i's address in 10.96.0.0/16, skipping 10.96.0.0/24
// (10.96.0.1 is the kubernetes service).
func clusterIP(i int) netip.Addr {
	n := i + 256
	return netip.AddrFrom4([4]byte{10, 96, byte(n >> 8), byte(n)})
}

// endpointIP is endpoint j of service i in 10.128.0.0/9.
func endpointIP(i, j int) netip.Addr {
	n := i*250 + j + 1
	return netip.AddrFrom4([4]byte{10, 128 + byte(n>>16), byte(n >> 8), byte(n)})
}

// objects returns the cluster's Services and EndpointSlices from index
// from on, and its Namespaces when from is 0. A from above 0 grows a
// cluster already loaded with services 0..from-1 into this one: same
// names, addresses and headless services as the whole cluster, nothing
// that exists already.
func (c clusterSpec) objects(from int) []any {
	var out []any
	for n := 0; n < c.Namespaces && from == 0; n++ {
		out = append(out, &corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: nsName(n)},
		})
	}
	for i := from; i < c.Services; i++ {
		out = append(out, c.service(i), c.slice(i))
	}
	return out
}

func (c clusterSpec) service(i int) *corev1.Service {
	spec := corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP,
		Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)},
			{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090, TargetPort: intstr.FromInt32(9090)},
		},
	}
	if c.headless(i) {
		spec.ClusterIP = corev1.ClusterIPNone
		spec.ClusterIPs = []string{corev1.ClusterIPNone}
	} else {
		ip := clusterIP(i).String()
		spec.ClusterIP, spec.ClusterIPs = ip, []string{ip}
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: svcName(i), Namespace: nsName(c.svcNS(i))},
		Spec:       spec,
	}
}

func (c clusterSpec) slice(i int) *discoveryv1.EndpointSlice {
	http, metrics := "http", "metrics"
	tcp := corev1.ProtocolTCP
	p8080, p9090 := int32(8080), int32(9090)
	s := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      svcName(i) + "-x",
			Namespace: nsName(c.svcNS(i)),
			Labels:    map[string]string{discoveryv1.LabelServiceName: svcName(i)},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: &http, Protocol: &tcp, Port: &p8080},
			{Name: &metrics, Protocol: &tcp, Port: &p9090},
		},
	}
	ready := true
	for j := 0; j < c.Endpoints; j++ {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{endpointIP(i, j).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		})
	}
	return s
}

// writeYAML writes objects(from) as one multi-document YAML stream, the
// format of `nodecache --fixture` and `kubectl create -f`.
func (c clusterSpec) writeYAML(w io.Writer, from int) error {
	bw := bufio.NewWriter(w)
	for _, o := range c.objects(from) {
		b, err := yaml.Marshal(o)
		if err != nil {
			return fmt.Errorf("encoding object: %w", err)
		}
		if _, err := fmt.Fprintf(bw, "---\n%s", b); err != nil {
			return fmt.Errorf("writing fixture: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing fixture: %w", err)
	}
	return nil
}

// writeQueries writes n dnsperf lines ("name TYPE") against the cluster
// zone, cycling through services. Per ten queries: six A of a service,
// one SRV of a named port, one PTR of a ClusterIP (A of an endpoint name
// for a headless service), one AAAA (NODATA) and one unknown service
// (NXDOMAIN).
func (c clusterSpec) writeQueries(w io.Writer, domain string, n int) error {
	bw := bufio.NewWriter(w)
	for k := 0; k < n; k++ {
		i := (k * 7919) % c.Services // a stride, so consecutive lines differ
		svc := svcName(i) + "." + nsName(c.svcNS(i)) + ".svc." + domain
		var line string
		switch k % 10 {
		case 6:
			line = "_http._tcp." + svc + " SRV"
		case 7:
			if c.headless(i) && c.Endpoints > 0 {
				line = dashed(endpointIP(i, 0)) + "." + svc + " A"
			} else {
				line = reverse4(clusterIP(i)) + " PTR"
			}
		case 8:
			line = svc + " AAAA"
		case 9:
			line = "nope-" + strconv.Itoa(i) + "." + nsName(c.svcNS(i)) + ".svc." + domain + " A"
		default:
			line = svc + " A"
		}
		if _, err := fmt.Fprintln(bw, line); err != nil {
			return fmt.Errorf("writing queries: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing queries: %w", err)
	}
	return nil
}

// dashed is the endpoint host label of a v4 address: 10-1-2-3.
func dashed(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("%d-%d-%d-%d", b[0], b[1], b[2], b[3])
}

// reverse4 is the in-addr.arpa name of a v4 address.
func reverse4(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("%d.%d.%d.%d.in-addr.arpa.", b[3], b[2], b[1], b[0])
}
