package kubezone

import (
	"bytes"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
)

// controllerSlice is an EndpointSlice as the EndpointSlice controller
// writes it for service svc-i of synthCluster: ten endpoints with node
// names, zones, target references and conditions, labels, an owner and
// managed fields. notReady endpoint 0 is not ready.
func controllerSlice(i int, notReady bool) *discoveryv1.EndpointSlice {
	ns, name := fmt.Sprintf("ns-%d", i%100), fmt.Sprintf("svc-%d", i)
	now := metav1.NewTime(time.Unix(1_700_000_000, 0))
	es := slice(ns, name+"-abcde", name, []discoveryv1.EndpointPort{slicePort("http", 80)})
	es.Labels["endpointslice.kubernetes.io/managed-by"] = "endpointslice-controller.k8s.io"
	es.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": now.Format(time.RFC3339)}
	es.UID, es.ResourceVersion, es.Generation, es.CreationTimestamp = "6d1f4c2e-8a7b-4c1d-9e2f-3a4b5c6d7e8f", "1", 1, now
	es.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: name, UID: "0a1b2c3d"}}
	es.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "discovery.k8s.io/v1", Time: &now, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(strings.Repeat(`{"f:endpoints":{}}`, 20))}}
	zone := "zone-a"
	for j := range 10 {
		x := i*10 + j + 1
		ready := !notReady || j != 0
		node := fmt.Sprintf("node-%d", x%5000)
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", byte(x>>16), byte(x>>8), byte(x))},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready, Terminating: ptrTo(false)},
			NodeName:   &node, Zone: &zone,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-%d", name, j), UID: "9f8e7d6c"},
		})
	}
	return es
}

// BenchmarkSliceChurn is one agent under steady EndpointSlice churn: per
// operation, one watch frame's EndpointSlice (an endpoint turns not ready
// or ready again) is decoded from protobuf into a slim and the zone applies
// it, as the agent's EndpointSlice watch does past the socket. burst-100
// reads 100 updates of 100 services before the watch applies them
// together (reported per update).
func BenchmarkSliceChurn(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) { benchChurn(b, n, 1) })
		b.Run(fmt.Sprintf("%dk-burst-100", n/1000), func(b *testing.B) { benchChurn(b, n, 100) })
	}
}

func benchChurn(b *testing.B, services, burst int) {
	z := buildZone(b, synthCluster(services, 10))
	ser := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	// frames[k][0|1]: the k-th churned service's slice as a MODIFIED watch
	// frame, all ready (resource version 1) or not (2), alternating.
	frames := make([][2][]byte, burst)
	for k := range burst {
		for v := range 2 {
			es := controllerSlice(services-1-k, v == 1)
			es.APIVersion, es.Kind, es.ResourceVersion = "discovery.k8s.io/v1", "EndpointSlice", fmt.Sprint(v+1)
			var buf bytes.Buffer
			if err := ser.Encode(es, &buf); err != nil {
				b.Fatal(err)
			}
			f, err := (&metav1.WatchEvent{Type: string(watch.Modified), Object: runtime.RawExtension{Raw: buf.Bytes()}}).Marshal()
			if err != nil {
				b.Fatal(err)
			}
			frames[k][v] = f
		}
	}
	// The agent's EndpointSlice watch (slicewatch.go) past the socket:
	// each frame decoded and queued, then the burst applied together.
	w := &sliceWatch{z: z, known: map[string]string{}}
	for k := range burst {
		if err := w.handle(frames[k][1]); err != nil {
			b.Fatal(err)
		}
	}
	w.flush()
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	v := 0
	for b.Loop() {
		for k := range burst {
			if err := w.handle(frames[k][v]); err != nil {
				b.Fatal(err)
			}
		}
		w.flush()
		v ^= 1
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/update")
	// CPU time of the process (GC included) rather than wall time: on a
	// shared machine it is the steadier figure, and it is what an agent
	// costs its node.
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N*burst), "cpu-ns/update")
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
