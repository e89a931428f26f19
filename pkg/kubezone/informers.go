package kubezone

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nodecache/nodecache/pkg/logkey"
)

// apiErrorLogEvery bounds the "API server unreachable" log line.
const apiErrorLogEvery = time.Minute

// Run watches the cluster through c and keeps the zone up to date until
// ctx is done; one Run at a time. It returns after every goroutine it
// started has stopped. Watches retry a dead API server on their own; the
// zone keeps answering from what it last knew (or from a snapshot).
// NewClients makes c for a real API server.
func (z *Zone) Run(ctx context.Context, c Clients) error {
	client := c.Kube
	if client == nil && c.Objects != nil {
		return z.runObjects(ctx, c.Objects)
	}
	if client == nil {
		return errors.New("running zone: nil client")
	}
	if !z.running.CompareAndSwap(false, true) {
		return errors.New("running zone: already running")
	}
	defer z.running.Store(false)
	z.syncSource = SourceAPI
	if c.Fixture {
		z.syncSource = SourceFixture
	}
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trim))
	defer func() { // signal, then wait for every goroutine started here
		cancel()
		factory.Shutdown()
		wg.Wait()
	}()
	var syncs []cache.InformerSynced
	add := func(inf cache.SharedIndexInformer, resource string, kind objKind) error {
		if err := inf.SetWatchErrorHandlerWithContext(z.watchErrorHandler(resource)); err != nil {
			return fmt.Errorf("setting watch error handler for %s: %w", resource, err)
		}
		reg, err := inf.AddEventHandler(z.handler(kind))
		if err != nil {
			return fmt.Errorf("adding %s handler: %w", resource, err)
		}
		syncs = append(syncs, reg.HasSynced)
		return nil
	}
	// Informers without the factory's namespace index: the zone never lists
	// by namespace, and the index holds every key once more (~1 MB for 10k
	// services and their slices). Each informer's relists are spread
	// (relist.go).
	spread := newRelistSpread(z.cfg.RelistSpread, z.relistSrc)
	spread.relists, spread.waited = z.met.relists, z.met.relistWait
	services := factory.InformerFor(&corev1.Service{}, func(c kubernetes.Interface, _ time.Duration) cache.SharedIndexInformer {
		return spread.informer(c, &corev1.Service{}, listWatchOf[*corev1.ServiceList](c.CoreV1().Services(metav1.NamespaceAll), nil))
	})
	namespaces := factory.InformerFor(&corev1.Namespace{}, func(c kubernetes.Interface, _ time.Duration) cache.SharedIndexInformer {
		return spread.informer(c, &corev1.Namespace{}, listWatchOf[*corev1.NamespaceList](c.CoreV1().Namespaces(), nil))
	})
	errs := []error{
		add(services, "services", objService),
		add(namespaces, "namespaces", objNamespace),
	}
	// EndpointSlices, what changes most, skip the informer on a real API
	// server (slicewatch.go); the fake clientset keeps it.
	sw := newSliceWatch(z, c, spread)
	if sw != nil {
		syncs = append(syncs, sw.HasSynced)
	} else {
		slices := factory.InformerFor(&discoveryv1.EndpointSlice{}, func(c kubernetes.Interface, _ time.Duration) cache.SharedIndexInformer {
			return spread.informer(c, &discoveryv1.EndpointSlice{}, listWatchOf[*discoveryv1.EndpointSliceList](c.DiscoveryV1().EndpointSlices(metav1.NamespaceAll), nil))
		})
		errs = append(errs, add(slices, "endpointslices", objSlice))
	}
	pods := func(tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
		return factory.InformerFor(&corev1.Pod{}, func(c kubernetes.Interface, _ time.Duration) cache.SharedIndexInformer {
			return spread.informer(c, &corev1.Pod{}, listWatchOf[*corev1.PodList](c.CoreV1().Pods(metav1.NamespaceAll), tweak))
		})
	}
	switch {
	case z.cfg.Pods == PodsVerified:
		errs = append(errs, add(pods(nil), "pods", objPod))
	case z.cfg.NodeName != "":
		sel := fields.OneTermEqualSelector("spec.nodeName", z.cfg.NodeName).String()
		errs = append(errs, add(pods(func(o *metav1.ListOptions) { o.FieldSelector = sel }), "pods", objPod))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("running zone: %w", err)
	}
	factory.Start(ctx.Done())

	wg.Go(func() { z.applyLoop(ctx) })
	if sw != nil {
		wg.Go(func() { sw.run(ctx) })
	}
	z.serveSynced(ctx, &wg, func() bool { return waitSynced(ctx, syncs) }, "the API server")
	return nil
}

