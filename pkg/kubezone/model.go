package kubezone

import (
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
	Endpoints epList      `json:"eps,omitzero"` // ready endpoints only
	snap      bool
}

// epModel is one address of a ready endpoint of a slice (an endpoint with
// several addresses gives several epModels with the same hostname). Slices
// hold them as an epList; epModel is how they are read and persisted.
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
// decodeSliceProto builds the same model from the wire through the same
// helpers (sliceModelFor, slicePortModel, appendReady).
func sliceFromAPI(es *discoveryv1.EndpointSlice) *sliceModel {
	m := sliceModelFor(es.Namespace, es.Name, es.Labels[discoveryv1.LabelServiceName], string(es.AddressType))
	if m == nil {
		return nil
	}
	for _, p := range es.Ports {
		if p.Port != nil {
			m.Ports = append(m.Ports, slicePortModel(p.Name, (*string)(p.Protocol), *p.Port))
		}
	}
	var eps []epModel
	for _, ep := range es.Endpoints {
		eps = appendReady(eps, ep.Conditions.Ready, ep.Hostname, ep.Addresses)
	}
	m.Endpoints = newEPList(eps) // exact sizes, and eps is garbage from here
	return m
}

// sliceModelFor is the model of a slice of service svc without ports or
// endpoints yet; nil when svc is empty or the addresses are FQDNs.
func sliceModelFor(ns, name, svc, addressType string) *sliceModel {
	if svc == "" || addressType == string(discoveryv1.AddressTypeFQDN) {
		return nil
	}
	return &sliceModel{Namespace: strings.ToLower(ns), Name: strings.ToLower(name), Service: strings.ToLower(svc)}
}

// slicePortModel is a slice port with a port number (a port without one
// means "all ports": nothing a SRV record can name, and is left out).
func slicePortModel(name, proto *string, port int32) portModel {
	pm := portModel{Protocol: "tcp", Port: uint16(port)}
	if name != nil {
		pm.Name = strings.ToLower(*name)
	}
	if proto != nil {
		pm.Protocol = protoName(*proto)
	}
	return pm
}

