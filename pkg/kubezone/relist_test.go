package kubezone

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// recordingLW records each request the reflector would send: its kind
// ("list", "watch", "watch-list") and the bubble's time.
type recordingLW struct {
	mu    sync.Mutex // guards calls
	calls []lwCall
}

type lwCall struct {
	kind string
	at   time.Time
}

func (r *recordingLW) record(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, lwCall{kind, time.Now()})
}

func (r *recordingLW) List(metav1.ListOptions) (runtime.Object, error) {
	r.record("list")
	return &corev1.ServiceList{}, nil
}

func (r *recordingLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		r.record("watch-list")
	} else {
		r.record("watch")
	}
	return watch.NewFake(), nil
}

// TestRelistSpreadWaits: an informer's first list goes out at once, a plain
// watch never waits, and a list after a watch waits the seeded delay once
// (a retried list does not wait again).
func TestRelistSpreadWaits(t *testing.T) {
	const window = 10 * time.Second
	want := rand.New(rand.NewPCG(1, 2))
	d1, d2 := time.Duration(want.Int64N(int64(window))), time.Duration(want.Int64N(int64(window)))
	synctest.Test(t, func(t *testing.T) {
		rec := &recordingLW{}
		lw := newRelistSpread(window, rand.NewPCG(1, 2)).wrap(rec)
		start := time.Now()
		steps := []struct {
			kind  string
			after time.Duration // since start, when the request reaches the server
		}{
			{"list", 0},             // first sync
			{"watch", 0},            // arms
			{"list", d1},            // a relist: waits d1
			{"list", d1},            // its retry: at once
			{"watch", d1},           // arms again
			{"watch", d1},           // a resumed watch: at once
			{"watch-list", d1 + d2}, // a streaming relist: waits d2
		}
		for _, s := range steps {
			var err error
			switch s.kind {
			case "list":
				_, err = lw.ListWithContext(t.Context(), metav1.ListOptions{})
			case "watch":
				_, err = lw.WatchWithContext(t.Context(), metav1.ListOptions{})
			case "watch-list":
				_, err = lw.WatchWithContext(t.Context(), metav1.ListOptions{SendInitialEvents: ptrTo(true)})
			}
			if err != nil {
				t.Fatalf("%s: %v", s.kind, err)
			}
		}
		if len(rec.calls) != len(steps) {
			t.Fatalf("got %d requests, want %d", len(rec.calls), len(steps))
		}
		for i, s := range steps {
			if c := rec.calls[i]; c.kind != s.kind || c.at.Sub(start) != s.after {
				t.Errorf("request %d: got %s after %v, want %s after %v", i, c.kind, c.at.Sub(start), s.kind, s.after)
			}
		}
	})
}

// TestRelistSpreadDisabled: with a window of zero or less no request waits.
func TestRelistSpreadDisabled(t *testing.T) {
	for _, window := range []time.Duration{0, -time.Second} {
		synctest.Test(t, func(t *testing.T) {
			rec := &recordingLW{}
			lw := newRelistSpread(window, rand.NewPCG(1, 2)).wrap(rec)
			start := time.Now()
			for range 3 {
				if _, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{}); err != nil {
					t.Fatal(err)
				}
				if _, err := lw.ListWithContext(t.Context(), metav1.ListOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if got := time.Since(start); got != 0 {
				t.Errorf("window %v: requests took %v, want 0", window, got)
			}
		})
	}
}

// TestRelistSpreadCancel: a relist waiting its delay returns the context's
// error when the context ends, without reaching the server.
func TestRelistSpreadCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recordingLW{}
		lw := newRelistSpread(time.Hour, rand.NewPCG(1, 2)).wrap(rec)
		if _, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := lw.ListWithContext(ctx, metav1.ListOptions{})
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled relist: got %v, want context.Canceled", err)
		}
		if len(rec.calls) != 1 {
			t.Errorf("got %d requests, want only the watch", len(rec.calls))
		}
	})
}

// TestRelistSpreadAcrossAgents: the first relist delays of 1,000 agents
// with their own seeds fall in every tenth of the window; and two spreads
// seeded at random do not draw the same delays.
func TestRelistSpreadAcrossAgents(t *testing.T) {
	const window, agents, buckets = 10 * time.Second, 1000, 10
	count := make([]int, buckets)
	for i := range uint64(agents) {
		d := newRelistSpread(window, rand.NewPCG(i, i^0x9e3779b97f4a7c15)).delay()
		if d < 0 || d >= window {
			t.Fatalf("agent %d: delay %v outside [0, %v)", i, d, window)
		}
		count[d*buckets/window]++
	}
	for b, n := range count {
		if n == 0 {
			t.Errorf("no agent relists in tenth %d of the window: %v", b, count)
		}
	}
	a, b := newRelistSpread(window, nil), newRelistSpread(window, nil)
	da := []time.Duration{a.delay(), a.delay(), a.delay(), a.delay()}
	db := []time.Duration{b.delay(), b.delay(), b.delay(), b.delay()}
	if slices.Equal(da, db) {
		t.Errorf("two randomly seeded spreads drew the same delays %v", da)
	}
}

