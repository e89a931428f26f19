package kubezone

import (
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The models below are the zone's own compact copy of the fields of
// Kubernetes objects that answers need. They are immutable once built and
// are what a snapshot persists.

// svcModel is a Service.
type svcModel struct {
	Namespace    string       `json:"ns"`
	Name         string       `json:"name"`
	ClusterIPs   []netip.Addr `json:"ips,omitempty"`
	Headless     bool         `json:"headless,omitempty"`
	ExternalName string       `json:"externalName,omitempty"` // lowercased FQDN; non-empty for ExternalName services
	Ports        []portModel  `json:"ports,omitempty"`
	snap         bool         // loaded from a snapshot, not yet confirmed by the API
}

// portModel is a service or EndpointSlice port.
type portModel struct {
	Name     string `json:"name,omitempty"`
	Protocol string `json:"proto"` // lowercased: tcp, udp, sctp
	Port     uint16 `json:"port"`
}

// sliceModel is an EndpointSlice of a service.
type sliceModel struct {
	Namespace string      `json:"ns"`
	Name      string      `json:"name"`
	Service   string      `json:"svc"`
	Ports     []portModel `json:"ports,omitempty"`
	Endpoints []epModel   `json:"eps,omitempty"` // ready endpoints only
	snap      bool
}

// epModel is one address of a ready endpoint of a slice (an endpoint with
// several addresses gives several epModels with the same hostname).
type epModel struct {
	Addr     netip.Addr `json:"addr"`
	Hostname string     `json:"host,omitempty"`
}

// podModel is a pod: used for node-local PodByIP and for verified pod records.
type podModel struct {
	Namespace   string       `json:"ns"`
	Name        string       `json:"name"`
	Node        string       `json:"node,omitempty"`
	IPs         []netip.Addr `json:"ips,omitempty"`
	Phase       string       `json:"phase,omitempty"`
	DNSPolicy   string       `json:"dnsPolicy,omitempty"`
	HostNetwork bool         `json:"hostNetwork,omitempty"`
	// CustomDNS is true when spec.dnsConfig changes the search list or
	// options: the pod's resolver then does not search the cluster default.
	CustomDNS bool `json:"customDNS,omitempty"`
	snap      bool
}

func nsKey(ns, name string) string { return ns + "/" + name }

func (s *svcModel) key() string   { return nsKey(s.Namespace, s.Name) }
func (s *sliceModel) key() string { return nsKey(s.Namespace, s.Name) }
func (p *podModel) key() string   { return nsKey(p.Namespace, p.Name) }

// serviceFromAPI converts a (trimmed) Service.
func serviceFromAPI(svc *corev1.Service) *svcModel {
	m := &svcModel{Namespace: strings.ToLower(svc.Namespace), Name: strings.ToLower(svc.Name)}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		m.ExternalName = strings.ToLower(strings.TrimSuffix(svc.Spec.ExternalName, ".")) + "."
		return m
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		if s == corev1.ClusterIPNone {
			m.Headless = true
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil {
			m.ClusterIPs = append(m.ClusterIPs, a.Unmap())
		}
	}
	for _, p := range svc.Spec.Ports {
		m.Ports = append(m.Ports, portModel{
			Name: strings.ToLower(p.Name), Protocol: protoName(string(p.Protocol)), Port: uint16(p.Port),
		})
	}
	return m
}

// sliceFromAPI converts a (trimmed) EndpointSlice. It returns nil for slices
// that carry no service or FQDN addresses: they contribute no records.
func sliceFromAPI(es *discoveryv1.EndpointSlice) *sliceModel {
	svc := es.Labels[discoveryv1.LabelServiceName]
	if svc == "" || es.AddressType == discoveryv1.AddressTypeFQDN {
		return nil
	}
	m := &sliceModel{Namespace: strings.ToLower(es.Namespace), Name: strings.ToLower(es.Name), Service: strings.ToLower(svc)}
	for _, p := range es.Ports {
		if p.Port == nil {
			continue // "all ports": nothing a SRV record can name
		}
		pm := portModel{Protocol: "tcp", Port: uint16(*p.Port)}
		if p.Name != nil {
			pm.Name = strings.ToLower(*p.Name)
		}
		if p.Protocol != nil {
			pm.Protocol = protoName(string(*p.Protocol))
		}
		m.Ports = append(m.Ports, pm)
	}
	for _, ep := range es.Endpoints {
		if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
			continue
		}
		host := ""
		if ep.Hostname != nil {
			host = strings.ToLower(*ep.Hostname)
		}
		for _, s := range ep.Addresses {
			if a, err := netip.ParseAddr(s); err == nil {
				m.Endpoints = append(m.Endpoints, epModel{Addr: a.Unmap(), Hostname: host})
			}
		}
	}
	return m
}

