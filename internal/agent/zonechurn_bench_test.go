package agent

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/server"
)

// countingZone counts the zone lookups the server makes: each is a query
// the memo did not answer.
type countingZone struct {
	zoneAdapter
	lookups atomic.Int64
}

func (c *countingZone) Lookup(qname string, qtype uint16) server.ZoneAnswer {
	c.lookups.Add(1)
	return c.zoneAdapter.Lookup(qname, qtype)
}

// churnCluster is bench/run.sh's synthetic cluster (benchtool cluster):
// services svc-i in ns-(i%10), every tenth headless, one EndpointSlice of
// ten ready endpoints each.
func churnCluster(services int) []runtime.Object {
	var out []runtime.Object
	for i := range 10 {
		out = append(out, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-" + strconv.Itoa(i)}})
	}
	for i := range services {
		out = append(out, churnService(i), churnSlice(i, true))
	}
	return out
}

func churnService(i int) *corev1.Service {
	spec := corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}}}
	if i%10 == 9 {
		spec.ClusterIP, spec.ClusterIPs = "None", []string{"None"}
	} else {
		ip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}).String()
		spec.ClusterIP, spec.ClusterIPs = ip, []string{ip}
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc-" + strconv.Itoa(i), Namespace: "ns-" + strconv.Itoa(i%10)}, Spec: spec}
}

// churnSlice is service i's slice; first says whether its first endpoint
// is ready.
func churnSlice(i int, first bool) *discoveryv1.EndpointSlice {
	name, port := "http", int32(8080)
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "svc-" + strconv.Itoa(i) + "-x", Namespace: "ns-" + strconv.Itoa(i%10),
			Labels: map[string]string{discoveryv1.LabelServiceName: "svc-" + strconv.Itoa(i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}
	for j := range 10 {
		ready := j != 0 || first
		x := i*10 + j
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{netip.AddrFrom4([4]byte{10, 1, byte(x >> 8), byte(x)}).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		})
	}
	return s
}

// churnQueries are bench/run.sh's zone queries (benchtool cluster
// -queries): per ten, six A of a service, one SRV, one PTR of a ClusterIP
// (an endpoint name of a headless service), one AAAA and one NXDOMAIN.
func churnQueries(tb testing.TB, services, n int) [][]byte {
	tb.Helper()
	out := make([][]byte, 0, n)
	for k := range n {
		i := (k * 7919) % services
		svc := "svc-" + strconv.Itoa(i) + ".ns-" + strconv.Itoa(i%10) + ".svc.cluster.local."
		name, qtype := svc, dns.TypeA
		switch k % 10 {
		case 6:
			name, qtype = "_http._tcp."+svc, dns.TypeSRV
		case 7:
			if i%10 == 9 {
				name = fmt.Sprintf("10-1-%d-%d.%s", byte(i*10>>8), byte(i*10), svc)
			} else {
				name, qtype = fmt.Sprintf("%d.%d.96.10.in-addr.arpa.", byte(i), byte(i>>8)), dns.TypePTR
			}
		case 8:
			qtype = dns.TypeAAAA
		case 9:
			name = "nope-" + strconv.Itoa(i) + ".ns-" + strconv.Itoa(i%10) + ".svc.cluster.local."
		}
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		pkt, err := m.Pack()
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, pkt)
	}
	return out
}

// BenchmarkZoneChurn answers bench/run.sh's zone queries from a real
// kubezone.Zone (1,000 services, fake clientset) through the server's
// in-process path, with no EndpointSlice updates and with one update every
// 5,000 answers (20 updates a second at 100k answers a second). lookups/op
// is the share of answers the memo did not have: what churn costs.
func BenchmarkZoneChurn(b *testing.B) {
	for _, every := range []int{0, 5000} {
		name := "none"
		if every > 0 {
			name = "update-every-" + strconv.Itoa(every)
		}
		b.Run(name, func(b *testing.B) { benchZoneChurn(b, 1000, every) })
	}
}

func benchZoneChurn(b *testing.B, services, every int) {
	client := fake.NewClientset(churnCluster(services)...)
	z, err := kubezone.New(kubezone.Config{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- z.Run(ctx, kubezone.Clients{Kube: client}) }()
	b.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(time.Minute); ; {
		if st := z.Stats(); st.Synced && st.Services == services && st.Endpoints == services*10 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("zone did not sync: %+v", z.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c, err := cache.New(cache.Config{}, answerAll{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	cz := &countingZone{zoneAdapter: zoneAdapter{z}}
	s, err := server.New(server.Config{Addrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}},
		server.Deps{Zone: cz, Resolver: c}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	queries := churnQueries(b, services, 10_000)
	client4 := netip.MustParseAddr("10.0.0.1")
	for _, pkt := range queries { // warm the memo
		if _, _, err := s.Query(ctx, pkt, client4); err != nil {
			b.Fatal(err)
		}
	}
	cz.lookups.Store(0)
	updates, k := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.Query(ctx, queries[k%len(queries)], client4); err != nil {
			b.Fatal(err)
		}
		k++
		if every > 0 && k%every == 0 {
			i := (updates * 37) % services
			es := churnSlice(i, updates/services%2 == 1)
			es.ResourceVersion = strconv.Itoa(updates + 2) // the zone drops an update of the version it has
			if _, err := client.DiscoveryV1().EndpointSlices(es.Namespace).Update(ctx, es, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
			updates++
		}
	}
	b.ReportMetric(float64(cz.lookups.Load())/float64(k)*1000, "lookups/1k-answers")
	b.ReportMetric(float64(updates), "updates")
}
