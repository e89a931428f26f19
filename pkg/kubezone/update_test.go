package kubezone

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestIncrementalUpdates: object changes after the sync reach the zone,
// bump the generation and the SOA serial, and leave other names' nodes
// untouched.
func TestIncrementalUpdates(t *testing.T) {
	world := objs(namespace("ns"), service("ns", "web", []string{"10.96.0.1"}, svcPort("http", 80)),
		service("ns", "other", []string{"10.96.0.2"}))
	zoneWith(t, Config{}, world, func(t *testing.T, z *Zone, c *fake.Clientset) {
		ctx := t.Context()
		other := z.tab.get("other.ns.svc.cluster.local.")
		gen, serial := z.Generation(), z.meta.Load().soaRR[0].(*dns.SOA).Serial

		svc := service("ns", "db", []string{"None"}, svcPort("pg", 5432))
		if _, err := c.CoreV1().Services("ns").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		checkAnswer(t, "headless without slices", z.Lookup("db.ns.svc.cluster.local.", dns.TypeA), nx, nil, true, "")

		es := slice("ns", "db-1", "db", []discoveryv1.EndpointPort{slicePort("pg", 5432)},
			ep{addrs: []string{"10.0.0.1"}, hostname: "db-0"})
		if _, err := c.DiscoveryV1().EndpointSlices("ns").Create(ctx, es, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		checkAnswer(t, "slice added", z.Lookup("db-0.db.ns.svc.cluster.local.", dns.TypeA), ok,
			[]string{"db-0.db.ns.svc.cluster.local. A 10.0.0.1"}, false, "")

		es.Endpoints[0].Conditions.Ready = ptrTo(false)
		es.ResourceVersion = "2"
		if _, err := c.DiscoveryV1().EndpointSlices("ns").Update(ctx, es, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		checkAnswer(t, "endpoint not ready", z.Lookup("db-0.db.ns.svc.cluster.local.", dns.TypeA), nx, nil, true, "")
		if z.InZone("1.0.0.10.in-addr.arpa.") {
			t.Errorf("PTR of a not-ready endpoint: InZone got true, want false")
		}

		if err := c.CoreV1().Services("ns").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		checkAnswer(t, "service deleted", z.Lookup("web.ns.svc.cluster.local.", dns.TypeA), nx, nil, true, "")
		checkAnswer(t, "service deleted: SRV", z.Lookup("_http._tcp.web.ns.svc.cluster.local.", dns.TypeSRV), nx, nil, true, "")
		checkAnswer(t, "service deleted: ENT", z.Lookup("_tcp.web.ns.svc.cluster.local.", dns.TypeSRV), nx, nil, true, "")
		checkAnswer(t, "service deleted: PTR no longer ours", z.Lookup("1.0.96.10.in-addr.arpa.", dns.TypePTR),
			dns.RcodeRefused, nil, false, "")

		if got := z.Generation(); got <= gen {
			t.Errorf("generation: got %d, want > %d", got, gen)
		}
		if got := z.meta.Load().soaRR[0].(*dns.SOA).Serial; got == serial {
			t.Errorf("SOA serial: got %d unchanged, want changed", got)
		}
		if got := z.tab.get("other.ns.svc.cluster.local."); got == nil || got.rrs[0] != other.rrs[0] {
			t.Errorf("unrelated service's records were rebuilt: got %v, want the same record objects", got)
		}
		// Four events since the sync: service create, slice create, slice
		// update, service deletion. The fake clientset stamps managedFields
		// times on writes, so all but the deletion carry a write time.
		if got := histCount(t, z, "event"); got != 4 {
			t.Errorf("programming{from=event} observations: got %d, want 4", got)
		}
		if got := histCount(t, z, "write"); got != 3 {
			t.Errorf("programming{from=write} observations: got %d, want 3", got)
		}
		if got := testutil.ToFloat64(z.met.objects.WithLabelValues("services")); got != 2 {
			t.Errorf("nodecache_zone_objects{kind=services}: got %v, want 2", got)
		}

		if err := c.CoreV1().Namespaces().Delete(ctx, "ns", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		checkAnswer(t, "namespace with services stays", z.Lookup("ns.svc.cluster.local.", dns.TypeA), ok, nil, true, "")
	})
}

func histCount(t testing.TB, z *Zone, from string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := z.met.programming.WithLabelValues(from).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestPreSyncServfail: before the first sync, names that would be denied
// get SERVFAIL; names no object can create still get NXDOMAIN.
func TestPreSyncServfail(t *testing.T) {
	z, _ := newZone(t, Config{})
	cases := []lookupCase{
		{row: "unknown service", qname: "web.ns.svc.cluster.local.", qtype: dns.TypeA, rcode: fail},
		{row: "unknown namespace ENT", qname: "ns.svc.cluster.local.", qtype: dns.TypeA, rcode: fail},
		{row: "pod name", qname: "10-0-0-1.ns.pod.cluster.local.", qtype: dns.TypeA, rcode: fail},
		{row: "static name", qname: "dns-version.cluster.local.", qtype: dns.TypeTXT, rcode: ok,
			answer: []string{`dns-version.cluster.local. TXT "1.1.0"`}},
		{row: "static ENT", qname: "svc.cluster.local.", qtype: dns.TypeA, rcode: ok, soa: true},
		{row: "apex NODATA", qname: "cluster.local.", qtype: dns.TypeA, rcode: ok, soa: true},
		{row: "impossible label", qname: "foo.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "too many labels", qname: "a.b.c.d.e.f.svc.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
	}
	for _, c := range cases {
		got := z.Lookup(c.qname, c.qtype)
		checkAnswer(t, c.row, got, c.rcode, c.answer, c.soa, c.chase)
	}
	if z.Synced() || z.Source() != SourceNone {
		t.Errorf("fresh zone: got synced=%v source=%q, want false, none", z.Synced(), z.Source())
	}
}

// TestDeadAPIServer: with every list failing the zone stays unsynced,
// answers SERVFAIL for deniable names, and logs a bounded number of lines.
func TestDeadAPIServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		client.PrependReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("connection refused")
		})
		z, logs := newZone(t, Config{})
		runZone(t, z, client)
		const elapsed = 10 * time.Minute
		time.Sleep(elapsed)
		synctest.Wait()
		if z.Synced() {
			t.Fatal("synced with a dead API server")
		}
		checkAnswer(t, "unknown service", z.Lookup("web.ns.svc.cluster.local.", dns.TypeA), fail, nil, false, "")
		lines := strings.Count(logs.String(), "API server unreachable")
		// Three informers, at most one line per minute each (plus the first).
		if limit := 3 * int(elapsed/apiErrorLogEvery+1); lines == 0 || lines > limit {
			t.Errorf("unreachable log lines: got %d, want 1..%d", lines, limit)
		}
	})
}

