package kubezone

import (
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTrim: the informer transform keeps what answers need, drops the
// rest, and records the last write time.
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
	svc.Spec.Selector = map[string]string{"app": "web"}
	svc.Spec.Ports[0].TargetPort.IntVal = 8080
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}
	if _, err := trim(svc); err != nil {
		t.Fatal(err)
	}
	checkMeta(t, "service", svc.ObjectMeta, written.Time, nil)
	if svc.Spec.Selector != nil || svc.Spec.Ports[0].TargetPort.IntVal != 0 || len(svc.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("service: got spec %+v status %+v, want selector, target port and status dropped", svc.Spec, svc.Status)
	}
	if m := serviceFromAPI(svc); len(m.ClusterIPs) != 1 || len(m.Ports) != 1 || m.Ports[0] != (portModel{"http", "tcp", 80}) {
		t.Errorf("service model after trim: got %+v", m)
	}

	node, zone := "node-a", "zone-a"
	es := slice("ns", "web-1", "web", nil, ep{addrs: []string{"10.0.0.1"}, hostname: "h"})
	es.ObjectMeta = *meta.DeepCopy()
	es.Endpoints[0].NodeName, es.Endpoints[0].Zone = &node, &zone
	es.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: "web-1"}
	if _, err := trim(es); err != nil {
		t.Fatal(err)
	}
	checkMeta(t, "endpointslice", es.ObjectMeta, written.Time, map[string]string{discoveryv1.LabelServiceName: "web"})
	if e := es.Endpoints[0]; e.NodeName != nil || e.Zone != nil || e.TargetRef != nil || e.Hostname == nil || e.Addresses[0] != "10.0.0.1" {
		t.Errorf("endpoint: got %+v, want only addresses, hostname and conditions", e)
	}

	p := pod("ns", "web-1", "node-a", "10.0.0.1")
	p.ObjectMeta = *meta.DeepCopy()
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "nginx"}}
	if _, err := trim(p); err != nil {
		t.Fatal(err)
	}
	checkMeta(t, "pod", p.ObjectMeta, written.Time, nil)
	if len(p.Spec.Containers) != 0 || p.Spec.NodeName != "node-a" || p.Status.PodIP != "10.0.0.1" {
		t.Errorf("pod: got spec %+v, want containers dropped, node and IP kept", p.Spec)
	}
}

func checkMeta(t *testing.T, kind string, m metav1.ObjectMeta, written time.Time, labels map[string]string) {
	t.Helper()
	if m.Annotations != nil || m.ManagedFields != nil {
		t.Errorf("%s: got annotations %v, managed fields %d, want both dropped", kind, m.Annotations, len(m.ManagedFields))
	}
	if !m.CreationTimestamp.Time.Equal(written) {
		t.Errorf("%s: last write time: got %v, want %v", kind, m.CreationTimestamp, written)
	}
	if len(m.Labels) != len(labels) || m.Labels[discoveryv1.LabelServiceName] != labels[discoveryv1.LabelServiceName] {
		t.Errorf("%s: labels: got %v, want %v", kind, m.Labels, labels)
	}
	if m.Name == "" || m.Namespace == "" || m.ResourceVersion == "" {
		t.Errorf("%s: got meta %+v, want name, namespace and resource version kept", kind, m)
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