// appendReady appends the parseable addresses of an endpoint to eps unless
// the endpoint is not ready (ready unset counts as ready).
func appendReady[S string | []byte](eps []epModel, ready *bool, hostname *string, addrs []S) []epModel {
	if ready != nil && !*ready {
		return eps
	}
	host := ""
	if hostname != nil {
		host = strings.ToLower(*hostname)
	}
	for _, s := range addrs {
		if a, err := netip.ParseAddr(string(s)); err == nil {
			eps = append(eps, epModel{Addr: a.Unmap(), Hostname: host})
		}
	}
	return eps
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

// protoName is the lowercased protocol; the usual ones are constants, so
// that ports do not each hold a copy.
func protoName(p string) string {
	switch p {
	case "", "TCP", "tcp":
		return "tcp"
	case "UDP", "udp":
		return "udp"
	case "SCTP", "sctp":
		return "sctp"
	}
	return strings.ToLower(p)
}

// slim is what the informers store in place of an API object: the
// metadata the informer and the zone read (name, namespace, UID, resource
// version, last write time) and the zone's model of it (immutable, shared
// with the zone). It implements metav1.Object itself rather than embedding
// an ObjectMeta: 112 bytes an object instead of 320. An EndpointSlice of
// 100 endpoints costs this plus the model, instead of ~40 KB as an API
// object held next to the zone.
type slim struct {
	name, namespace, resourceVersion string
	uid                              types.UID
	written                          time.Time // the last write time, returned as the creation timestamp
	model                            any       // *svcModel, *sliceModel, *podModel, nsPresent, initialEventsEnd; nil: the object gives no records
}

// initialEventsEnd is the model of a slim decoded by decodeSliceProto that
// gives no records and carries the annotation that ends a streaming list
// (a bookmark): GetAnnotations returns it for client-go's reflector. The
// writer treats it as nil.
type initialEventsEnd struct{}

var (
	_ runtime.Object = (*slim)(nil)
	_ metav1.Object  = (*slim)(nil)
)

// GetObjectKind implements runtime.Object: a slim has no type metadata.
func (s *slim) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object; the model is immutable and shared.
func (s *slim) DeepCopyObject() runtime.Object {
	c := *s
	return &c
}

// The metav1.Object methods: the kept fields read and write through; the
// dropped ones read as empty and ignore writes.

func (s *slim) GetNamespace() string                  { return s.namespace }
func (s *slim) SetNamespace(ns string)                { s.namespace = ns }
func (s *slim) GetName() string                       { return s.name }
func (s *slim) SetName(name string)                   { s.name = name }
func (s *slim) GetGenerateName() string               { return "" }
func (s *slim) SetGenerateName(string)                {}
func (s *slim) GetUID() types.UID                     { return s.uid }
func (s *slim) SetUID(uid types.UID)                  { s.uid = uid }
func (s *slim) GetResourceVersion() string            { return s.resourceVersion }
func (s *slim) SetResourceVersion(v string)           { s.resourceVersion = v }
func (s *slim) GetGeneration() int64                  { return 0 }
func (s *slim) SetGeneration(int64)                   {}
func (s *slim) GetSelfLink() string                   { return "" }
func (s *slim) SetSelfLink(string)                    {}
func (s *slim) GetCreationTimestamp() metav1.Time     { return metav1.Time{Time: s.written} }
func (s *slim) SetCreationTimestamp(t metav1.Time)    { s.written = t.Time }
func (s *slim) GetDeletionTimestamp() *metav1.Time    { return nil }
func (s *slim) SetDeletionTimestamp(*metav1.Time)     {}
func (s *slim) GetDeletionGracePeriodSeconds() *int64 { return nil }
func (s *slim) SetDeletionGracePeriodSeconds(*int64)  {}
func (s *slim) GetLabels() map[string]string          { return nil }
func (s *slim) SetLabels(map[string]string)           {}
func (s *slim) GetAnnotations() map[string]string {
	if _, ok := s.model.(initialEventsEnd); ok {
		return map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return nil
}
func (s *slim) SetAnnotations(map[string]string)              {}
func (s *slim) GetFinalizers() []string                       { return nil }
func (s *slim) SetFinalizers([]string)                        {}
func (s *slim) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (s *slim) SetOwnerReferences([]metav1.OwnerReference)    {}
func (s *slim) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (s *slim) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

// trim is the informer transform: it replaces each object, before it is
// stored, by a slim of its name, namespace, UID and resource version, the
// object's last write time (latest managedFields time, else
// creationTimestamp; read back as the creation timestamp) for the
// write-to-programmed latency histogram, and its model. Everything else (managedFields,
// annotations, labels, status, unused spec) is dropped.
func trim(obj any) (any, error) {
	var m metav1.ObjectMeta
	switch o := obj.(type) {
	case *corev1.Service:
		m = o.ObjectMeta
	case *discoveryv1.EndpointSlice:
		m = o.ObjectMeta
	case *corev1.Namespace:
		m = o.ObjectMeta
	case *corev1.Pod:
		m = o.ObjectMeta
	default:
		return obj, nil // already slim, or a tombstone
	}
	return &slim{name: m.Name, namespace: m.Namespace, resourceVersion: m.ResourceVersion, uid: m.UID,
		written: lastWrite(m), model: model(obj)}, nil
}

// model converts an API object; nil (untyped) when it contributes
// nothing, which the writer treats as a deletion.
func model(obj any) any {
	switch o := obj.(type) {
	case *corev1.Service:
		return serviceFromAPI(o)
	case *discoveryv1.EndpointSlice:
		if m := sliceFromAPI(o); m != nil {
			return m
		}
	case *corev1.Namespace:
		return nsPresent{}
	case *corev1.Pod:
		return podFromAPI(o)
	}
	return nil
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
