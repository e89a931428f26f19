package kubezone

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTrim: the informer transform replaces each object by its trimmed
// metadata (with the last write time) and its model.
func TestTrim(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	written := metav1.NewTime(created.Add(time.Hour))
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "7", CreationTimestamp: created,
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
		Labels:      map[string]string{discoveryv1.LabelServiceName: "web", "app": "web"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "a", Time: &created}, {Manager: "b", Time: &written},
			{Manager: "c"}}}

	svc := service("ns", "web", []string{"10.96.0.1"}, svcPort("http", 80))
	svc.ObjectMeta = *meta.DeepCopy()
	es := slice("ns", "web", "web", []discoveryv1.EndpointPort{slicePort("http", 8080)},
		ep{addrs: []string{"10.0.0.1"}, hostname: "h"})
	es.ObjectMeta = *meta.DeepCopy()
	es.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: "web-1"}
	p := pod("ns", "web", "node-a", "10.0.0.1")
	p.ObjectMeta = *meta.DeepCopy()
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "nginx"}}
	ns := namespace("ns")
	ns.ObjectMeta = *meta.DeepCopy()
	ns.Namespace = ""

	cases := []struct {
		kind string
		obj  any
		want any
	}{
		{"service", svc, &svcModel{Namespace: "ns", Name: "web", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")},
			Ports: []portModel{{"http", "tcp", 80}}}},
		{"endpointslice", es, &sliceModel{Namespace: "ns", Name: "web", Service: "web", Ports: []portModel{{"http", "tcp", 8080}},
			Endpoints: newEPList([]epModel{{Addr: netip.MustParseAddr("10.0.0.1"), Hostname: "h"}})}},
		{"pod", p, &podModel{Namespace: "ns", Name: "web", Node: "node-a", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
			Phase: "Running", DNSPolicy: "ClusterFirst"}},
		{"namespace", ns, nsPresent{}},
	}
	for _, c := range cases {
		out, err := trim(c.obj)
		if err != nil {
			t.Fatalf("%s: %v", c.kind, err)
		}
		s, ok := out.(*slim)
		if !ok {
			t.Fatalf("%s: got %T, want *slim", c.kind, out)
		}
		var m metav1.Object = s // the slim is its own metadata now (it no longer embeds an ObjectMeta)
		if m.GetAnnotations() != nil || m.GetManagedFields() != nil || m.GetLabels() != nil {
			t.Errorf("%s: got annotations %v, labels %v, %d managed fields, want all dropped", c.kind, m.GetAnnotations(),
				m.GetLabels(), len(m.GetManagedFields()))
		}
		if !m.GetCreationTimestamp().Time.Equal(written.Time) {
			t.Errorf("%s: last write time: got %v, want %v", c.kind, m.GetCreationTimestamp(), written)
		}
		if m.GetName() != "web" || m.GetResourceVersion() != "7" || m.GetNamespace() != c.obj.(metav1.Object).GetNamespace() {
			t.Errorf("%s: got meta %+v, want name, namespace and resource version kept", c.kind, s)
		}
		if !reflect.DeepEqual(s.model, c.want) {
			t.Errorf("%s: model: got %+v, want %+v", c.kind, s.model, c.want)
		}
		if again, _ := trim(s); again != any(s) {
			t.Errorf("%s: trimming a slim object: got a new object, want it unchanged", c.kind)
		}
		if cp := s.DeepCopyObject().(*slim); cp == s || cp.name != s.name || cp.model != s.model {
			t.Errorf("%s: DeepCopyObject: got %+v, want an equal copy", c.kind, cp)
		}
	}
}

// FuzzDecodeSnapshot: no input makes the decoder panic, and whatever it
// accepts loads.
func FuzzDecodeSnapshot(f *testing.F) {
	good, err := encodeSnapshot(&snapshotData{Domain: "cluster.local.", Namespaces: []string{"a"},
		Services: []*svcModel{{Namespace: "a", Name: "s"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(snapMagic))
	f.Fuzz(func(t *testing.T, raw []byte) {
		data, err := decodeSnapshot(raw, "cluster.local.")
		if err != nil {
			return
		}
		if data.Domain != "cluster.local." {
			t.Errorf("accepted domain %q", data.Domain)
		}
	})
}

// FuzzLookup: any question gets an answer without panicking, and answers
// the zone owns carry owner names equal to the lowercased question.
func FuzzLookup(f *testing.F) {
	z := buildZone(f, synthCluster(20, 3))
	for _, s := range []string{"svc-1.ns-1.svc.cluster.local.", "_http._tcp.svc-5.ns-5.svc.cluster.local.",
		"10-1-2-3.ns-1.pod.cluster.local.", "fd00--1.ns-1.pod.cluster.local.", "1.0.16.172.in-addr.arpa.", "cluster.local.",
		".", "..cluster.local.", "a.b.c.d.e.f.g.svc.cluster.local."} {
		f.Add(s, uint16(dns.TypeA))
	}
	f.Fuzz(func(t *testing.T, qname string, qtype uint16) {
		a := z.Lookup(qname, qtype)
		if len(a.Answer) > 0 && a.Answer[0].Header().Name != lower(qname) {
			t.Errorf("owner %q for question %q", a.Answer[0].Header().Name, qname)
		}
		_ = z.InZone(qname)
	})
}
