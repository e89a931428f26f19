package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodecache/nodecache/pkg/kubezone"
)

func TestClusterSpecValidate(t *testing.T) {
	tests := []struct {
		name string
		spec clusterSpec
		ok   bool
	}{
		{"small", clusterSpec{Namespaces: 1, Services: 1, Endpoints: 0}, true},
		{"bench", clusterSpec{Namespaces: 10, Services: 1000, Endpoints: 10, Headless: 10}, true},
		{"large", clusterSpec{Namespaces: 10, Services: 10000, Endpoints: 10}, true},
		{"no namespace", clusterSpec{Services: 1}, false},
		{"no service", clusterSpec{Namespaces: 1}, false},
		{"too many services", clusterSpec{Namespaces: 1, Services: 65001}, false},
		{"too many endpoints", clusterSpec{Namespaces: 1, Services: 1, Endpoints: 251}, false},
		{"negative headless", clusterSpec{Namespaces: 1, Services: 1, Headless: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			if got := err == nil; got != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestAddressPlanUnique(t *testing.T) {
	seen := map[string]string{}
	add := func(ip, who string) {
		if prev, dup := seen[ip]; dup {
			t.Fatalf("got %s for both %s and %s, want distinct addresses", ip, prev, who)
		}
		seen[ip] = who
	}
	for i := 0; i < 65000; i += 997 {
		add(clusterIP(i).String(), "service "+svcName(i))
		for j := 0; j < 250; j += 83 {
			add(endpointIP(i, j).String(), "endpoint of "+svcName(i))
		}
	}
	if got := clusterIP(0).String(); got != "10.96.1.0" {
		t.Errorf("clusterIP(0) = %s, want 10.96.1.0 (clear of 10.96.0.0/24)", got)
	}
}

// startZone loads the YAML the generator wrote through kubezone's fixture
// path (the same as `nodecache --fixture`) and waits for the zone to sync.
func startZone(t testing.TB, spec clusterSpec) *kubezone.Zone {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := writeFile(path, func(w io.Writer) error { return spec.writeYAML(w, 0) }); err != nil {
		t.Fatal(err)
	}
	objs, err := kubezone.LoadFixture(path)
	if err != nil {
		t.Fatalf("LoadFixture of the generated YAML: %v", err)
	}
	client := fake.NewClientset(objs...)
	svcs, err := client.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(svcs.Items); got != spec.Services {
		t.Fatalf("got %d services in the fixture, want %d", got, spec.Services)
	}
	z, err := kubezone.New(kubezone.Config{}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- z.Run(ctx, kubezone.Clients{Kube: client}) }()
	t.Cleanup(func() { cancel(); <-done })
	for i := 0; i < 200; i++ { // bounded: 10 s
		if st := z.Stats(); st.Synced && st.Endpoints == spec.Services*spec.Endpoints {
			return z
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("zone never synced: %+v", z.Stats())
	return nil
}

// TestQueriesMatchZone checks that the generated queries get the rcode
// and answer the comment on writeQueries promises.
func TestQueriesMatchZone(t *testing.T) {
	spec := clusterSpec{Namespaces: 3, Services: 40, Endpoints: 2, Headless: 4}
	z := startZone(t, spec)
	var buf bytes.Buffer
	if err := spec.writeQueries(&buf, "cluster.local.", 100); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	for k := 0; sc.Scan(); k++ {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			t.Fatalf("line %d %q: want name and type", k, sc.Text())
		}
		qtype := dns.StringToType[f[1]]
		a := z.Lookup(f[0], qtype)
		wantRcode, wantAnswer := dns.RcodeSuccess, true
		switch k % 10 {
		case 8:
			wantAnswer = false // AAAA of a v4 service: NODATA
		case 9:
			wantRcode, wantAnswer = dns.RcodeNameError, false
		}
		if a.Rcode != wantRcode || (len(a.Answer) > 0) != wantAnswer {
			t.Errorf("%s %s: got rcode %s with %d answers, want %s with answers %v",
				f[0], f[1], dns.RcodeToString[a.Rcode], len(a.Answer), dns.RcodeToString[wantRcode], wantAnswer)
		}
	}
}

func TestRunClusterWritesFiles(t *testing.T) {
	dir := t.TempDir()
	fixture, queries := filepath.Join(dir, "c.yaml"), filepath.Join(dir, "q.txt")
	var out bytes.Buffer
	err := run(context.Background(), []string{"cluster", "-services", "20", "-endpoints", "3",
		"-fixture", fixture, "-queries", queries, "-n", "50"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "namespaces=10 services=20 endpoints=60\n"; got != want {
		t.Errorf("got output %q, want %q", got, want)
	}
	b, err := os.ReadFile(queries)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b), "\n"); got != 50 {
		t.Errorf("got %d query lines, want 50", got)
	}
	b, err = os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Count(string(b), "kind: EndpointSlice"), 20; got != want {
		t.Errorf("got %d EndpointSlices, want %d", got, want)
	}
}

func TestMeasureZoneMem(t *testing.T) {
	spec := clusterSpec{Namespaces: 2, Services: 50, Endpoints: 4}
	m, err := measureZoneMem(context.Background(), spec, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if m.Services != 50 || m.Endpoints != 200 {
		t.Errorf("got %d services and %d endpoints, want 50 and 200", m.Services, m.Endpoints)
	}
	if m.Names < 50 {
		t.Errorf("got %d names, want at least one per service", m.Names)
	}
	if m.HeapBytes == 0 {
		t.Error("got 0 heap bytes for a synced zone, want the zone's size")
	}
}

// TestGrowCluster checks that the YAML of a K-service cluster followed by
// the -from K YAML of an N-service one is the N-service cluster's YAML:
// the growth adds every object the bigger cluster has, once, and no
// namespace again (kubectl create would fail on one that exists).
func TestGrowCluster(t *testing.T) {
	small := clusterSpec{Namespaces: 3, Services: 7, Endpoints: 2, Headless: 4}
	big := small
	big.Services = 25
	var grown, whole bytes.Buffer
	if err := small.writeYAML(&grown, 0); err != nil {
		t.Fatal(err)
	}
	if err := big.writeYAML(&grown, small.Services); err != nil {
		t.Fatal(err)
	}
	if err := big.writeYAML(&whole, 0); err != nil {
		t.Fatal(err)
	}
	if grown.String() != whole.String() {
		t.Errorf("got %d bytes of grown YAML differing from the %d of the whole cluster, want the same",
			grown.Len(), whole.Len())
	}
	if got := strings.Count(grown.String(), "kind: Namespace"); got != big.Namespaces {
		t.Errorf("got %d Namespaces in the grown YAML, want %d", got, big.Namespaces)
	}
}

func TestRunClusterFromRange(t *testing.T) {
	for _, from := range []string{"-1", "20"} {
		err := run(context.Background(), []string{"cluster", "-services", "20", "-from", from,
			"-fixture", filepath.Join(t.TempDir(), "c.yaml")}, io.Discard)
		if err == nil {
			t.Errorf("-services 20 -from %s: got no error, want one", from)
		}
	}
}
