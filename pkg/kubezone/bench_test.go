package kubezone

import (
	"flag"
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// benchLarge adds the 50k services / 500k endpoints cluster to the zone
// benchmarks: go test -bench Zone -kubezone.large ./pkg/kubezone/
var benchLarge = flag.Bool("kubezone.large", false, "also benchmark a 50k services / 500k endpoints cluster")

// synthCluster is a cluster of n services with epsPer ready endpoints
// each, as the events the informers would deliver: every fifth service is
// headless with StatefulSet hostnames, the rest ClusterIP; 100 namespaces;
// two ports (one named) per service.
func synthCluster(n, epsPer int) []event {
	evs := make([]event, 0, 2*n+100)
	for i := range 100 {
		evs = append(evs, event{kind: objNamespace, key: fmt.Sprintf("ns-%d", i), obj: nsPresent{}})
	}
	ports := []portModel{{Name: "http", Protocol: "tcp", Port: 80}, {Protocol: "udp", Port: 9000}}
	for i := range n {
		ns, name := fmt.Sprintf("ns-%d", i%100), fmt.Sprintf("svc-%d", i)
		s := &svcModel{Namespace: ns, Name: name, Ports: ports}
		headless := i%5 == 0
		if headless {
			s.Headless = true
		} else {
			s.ClusterIPs = []netip.Addr{netip.AddrFrom4([4]byte{172, 16 + byte(i>>16), byte(i >> 8), byte(i)})}
		}
		es := &sliceModel{Namespace: ns, Name: name + "-abcde", Service: name, Ports: ports}
		eps := make([]epModel, 0, epsPer)
		for j := range epsPer {
			x := i*epsPer + j + 1
			e := epModel{Addr: netip.AddrFrom4([4]byte{10, byte(x >> 16), byte(x >> 8), byte(x)})}
			if headless {
				e.Hostname = fmt.Sprintf("%s-%d", name, j)
			}
			eps = append(eps, e)
		}
		es.Endpoints = newEPList(eps)
		evs = append(evs, event{kind: objService, key: s.key(), obj: s}, event{kind: objSlice, key: es.key(), obj: es})
	}
	return evs
}

type clusterSize struct {
	name          string
	services, eps int
}

func benchSizes(b *testing.B) []clusterSize {
	b.Helper()
	sizes := []clusterSize{{"10k", 10_000, 10}}
	if *benchLarge {
		sizes = append(sizes, clusterSize{"50k", 50_000, 10})
	}
	return sizes
}

func buildZone(tb testing.TB, evs []event) *Zone {
	tb.Helper()
	z, _ := newZone(tb, Config{})
	for _, ev := range evs {
		z.enqueue(ev)
	}
	z.drain()
	z.synced.Store(true)
	return z
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkZoneBuild builds the zone from a cold list (every object queued
// at once, one drain) and reports its heap.
func BenchmarkZoneBuild(b *testing.B) {
	for _, size := range benchSizes(b) {
		b.Run(size.name, func(b *testing.B) {
			var heap uint64
			var names int
			for b.Loop() {
				b.StopTimer()
				before := heapInUse()
				evs := synthCluster(size.services, size.eps)
				b.StartTimer()
				z := buildZone(b, evs)
				b.StopTimer()
				heap = heapInUse() - before
				names = z.Stats().Names
				runtime.KeepAlive(z)
				b.StartTimer()
			}
			endpoints := size.services * size.eps
			b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
			b.ReportMetric(float64(heap)/float64(size.services), "heap-B/service")
			b.ReportMetric(float64(heap)/float64(endpoints), "heap-B/endpoint")
			b.ReportMetric(float64(names), "names")
		})
	}
}

// BenchmarkZoneUpdate applies one EndpointSlice change (an endpoint turns
// not ready, then ready again) to a built zone: of the last service (a
// ClusterIP service), and of the last headless one, whose names list its
// endpoints.
func BenchmarkZoneUpdate(b *testing.B) {
	for _, size := range benchSizes(b) {
		b.Run(size.name, func(b *testing.B) { benchZoneUpdate(b, size, 1) })
		b.Run(size.name+"-headless", func(b *testing.B) { benchZoneUpdate(b, size, 5) })
	}
}

// benchZoneUpdate churns the slice of the back-th service from the end.
func benchZoneUpdate(b *testing.B, size clusterSize, back int) {
	evs := synthCluster(size.services, size.eps)
	z := buildZone(b, evs)
	orig := evs[len(evs)-2*back+1] // the service's slice
	es := *orig.obj.(*sliceModel)
	fewer := es
	fewer.Endpoints = newEPList(es.Endpoints.models()[1:])
	i := 0
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		ev := event{kind: objSlice, key: orig.key, obj: &es}
		if i%2 == 0 {
			ev.obj = &fewer
		}
		i++
		z.enqueue(ev)
		z.drain()
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/update") // see benchChurn
}

// BenchmarkLookup answers prebuilt names of a 10k-service zone.
func BenchmarkLookup(b *testing.B) {
	z := buildZone(b, synthCluster(10_000, 10))
	cases := []struct {
		name, qname string
		qtype       uint16
	}{
		{"clusterip-A", "svc-1.ns-1.svc.cluster.local.", dns.TypeA},
		{"headless-A", "svc-5.ns-5.svc.cluster.local.", dns.TypeA},
		{"endpoint-A", "svc-5-3.svc-5.ns-5.svc.cluster.local.", dns.TypeA},
		{"srv", "_http._tcp.svc-5.ns-5.svc.cluster.local.", dns.TypeSRV},
		{"ptr", "1.0.16.172.in-addr.arpa.", dns.TypePTR},
		{"nodata-AAAA", "svc-1.ns-1.svc.cluster.local.", dns.TypeAAAA},
		{"nxdomain", "nope.ns-1.svc.cluster.local.", dns.TypeA},
		{"pod-insecure", "10-1-2-3.ns-1.pod.cluster.local.", dns.TypeA},
	}
	for _, c := range cases {
		if a := z.Lookup(c.qname, c.qtype); a.Rcode != dns.RcodeSuccess && c.name != "nxdomain" {
			b.Fatalf("%s: rcode %d", c.name, a.Rcode)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				z.Lookup(c.qname, c.qtype)
			}
		})
	}
	b.Run("parallel-clusterip-A", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				z.Lookup("svc-1.ns-1.svc.cluster.local.", dns.TypeA)
			}
		})
	})
}