// podFromAPI converts a (trimmed) Pod.
func podFromAPI(p *corev1.Pod) *podModel {
	m := &podModel{
		Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase),
		DNSPolicy: string(p.Spec.DNSPolicy), HostNetwork: p.Spec.HostNetwork,
		CustomDNS: p.Spec.DNSConfig != nil && (len(p.Spec.DNSConfig.Searches) > 0 || len(p.Spec.DNSConfig.Options) > 0),
	}
	ips := p.Status.PodIPs
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: p.Status.PodIP}}
	}
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			m.IPs = append(m.IPs, a.Unmap())
		}
	}
	sort.Slice(m.IPs, func(i, j int) bool { return m.IPs[i].Less(m.IPs[j]) })
	return m
}

func protoName(p string) string {
	if p == "" {
		return "tcp"
	}
	return strings.ToLower(p)
}

// trim is the informer transform: it drops every field answers do not need
// before the object is stored, and records the object's last write time
// (latest managedFields time, else creationTimestamp) in CreationTimestamp,
// for the write-to-programmed latency histogram.
func trim(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		o.ObjectMeta = trimMeta(o.ObjectMeta, false)
		o.Spec = corev1.ServiceSpec{
			Type: o.Spec.Type, ClusterIP: o.Spec.ClusterIP, ClusterIPs: o.Spec.ClusterIPs,
			ExternalName: o.Spec.ExternalName, Ports: trimServicePorts(o.Spec.Ports),
		}
		o.Status = corev1.ServiceStatus{}
	case *discoveryv1.EndpointSlice:
		o.ObjectMeta = trimMeta(o.ObjectMeta, true)
		for i := range o.Endpoints {
			e := &o.Endpoints[i]
			*e = discoveryv1.Endpoint{Addresses: e.Addresses, Hostname: e.Hostname,
				Conditions: discoveryv1.EndpointConditions{Ready: e.Conditions.Ready}}
		}
	case *corev1.Namespace:
		o.ObjectMeta = trimMeta(o.ObjectMeta, false)
		o.Spec, o.Status = corev1.NamespaceSpec{}, corev1.NamespaceStatus{}
	case *corev1.Pod:
		o.ObjectMeta = trimMeta(o.ObjectMeta, false)
		var dnsConfig *corev1.PodDNSConfig
		if c := o.Spec.DNSConfig; c != nil && (len(c.Searches) > 0 || len(c.Options) > 0) {
			dnsConfig = &corev1.PodDNSConfig{Searches: c.Searches, Options: c.Options} // autopath must know
		}
		o.Spec = corev1.PodSpec{NodeName: o.Spec.NodeName, DNSPolicy: o.Spec.DNSPolicy, HostNetwork: o.Spec.HostNetwork,
			Hostname: o.Spec.Hostname, Subdomain: o.Spec.Subdomain, DNSConfig: dnsConfig}
		o.Status = corev1.PodStatus{Phase: o.Status.Phase, PodIP: o.Status.PodIP, PodIPs: o.Status.PodIPs}
	}
	return obj, nil
}

func trimMeta(m metav1.ObjectMeta, keepServiceLabel bool) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID,
		ResourceVersion: m.ResourceVersion, CreationTimestamp: metav1.Time{Time: lastWrite(m)}}
	if keepServiceLabel {
		if s, ok := m.Labels[discoveryv1.LabelServiceName]; ok {
			out.Labels = map[string]string{discoveryv1.LabelServiceName: s}
		}
	}
	return out
}

func trimServicePorts(ps []corev1.ServicePort) []corev1.ServicePort {
	for i := range ps {
		ps[i] = corev1.ServicePort{Name: ps[i].Name, Protocol: ps[i].Protocol, Port: ps[i].Port}
	}
	return ps
}

// lastWrite is the best known time of the object's last write.
func lastWrite(m metav1.ObjectMeta) time.Time {
	t := m.CreationTimestamp.Time
	for _, f := range m.ManagedFields {
		if f.Time != nil && f.Time.After(t) {
			t = f.Time.Time
		}
	}
	return t
}
