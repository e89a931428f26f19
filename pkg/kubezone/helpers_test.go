package kubezone

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

const fixturePath = "../../deploy/examples/fixture.yaml"

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newZone returns an unstarted zone; logs go to the returned buffer.
func newZone(tb testing.TB, cfg Config) (*Zone, *syncBuffer) {
	tb.Helper()
	logs := &syncBuffer{}
	z, err := New(cfg, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return z, logs
}

// runZone runs z on client inside the current synctest bubble and waits
// until every goroutine is idle. The zone is stopped at the end of the
// bubble's test function.
func runZone(t testing.TB, z *Zone, client kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- z.Run(ctx, Clients{Kube: client}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	settle()
}

// settle lets the bubble's fake clock run past client-go's cache-sync poll
// interval (100ms) and waits until every goroutine is idle again.
func settle() {
	synctest.Wait()
	time.Sleep(time.Second)
	synctest.Wait()
}

// fixtureClient is a fake clientset seeded with the objects of the fixture
// at path: the zone's informers read it as they read an API server.
func fixtureClient(t testing.TB, path string) *fake.Clientset {
	t.Helper()
	objs, err := LoadFixture(path)
	if err != nil {
		t.Fatalf("LoadFixture: %v", err)
	}
	return fake.NewClientset(objs...)
}

// fixtureZone runs a zone on the example fixture in a synctest bubble and
// calls f with it. It takes a *testing.T, as synctest.Test does.
func fixtureZone(t *testing.T, cfg Config, f func(t *testing.T, z *Zone)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		client := fixtureClient(t, fixturePath)
		z, _ := newZone(t, cfg)
		runZone(t, z, client)
		if !z.Synced() {
			t.Fatalf("zone not synced after the informers went idle")
		}
		f(t, z)
	})
}

// rrText renders records as "name TYPE data", one per record, sorted.
func rrText(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		r := toRecord(rr)
		out = append(out, fmt.Sprintf("%s %s %s", r.Name, r.Type, r.Data))
	}
	sort.Strings(out)
	return out
}

// checkAnswer compares an answer with the wanted rcode, answer records
// (rrText form), whether the SOA is in the authority section, and chase.
func checkAnswer(t testing.TB, label string, got Answer, rcode int, answer []string, soa bool, chase string) {
	t.Helper()
	if got.Rcode != rcode {
		t.Errorf("%s: rcode: got %s, want %s", label, dns.RcodeToString[got.Rcode], dns.RcodeToString[rcode])
	}
	if g, w := strings.Join(rrText(got.Answer), "\n"), strings.Join(sorted(answer), "\n"); g != w {
		t.Errorf("%s: answer:\ngot  %q\nwant %q", label, g, w)
	}
	hasSOA := len(got.Ns) == 1 && got.Ns[0].Header().Rrtype == dns.TypeSOA
	if hasSOA != soa || (!soa && len(got.Ns) != 0) {
		t.Errorf("%s: authority: got %v, want SOA=%v", label, rrText(got.Ns), soa)
	}
	if got.Chase != chase {
		t.Errorf("%s: chase: got %q, want %q", label, got.Chase, chase)
	}
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

func mustAddr(tb testing.TB, s string) netip.Addr {
	tb.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		tb.Fatalf("ParseAddr(%q): %v", s, err)
	}
	return a
}