// BenchmarkInformerStore measures the heap of the informers' stores for the
// synthetic 10k/100k cluster: slim objects (trimmed metadata and models) in
// a client-go indexer, as Run keeps them. store-MB leaves out the models,
// which the zone holds anyway.
func BenchmarkInformerStore(b *testing.B) {
	var heap, models uint64
	for b.Loop() {
		before := heapInUse()
		evs := synthCluster(10_000, 10)
		models = heapInUse() - before
		runtime.KeepAlive(evs)
		before = heapInUse()
		store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		for _, ev := range synthCluster(10_000, 10) {
			var obj any
			switch m := ev.obj.(type) {
			case *svcModel:
				ips := []string{"None"}
				if !m.Headless {
					ips = []string{m.ClusterIPs[0].String()}
				}
				obj = service(m.Namespace, m.Name, ips, svcPort("http", 80), corev1.ServicePort{Protocol: "UDP", Port: 9000})
			case *sliceModel:
				eps := make([]ep, 0, m.Endpoints.len())
				for _, e := range m.Endpoints.models() {
					eps = append(eps, ep{addrs: []string{e.Addr.String()}, hostname: e.Hostname})
				}
				obj = slice(m.Namespace, m.Name, m.Service, []discoveryv1.EndpointPort{slicePort("http", 80)}, eps...)
			default:
				continue
			}
			trimmed, err := trim(obj)
			if err != nil {
				b.Fatal(err)
			}
			if err := store.Add(trimmed); err != nil {
				b.Fatal(err)
			}
		}
		heap = heapInUse() - before
		runtime.KeepAlive(store)
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
	b.ReportMetric(float64(heap-min(heap, models))/(1<<20), "store-MB")
}