// TestConcurrentReaders: lookups run while the writer replaces services;
// every answer a reader sees is a complete one (run with -race).
func TestConcurrentReaders(t *testing.T) {
	evs := synthCluster(200, 5)
	z := buildZone(t, evs)
	stop := make(chan struct{})
	errs := make(chan string, 2)
	for range 2 {
		go func() {
			for {
				select {
				case <-stop:
					errs <- ""
					return
				default:
				}
				a := z.Lookup("svc-1.ns-1.svc.cluster.local.", dns.TypeA)
				if a.Rcode != ok || len(a.Answer) != 1 {
					errs <- "stable service: got rcode " + dns.RcodeToString[a.Rcode]
					return
				}
				if a := z.Lookup("svc-5.ns-5.svc.cluster.local.", dns.TypeA); a.Rcode == ok && len(a.Answer) == 0 {
					errs <- "changing service: NOERROR without records"
					return
				}
			}
		}()
	}
	es := *evs[len(evs)-1].obj.(*sliceModel) // svc-199's slice
	eps := es.Endpoints.models()
	for i := range 500 {
		fewer := es
		fewer.Endpoints = newEPList(eps[:i%len(eps)])
		z.enqueue(event{kind: objSlice, key: es.key(), obj: &fewer})
		z.enqueue(event{kind: objService, key: "ns-5/svc-5", obj: nil})
		if i%2 == 0 {
			z.enqueue(evs[100+2*5]) // svc-5 back
		}
		z.drain()
	}
	close(stop)
	for range 2 {
		if msg := <-errs; msg != "" {
			t.Error(msg)
		}
	}
}
