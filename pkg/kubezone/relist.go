package kubezone

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/prometheus/client_golang/prometheus"
)

// relistSpread spreads one agent's relists over a window so that agents
// that lose the API server together do not relist together.
//
// Why it is needed: when kube-apiserver restarts, its new watch cache starts
// at the current resource version, so every informer's resumed watch is
// answered "too old resource version" (410) and relists, all within the few
// seconds client-go's backoff spreads them over, just as the new server
// starts (docs/scale.md, Reconnects). Every relist but an informer's first waits
// a uniform random delay in [0, window) first, drawn from the agent's own
// random source; a relist that fails and is retried by client-go does not
// wait again, so one relist is delayed by less than window. The zone keeps
// answering from what it holds meanwhile.
type relistSpread struct {
	window time.Duration // <= 0: relists go out at once

	mu  sync.Mutex // guards rnd
	rnd *rand.Rand

	// relists counts lists after a watch (relists); waited adds up the
	// seconds they waited. Nil in tests that do not look at them.
	relists, waited prometheus.Counter
}

// newRelistSpread returns a spread over window drawing from src; a nil src
// is seeded at random, so that no two agents draw the same delays.
func newRelistSpread(window time.Duration, src rand.Source) *relistSpread {
	if src == nil {
		src = rand.NewPCG(rand.Uint64(), rand.Uint64())
	}
	return &relistSpread{window: window, rnd: rand.New(src)}
}

// delay draws the next relist delay.
func (s *relistSpread) delay() time.Duration {
	if s.window <= 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.rnd.Int64N(int64(s.window)))
}

// wrap returns lw with its relists spread.
func (s *relistSpread) wrap(lw cache.ListerWatcher) *spreadLW {
	return &spreadLW{inner: cache.ToListerWatcherWithContext(lw), unsupported: watchlist.DoesClientNotSupportWatchListSemantics(lw),
		spread: s}
}

// informer returns an informer of obj listing and watching through lw with
// its relists spread; client says whether streaming lists (WatchList) are
// supported, as for client-go's own informers.
func (s *relistSpread) informer(client kubernetes.Interface, obj runtime.Object, lw *cache.ListWatch) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformerWithOptions(s.wrap(cache.ToListWatcherWithWatchListSemantics(lw, client)), obj,
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{}})
}

// listWatchOf is a ListWatch over a typed client (such as
// client.CoreV1().Services("")), with tweak (may be nil) applied to every
// request's options.
func listWatchOf[L runtime.Object](c interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}, tweak func(*metav1.ListOptions)) *cache.ListWatch {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return c.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return c.Watch(ctx, o)
		},
	}
}

// spreadLW is one informer's ListerWatcher with its relists spread. A list
// is a LIST or a streaming list (a watch with sendInitialEvents). A watch
// that is not a list arms the next list to wait; that list disarms it.
// Before an informer's first watch no list waits, so the first sync and a
// retried relist go out at once.
type spreadLW struct {
	inner       cache.ListerWatcherWithContext
	unsupported bool // the client cannot serve streaming lists
	spread      *relistSpread

	mu    sync.Mutex // guards armed
	armed bool       // a watch was asked for since the last list
}

var (
	_ cache.ListerWatcherWithContext = (*spreadLW)(nil)
	_ cache.ListerWatcher            = (*spreadLW)(nil)
)

// IsWatchListSemanticsUnSupported tells client-go's reflector whether
// the wrapped client serves streaming lists (the fake clientset does not).
func (l *spreadLW) IsWatchListSemanticsUnSupported() bool { return l.unsupported }

func (l *spreadLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if err := l.beforeList(ctx); err != nil {
		return nil, err
	}
	return l.inner.ListWithContext(ctx, opts)
}

func (l *spreadLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		if err := l.beforeList(ctx); err != nil {
			return nil, err
		}
	} else {
		l.mu.Lock()
		l.armed = true
		l.mu.Unlock()
	}
	return l.inner.WatchWithContext(ctx, opts)
}

// List and Watch serve callers without a context.
func (l *spreadLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *spreadLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

// beforeList waits the spread delay if a watch was asked for since the
// last list; it returns ctx's error if ctx ends first.
func (l *spreadLW) beforeList(ctx context.Context) error {
	l.mu.Lock()
	armed := l.armed
	l.armed = false
	l.mu.Unlock()
	if !armed {
		return nil
	}
	return l.spread.wait(ctx)
}

// wait counts a relist and waits its delay; it returns ctx's error if ctx
// ends first.
func (s *relistSpread) wait(ctx context.Context) error {
	if s.relists != nil {
		s.relists.Inc()
	}
	d := s.delay()
	if d <= 0 {
		return nil
	}
	if s.waited != nil {
		s.waited.Add(d.Seconds()) // counted when the wait starts: a relist waiting now shows at once
	}
	if !sleepCtx(ctx, d) {
		return ctx.Err()
	}
	return nil
}