// serveSynced is the end of Run for every source: it starts the snapshot
// writer on wg (it writes once the first sync is in), waits for that sync
// (first returns false when ctx ended before), marks the zone synced and
// says so (from names the source in the log line), then waits for ctx.
func (z *Zone) serveSynced(ctx context.Context, wg *sync.WaitGroup, first func() bool, from string) {
	synced := make(chan struct{})
	if z.cfg.SnapshotPath != "" {
		wg.Go(func() { z.snapshotLoop(ctx, synced) })
	}
	if !first() {
		return // ctx done before the first sync
	}
	z.finishSync()
	close(synced)
	z.log.Info("zone synced from "+from, logkey.Generation, z.Generation(), "names", z.Stats().Names)
	<-ctx.Done()
}

// The first sync is looked for every syncPollFast for syncFastFor, then
// every syncPoll. client-go's WaitForCacheSync looks every 100 ms, and a
// serving process restarted after a crash, whose queries wait in the kept
// sockets until its zone has synced, paid that in full; the list takes
// 10-30 ms then, so each millisecond of polling is one they wait.
const (
	syncPollFast = time.Millisecond
	syncPoll     = 5 * time.Millisecond
	syncFastFor  = time.Second
)

// waitSynced waits until every one of syncs has synced (true) or ctx is
// done (false).
func waitSynced(ctx context.Context, syncs []cache.InformerSynced) bool {
	t := time.NewTicker(syncPollFast)
	defer t.Stop()
	slow := time.After(syncFastFor)
	for {
		done := true
		for _, s := range syncs {
			done = done && s()
		}
		if done {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-slow:
			t.Reset(syncPoll)
		case <-t.C:
		}
	}
}

// applyLoop applies queued events as they come.
func (z *Zone) applyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-z.kick:
			z.drain()
		}
	}
}

// finishSync applies the initial lists, drops whatever a snapshot held
// that the API server no longer has, and marks the zone synced.
func (z *Zone) finishSync() {
	z.drain()
	z.mu.Lock()
	defer z.mu.Unlock()
	st, b := z.st, newBatch()
	b.all = true // from the snapshot's answers to the API server's
	for k, s := range st.services {
		if s.snap {
			z.applyEventLocked(event{kind: objService, key: k}, b)
		}
	}
	for k, s := range st.slices {
		if s.snap {
			z.applyEventLocked(event{kind: objSlice, key: k}, b)
		}
	}
	for k, snap := range st.namespaces {
		if snap {
			z.applyEventLocked(event{kind: objNamespace, key: k}, b)
		}
	}
	for k, p := range st.pods {
		if p.snap {
			z.applyEventLocked(event{kind: objPod, key: k}, b)
		}
	}
	z.publishLocked(b)
	z.synced.Store(true)
	z.met.synced.Set(1)
	z.setSource(z.syncSource)
}

// handler turns informer notifications into queued events.
func (z *Zone) handler(kind objKind) cache.ResourceEventHandler {
	push := func(obj any, deleted, initial bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj, deleted = d.Obj, true
		}
		mo, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		ev := event{kind: kind, key: nsKey(mo.GetNamespace(), mo.GetName()), arrived: z.now()}
		if kind == objNamespace {
			ev.key = mo.GetName()
		}
		if !initial && !deleted {
			ev.written = mo.GetCreationTimestamp().Time // trim stored the last write time here
		}
		if s, ok := obj.(*slim); ok && !deleted {
			ev.obj = s.model
		}
		z.enqueue(ev)
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) { push(obj, false, initial) },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(metav1.Object)
			n, ok2 := newObj.(metav1.Object)
			if ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion() {
				return // relist of an unchanged object
			}
			push(newObj, false, false)
		},
		DeleteFunc: func(obj any) { push(obj, true, false) },
	}
}

// watchErrorHandler logs a failing list/watch at most once a minute per
// resource instead of client-go's line per retry.
func (z *Zone) watchErrorHandler(resource string) cache.WatchErrorHandlerWithContext {
	var mu sync.Mutex // guards last, suppressed
	var last time.Time
	suppressed := 0
	return func(_ context.Context, _ *cache.Reflector, err error) {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || apierrors.IsResourceExpired(err) ||
			apierrors.IsGone(err) {
			return // a closed or expired watch: the reflector relists, nothing is wrong
		}
		mu.Lock()
		defer mu.Unlock()
		now := z.now()
		if !last.IsZero() && now.Sub(last) < apiErrorLogEvery {
			suppressed++
			return
		}
		z.log.Warn("API server unreachable, serving the last-known zone; retrying", "resource", resource,
			logkey.Err, err, "suppressed", suppressed, "source", z.Source())
		last, suppressed = now, 0
	}
}
