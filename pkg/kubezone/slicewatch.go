package kubezone

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nodecache/nodecache/pkg/logkey"
)

// sliceWatch keeps the zone's EndpointSlices in step with the API server
// without client-go's reflector and informer. EndpointSlices are what
// changes most in a cluster, and every agent watches all of them, so one
// update's cost is paid on every node: here it is one goroutine reading
// the watch stream's length-prefixed protobuf frames, decoding each object
// straight into the zone's model (decodeSliceProto) and applying what it
// read as one batch once no further frame is buffered. The informer path
// handed each object through five goroutines and kept a second copy of
// every slice in its store; this keeps only each slice's resource version.
//
// It does what the reflector does for the zone: a streaming list
// (sendInitialEvents, falling back to a paginated LIST when the server
// refuses one), then a watch resumed from the last resource version seen
// (bookmarks included) until the server answers 410, when it relists after
// the relist spread's delay; a relist applies only the slices whose
// resource version changed and deletes those the list no longer holds.
// A resumed watch the server refuses with anything but a passing error
// (429, 5xx) relists too, as does a version too large for the server (an
// etcd restored from a backup). Failures back off exponentially with
// jitter (0.8 s to 30 s), and so do lists whose watches are refused at
// once again and again; the zone answers from what it holds meanwhile.
// Relists apply what they read as they read it (a zone serving some slices
// newer than others for the length of a list), and delete what the list
// no longer holds at its end.
type sliceWatch struct {
	z      *Zone
	rc     rest.Interface // discovery.k8s.io/v1
	list   func(ctx context.Context, o metav1.ListOptions) (*discoveryv1.EndpointSliceList, error)
	spread *relistSpread
	onErr  cache.WatchErrorHandlerWithContext

	rv            string            // resource version to resume from; "" when the next watch needs a list
	known         map[string]string // slice key → the resource version applied
	seen          map[string]bool   // during a list: the keys it held
	armed         bool              // a watch ran since the last list: the next list is a relist, spread
	expiredAtOnce int               // watches in a row answered 410 within a second
	noStream      time.Time         // the server refused a streaming list: paginated lists until then
	synced        atomic.Bool       // the first list is applied
	pending       []event           // read, not yet applied
	delay         wait.DelayFunc    // backoff after a failed list or watch
	frame         []byte            // the frame buffer, reused
	idle          time.Duration     // a watch silent this long (no event, no bookmark) is opened again
	frames        *atomic.Uint64    // the open watch's frames since its idle check last looked
}

// watchIdle is how long a watch may go without a frame before it is
// taken for dead and opened again from where it was (found within one to
// two of these: a check every watchIdle looks whether frames came since
// the last, which costs a frame nothing). The API server sends a bookmark
// to every watch about once a minute; a connection that died without a
// word (a vanished server, a dropped NAT entry) is otherwise only found by
// TCP keepalives, minutes later.
const watchIdle = 2 * time.Minute

// errWatchIdle ends a watch that went silent for watchIdle.
var errWatchIdle = errors.New("endpointslices watch: nothing received, not even a bookmark, for over " +
	watchIdle.String() + "; watching again")

// maxWatchFrame bounds one watch frame. An EndpointSlice holds at most
// 1,000 endpoints and an object at most ~1.5 MB in etcd; a frame past this
// is not an EndpointSlice event.
const maxWatchFrame = 16 << 20

// watchReadBuffer is the watch body's read buffer: a burst of events is
// read, and applied, together.
const watchReadBuffer = 64 << 10

// applyChunk bounds how many events one batch applies during a list.
const applyChunk = 512

// newSliceWatch returns the EndpointSlice watch over c.Slices, else over
// c.Kube's REST client; nil when there is none (the fake clientset of
// --fixture and the tests), which keeps the informer.
func newSliceWatch(z *Zone, c Clients, spread *relistSpread) *sliceWatch {
	rc := c.Slices
	if rc == nil {
		if kc, ok := c.Kube.DiscoveryV1().RESTClient().(*rest.RESTClient); ok && kc != nil && kc.Client != nil {
			rc = kc
		}
	}
	if rc == nil {
		return nil
	}
	return &sliceWatch{
		z: z, rc: rc, spread: spread, onErr: z.watchErrorHandler("endpointslices"),
		list:  c.Kube.DiscoveryV1().EndpointSlices(metav1.NamespaceAll).List,
		known: map[string]string{},
		delay: wait.Backoff{Duration: 800 * time.Millisecond, Cap: 30 * time.Second, Steps: math.MaxInt32,
			Factor: 2, Jitter: 1}.DelayWithReset(clock.RealClock{}, 2*time.Minute),
		idle: watchIdle,
	}
}

// HasSynced says whether the first list has been applied.
func (w *sliceWatch) HasSynced() bool { return w.synced.Load() }