// TestRelistSpreadWatchListSupport: the wrapper tells client-go's reflector
// what the client says about streaming lists.
func TestRelistSpreadWatchListSupport(t *testing.T) {
	s := newRelistSpread(time.Second, nil)
	for _, c := range []struct {
		client kubernetes.Interface
		want   bool
	}{{fake.NewClientset(), true}, {&kubernetes.Clientset{}, false}} {
		lw := s.wrap(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{}, c.client))
		if got := lw.IsWatchListSemanticsUnSupported(); got != c.want {
			t.Errorf("%T: unsupported got %v, want %v", c.client, got, c.want)
		}
	}
}

// TestZoneAnswersDuringRelistSpread: the Services watch ends with "too old
// resource version" (as after an API server restart) while a service was
// replaced; until the spread relist the zone answers what it held, then it
// answers the relisted state.
func TestZoneAnswersDuringRelistSpread(t *testing.T) {
	const window = 10 * time.Second
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(namespace("ns"), service("ns", "old", []string{"10.96.0.1"}))
		watches := make(chan *watch.FakeWatcher, 4)
		client.PrependWatchReactor("services", func(k8stesting.Action) (bool, watch.Interface, error) {
			w := watch.NewFakeWithChanSize(1, false)
			watches <- w
			return true, w, nil
		})
		z, _ := newZone(t, Config{RelistSpread: window})
		z.relistSrc = rand.NewPCG(1, 2)
		d := time.Duration(rand.New(rand.NewPCG(1, 2)).Int64N(int64(window)))
		if d < 2*time.Second {
			t.Fatalf("seeded delay %v: want one beyond client-go's first backoff (below 1.6s)", d)
		}
		runZone(t, z, client)
		w := <-watches
		checkAnswer(t, "synced", z.Lookup("old.ns.svc.cluster.local.", dns.TypeA), ok,
			[]string{"old.ns.svc.cluster.local. A 10.96.0.1"}, false, "")

		svcs := corev1.SchemeGroupVersion.WithResource("services")
		if err := client.Tracker().Delete(svcs, "ns", "old"); err != nil {
			t.Fatal(err)
		}
		if err := client.Tracker().Add(service("ns", "new", []string{"10.96.0.2"})); err != nil {
			t.Fatal(err)
		}
		w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired,
			Message: "too old resource version"})
		time.Sleep(2 * time.Second) // past client-go's backoff, before the spread delay ends
		synctest.Wait()
		checkAnswer(t, "waiting to relist", z.Lookup("old.ns.svc.cluster.local.", dns.TypeA), ok,
			[]string{"old.ns.svc.cluster.local. A 10.96.0.1"}, false, "")
		checkAnswer(t, "waiting to relist", z.Lookup("new.ns.svc.cluster.local.", dns.TypeA), nx, nil, true, "")

		time.Sleep(window)
		settle()
		checkAnswer(t, "relisted", z.Lookup("old.ns.svc.cluster.local.", dns.TypeA), nx, nil, true, "")
		checkAnswer(t, "relisted", z.Lookup("new.ns.svc.cluster.local.", dns.TypeA), ok,
			[]string{"new.ns.svc.cluster.local. A 10.96.0.2"}, false, "")
	})
}

// TestRelistSpreadMetrics: relists are counted, first syncs and retries are
// not, and the wait counter adds up the delays drawn.
func TestRelistSpreadMetrics(t *testing.T) {
	const window = 10 * time.Second
	want := rand.New(rand.NewPCG(3, 4))
	d1, d2 := time.Duration(want.Int64N(int64(window))), time.Duration(want.Int64N(int64(window)))
	synctest.Test(t, func(t *testing.T) {
		s := newRelistSpread(window, rand.NewPCG(3, 4))
		m, err := newMetrics(nil)
		if err != nil {
			t.Fatal(err)
		}
		s.relists, s.waited = m.relists, m.relistWait
		lw := s.wrap(&recordingLW{})
		ctx := t.Context()
		list := func() { _, _ = lw.ListWithContext(ctx, metav1.ListOptions{}) }
		watchOnce := func() { _, _ = lw.WatchWithContext(ctx, metav1.ListOptions{}) }
		list()      // first sync: not a relist
		watchOnce() // arms
		list()      // relist: waits d1
		list()      // its retry: not counted
		watchOnce()
		_, _ = lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: ptrTo(true)}) // streaming relist: waits d2
		if got := testutil.ToFloat64(m.relists); got != 2 {
			t.Errorf("nodecache_zone_relists_total: got %v, want 2", got)
		}
		if got, want := testutil.ToFloat64(m.relistWait), (d1 + d2).Seconds(); math.Abs(got-want) > 1e-9 {
			t.Errorf("nodecache_zone_relist_wait_seconds_total: got %v, want %v", got, want)
		}
	})
}