// run lists and watches until ctx is done.
func (w *sliceWatch) run(ctx context.Context) {
	for ctx.Err() == nil {
		start, listing := time.Now(), w.rv == ""
		err := w.onceRecovered(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil: // the server ended the watch (its timeout): resume
			if time.Since(start) < time.Second && !sleepCtx(ctx, w.delay()) {
				return // a server that ends every watch at once is not asked again at once
			}
			continue
		case errors.Is(err, errWatchIdle):
			w.z.log.Info("EndpointSlice watch silent, opening it again", "after", w.idle, "resource_version", w.rv)
			continue
		case (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) && !listing:
			w.rv = "" // too old to resume: relist, after the spread
			if time.Since(start) >= time.Second {
				w.expiredAtOnce = 0
				continue
			}
			if w.expiredAtOnce++; w.expiredAtOnce == 1 {
				continue // as after an API server restart: the spread is enough
			}
			// A list, then a watch refused at once, again: back off too.
		}
		if w.rv != "" && relistAfter(err) {
			w.rv = "" // the server will not resume from there: relist, as client-go's reflector does
		}
		w.onErr(ctx, nil, err)
		if !sleepCtx(ctx, w.delay()) {
			return
		}
	}
}

// onceRecovered is once, with a panic in it (a decoder bug met by a frame
// no test had) turned into an error: the zone keeps answering from what it
// holds, nodecache_zone_watch_panics_total counts it, and the watch starts
// again from a list after the backoff, instead of the agent crashing.
func (w *sliceWatch) onceRecovered(ctx context.Context) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		w.z.met.watchPanics.Inc()
		w.rv, w.pending, w.seen = "", nil, nil // what was read mid-frame is not trusted: relist
		w.z.log.Error("EndpointSlice watch panicked; relisting, the zone serves what it holds meanwhile",
			"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		err = fmt.Errorf("endpointslices watch: panic: %v", v)
	}()
	return w.once(ctx)
}

// relistAfter says whether a watch that failed with err should not be
// resumed from the same resource version: the API server answered, and
// not with something that passes (too many requests, an internal error, a
// timeout, unavailable). A resource version too large for the server (an
// etcd restored from a backup, another etcd) is never resumed from.
// Failures without an answer (a refused or broken connection) resume.
func relistAfter(err error) bool {
	if apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		return true
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	return !apierrors.IsTooManyRequests(err) && !apierrors.IsInternalError(err) && !apierrors.IsServerTimeout(err) &&
		!apierrors.IsTimeout(err) && !apierrors.IsServiceUnavailable(err)
}

// once runs one list (when needed) and one watch until it ends.
func (w *sliceWatch) once(ctx context.Context) error {
	if w.rv != "" {
		return w.watch(ctx, false)
	}
	if w.armed {
		w.armed = false // a relist retried after a failure does not wait again
		if err := w.spread.wait(ctx); err != nil {
			return err
		}
	}
	if time.Now().After(w.noStream) {
		err := w.watch(ctx, true)
		if !refusesStreamingList(err) {
			return err
		}
		w.noStream = time.Now().Add(noStreamFor) // an old server, or WatchList off: list as before it
		w.z.log.Info("API server refuses streaming lists of EndpointSlices; using paginated lists", "for", noStreamFor,
			logkey.Err, err)
	}
	if err := w.listPaged(ctx); err != nil {
		return err
	}
	return w.watch(ctx, false)
}

// noStreamFor is how long paginated lists stand in for streaming lists
// after a server refused one.
const noStreamFor = 30 * time.Minute

// refusesStreamingList says whether err is the API server refusing
// sendInitialEvents (an invalid or bad request), not a failure to retry.
func refusesStreamingList(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// listPaged lists every EndpointSlice with a paginated LIST and applies it;
// the next watch resumes from the list's resource version.
func (w *sliceWatch) listPaged(ctx context.Context) error {
	w.startList()
	// The first list may be served from the API server's cache (version
	// "0", as client-go's reflector asks); a relist, after the server said
	// our version was gone, is a consistent read.
	o := metav1.ListOptions{Limit: 500, ResourceVersion: "0"}
	if w.synced.Load() {
		o.ResourceVersion = ""
	}
	rv := ""
	for {
		l, err := w.list(ctx, o)
		if o.Continue != "" && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
			// The continue token expired (a long list outlived compaction):
			// list the rest again in one piece, as client-go's pager does.
			o.Limit, o.Continue, rv = 0, "", ""
			w.startList()
			l, err = w.list(ctx, o)
		}
		if err != nil {
			w.seen = nil
			return fmt.Errorf("listing endpointslices: %w", err)
		}
		if rv == "" {
			rv = l.ResourceVersion // a paginated list is one snapshot, at its first page's version
		}
		for i := range l.Items {
			t, _ := trim(&l.Items[i]) // never fails
			s := t.(*slim)
			w.upsert(nsKey(s.namespace, s.name), s)
			if len(w.pending) >= applyChunk {
				w.flush()
			}
		}
		if o.Continue = l.Continue; o.Continue == "" {
			break
		}
	}
	w.rv = rv
	w.endList()
	return nil
}

// sleepCtx sleeps d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
