package kubezone

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// fakeSliceAPI is a loopback server that speaks the API server's
// EndpointSlice list and protobuf watch stream. Each request is answered
// by the next responder in turn; requests past the last wait until the
// client goes away.
type fakeSliceAPI struct {
	t   *testing.T
	srv *httptest.Server

	mu         sync.Mutex
	reqs       []url.Values // each request's query, in order
	protos     []int        // each request's HTTP major version
	responders []func(w http.ResponseWriter, q url.Values)
	served     chan int // the index of each request as it arrives
}

func newFakeSliceAPI(t *testing.T, responders ...func(w http.ResponseWriter, q url.Values)) *fakeSliceAPI {
	f := &fakeSliceAPI{t: t, responders: responders, served: make(chan int, 100)}
	f.srv = httptest.NewServer(f.handler())
	t.Cleanup(f.srv.Close)
	return f
}

// newFakeSliceAPITLS is newFakeSliceAPI over TLS, offering HTTP/2 as the
// API server does.
func newFakeSliceAPITLS(t *testing.T, responders ...func(w http.ResponseWriter, q url.Values)) *fakeSliceAPI {
	f := &fakeSliceAPI{t: t, responders: responders, served: make(chan int, 100)}
	f.srv = httptest.NewUnstartedServer(f.handler())
	f.srv.EnableHTTP2 = true
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSliceAPI) handler() http.Handler {
	t := f.t
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/namespaces" { // for TestNewClients
			f.mu.Lock()
			f.protos = append(f.protos, -r.ProtoMajor)
			f.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"kind":"NamespaceList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
			return
		}
		if r.URL.Path != "/apis/discovery.k8s.io/v1/endpointslices" {
			http.Error(w, "unexpected request "+r.URL.String(), http.StatusNotFound)
			return
		}
		if got := r.Header.Get("Accept"); r.URL.Query().Get("watch") == "true" && got != runtime.ContentTypeProtobuf {
			t.Errorf("watch Accept header: got %q, want %q", got, runtime.ContentTypeProtobuf)
		}
		f.mu.Lock()
		i := len(f.reqs)
		f.reqs = append(f.reqs, r.URL.Query())
		f.protos = append(f.protos, r.ProtoMajor)
		f.mu.Unlock()
		select {
		case f.served <- i:
		default: // nobody waits for requests this late
		}
		if i >= len(f.responders) {
			<-r.Context().Done()
			return
		}
		f.responders[i](w, r.URL.Query())
	})
}

// client is a clientset of the fake server, protobuf as the agent's.
func (f *fakeSliceAPI) client() kubernetes.Interface {
	c, err := kubernetes.NewForConfig(&rest.Config{Host: f.srv.URL, ContentConfig: rest.ContentConfig{
		ContentType: runtime.ContentTypeProtobuf, AcceptContentTypes: runtime.ContentTypeProtobuf}})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// query is the i-th request's query.
func (f *fakeSliceAPI) query(i int) url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[i]
}

// waitRequest waits for the i-th request (0-based) to arrive.
func (f *fakeSliceAPI) waitRequest(i int) {
	f.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case got := <-f.served:
			if got >= i {
				return
			}
		case <-timeout:
			f.t.Fatalf("request %d never came", i)
		}
	}
}

var testPB = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// watchFrame is one length-prefixed protobuf watch event of obj.
func watchFrame(t testing.TB, typ string, obj runtime.Object) []byte {
	t.Helper()
	var raw bytes.Buffer
	if err := testPB.Encode(obj, &raw); err != nil {
		t.Fatal(err)
	}
	b, err := (&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw.Bytes()}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// apiSlice is EndpointSlice svc-i of synthCluster at resource version rv,
// typed for the wire, endpoint 0 not ready when notReady.
func apiSlice(i int, rv string, notReady bool) *discoveryv1.EndpointSlice {
	es := controllerSlice(i, notReady)
	es.APIVersion, es.Kind, es.ResourceVersion = "discovery.k8s.io/v1", "EndpointSlice", rv
	return es
}

// bookmark is a bookmark at rv; end marks the end of a streaming list.
func bookmark(rv string, end bool) *discoveryv1.EndpointSlice {
	b := &discoveryv1.EndpointSlice{TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
	if end {
		b.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return b
}

// stream answers a watch with frames, flushing after each group, and ends.
func stream(groups ...[][]byte) func(w http.ResponseWriter, q url.Values) {
	return func(w http.ResponseWriter, _ url.Values) {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
		for _, g := range groups {
			for _, f := range g {
				_, _ = w.Write(f)
			}
			w.(http.Flusher).Flush()
		}
	}
}

// zoneSlices is what the zone holds: slice key → ready addresses.
func zoneSlices(z *Zone) map[string]int {
	z.mu.Lock()
	defer z.mu.Unlock()
	out := map[string]int{}
	for k, s := range z.st.slices {
		out[k] = s.Endpoints.len()
	}
	return out
}

// startSliceWatch runs a slice watch of z on f until the test ends, with
// delay as its backoff (nil: 10 ms).
func startSliceWatch(t *testing.T, z *Zone, f *fakeSliceAPI, spread *relistSpread, delay func() time.Duration) *sliceWatch {
	t.Helper()
	w := newSliceWatch(z, Clients{Kube: f.client()}, spread)
	if w == nil {
		t.Fatal("newSliceWatch: got nil for a real REST client")
	}
	w.delay = delay
	if delay == nil {
		w.delay = func() time.Duration { return 10 * time.Millisecond }
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("sliceWatch.run did not return after its context ended")
		}
	})
	return w
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSliceWatchStreamingList: a streaming list, then the same stream as
// a watch; the next watch resumes from the last bookmark without a list.
func TestSliceWatchStreamingList(t *testing.T) {
	z, _ := newZone(t, Config{})
	f := newFakeSliceAPI(t, stream(
		[][]byte{watchFrame(t, "ADDED", apiSlice(1, "10", false)), watchFrame(t, "ADDED", apiSlice(2, "11", false)),
			watchFrame(t, "BOOKMARK", bookmark("12", true))},
		[][]byte{watchFrame(t, "MODIFIED", apiSlice(1, "13", true))},
		[][]byte{watchFrame(t, "DELETED", apiSlice(2, "14", false)), watchFrame(t, "BOOKMARK", bookmark("20", false))},
	))
	w := startSliceWatch(t, z, f, newRelistSpread(0, nil), nil)
	f.waitRequest(1)
	if !w.HasSynced() {
		t.Error("HasSynced: got false after the list's closing bookmark")
	}
	if got, want := zoneSlices(z), map[string]int{"ns-1/svc-1-abcde": 9}; !maps.Equal(got, want) {
		t.Errorf("zone slices: got %v, want %v", got, want)
	}
	q := f.query(0)
	if q.Get("sendInitialEvents") != "true" || q.Get("resourceVersionMatch") != "NotOlderThan" ||
		q.Get("allowWatchBookmarks") != "true" || q.Get("watch") != "true" {
		t.Errorf("first request: got %v, want a streaming list", q)
	}
	if q := f.query(1); q.Get("resourceVersion") != "20" || q.Has("sendInitialEvents") {
		t.Errorf("second request: got %v, want a watch from the bookmark's version 20", q)
	}
}

// TestSliceWatchRelist: a 410 makes the watch relist after the spread;
// the relist deletes what it no longer holds, leaves unchanged slices
// alone and applies changed ones.
func TestSliceWatchRelist(t *testing.T) {
	z, _ := newZone(t, Config{})
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version"}
	f := newFakeSliceAPI(t,
		stream([][]byte{watchFrame(t, "ADDED", apiSlice(1, "10", false)), watchFrame(t, "ADDED", apiSlice(2, "11", false)),
			watchFrame(t, "ADDED", apiSlice(3, "12", false)), watchFrame(t, "BOOKMARK", bookmark("12", true))}),
		stream([][]byte{watchFrame(t, "ERROR", gone)}),
		stream([][]byte{watchFrame(t, "ADDED", apiSlice(1, "10", false)), watchFrame(t, "ADDED", apiSlice(3, "30", true)),
			watchFrame(t, "BOOKMARK", bookmark("31", true))}),
	)
	spread := newRelistSpread(time.Millisecond, nil)
	spread.relists, spread.waited = z.met.relists, z.met.relistWait
	startSliceWatch(t, z, f, spread, nil)
	f.waitRequest(3)
	if got, want := zoneSlices(z), map[string]int{"ns-1/svc-1-abcde": 10, "ns-3/svc-3-abcde": 9}; !maps.Equal(got, want) {
		t.Errorf("zone slices after the relist: got %v, want %v", got, want)
	}
	if q := f.query(1); q.Get("resourceVersion") != "12" {
		t.Errorf("watch after the list: got %v, want resourceVersion 12", q)
	}
	if q := f.query(2); q.Get("sendInitialEvents") != "true" || q.Get("resourceVersion") != "" {
		t.Errorf("after the 410: got %v, want a streaming list from the latest version", q)
	}
	if q := f.query(3); q.Get("resourceVersion") != "31" {
		t.Errorf("after the relist: got %v, want a watch from 31", q)
	}
	if got := testutil.ToFloat64(z.met.relists); got != 1 {
		t.Errorf("nodecache_zone_relists_total: got %v, want 1", got)
	}
}

// TestSliceWatchPagedListFallback: a server that refuses streaming lists
// gets a paginated LIST, then a watch from the list's version.
func TestSliceWatchPagedListFallback(t *testing.T) {
	z, logs := newZone(t, Config{})
	invalid := func(w http.ResponseWriter, _ url.Values) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422,`+
			`"message":"ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"}`)
	}
	f := newFakeSliceAPI(t, invalid,
		listResponse(t, []discoveryv1.EndpointSlice{*apiSlice(1, "5", false)}, "40", "page-2"),
		listResponse(t, []discoveryv1.EndpointSlice{*apiSlice(2, "6", true)}, "41", ""),
		stream([][]byte{watchFrame(t, "MODIFIED", apiSlice(1, "42", true))}),
	)
	w := startSliceWatch(t, z, f, newRelistSpread(0, nil), nil)
	f.waitRequest(4)
	if !w.HasSynced() {
		t.Error("HasSynced: got false after the paged list")
	}
	if q := f.query(1); q.Get("limit") != "500" || q.Has("watch") {
		t.Errorf("after the refusal: got %v, want a paginated LIST", q)
	}
	if q := f.query(2); q.Get("continue") != "page-2" {
		t.Errorf("second page: got %v, want continue=page-2", q)
	}
	if q := f.query(3); q.Get("resourceVersion") != "40" || q.Get("watch") != "true" || q.Has("sendInitialEvents") {
		t.Errorf("after the list: got %v, want a watch from the first page's version 40", q)
	}
	if q := f.query(4); q.Get("resourceVersion") != "42" || q.Has("sendInitialEvents") {
		t.Errorf("after the watch: got %v, want a watch from 42, no streaming list again", q)
	}
	if got, want := zoneSlices(z), map[string]int{"ns-1/svc-1-abcde": 9, "ns-2/svc-2-abcde": 9}; !maps.Equal(got, want) {
		t.Errorf("zone slices: got %v, want %v", got, want)
	}
	if !strings.Contains(logs.String(), "refuses streaming lists") {
		t.Errorf("logs: got %q, want the streaming-list fallback said once", logs)
	}
}

// TestSliceWatchBadStreams: a garbage frame, an oversized frame and a
// stream cut mid-list each end that watch with one logged error; the zone
// keeps what it had, a cut list is listed again, and the watch resumes.
func TestSliceWatchBadStreams(t *testing.T) {
	z, logs := newZone(t, Config{})
	cut := watchFrame(t, "ADDED", apiSlice(2, "11", false))
	f := newFakeSliceAPI(t,
		stream([][]byte{watchFrame(t, "ADDED", apiSlice(1, "10", false)), cut[:len(cut)/2]}),
		stream([][]byte{watchFrame(t, "ADDED", apiSlice(1, "10", false)), watchFrame(t, "BOOKMARK", bookmark("12", true))}),
		stream([][]byte{{0, 0, 0, 3, 0xff, 0xff, 0xff}}),
		stream([][]byte{binary.BigEndian.AppendUint32(nil, maxWatchFrame+1)}),
		stream([][]byte{watchFrame(t, "ADDED", apiSlice(5, "13", false))}),
	)
	startSliceWatch(t, z, f, newRelistSpread(0, nil), nil)
	f.waitRequest(5)
	if q := f.query(1); q.Get("sendInitialEvents") != "true" {
		t.Errorf("after a cut list: got %v, want the list again", q)
	}
	for i := 2; i <= 4; i++ {
		if q := f.query(i); q.Get("resourceVersion") != "12" {
			t.Errorf("request %d: got %v, want a watch resumed from 12", i, q)
		}
	}
	if q := f.query(5); q.Get("resourceVersion") != "13" {
		t.Errorf("request 5: got %v, want a watch from 13", q)
	}
	if got, want := zoneSlices(z), map[string]int{"ns-1/svc-1-abcde": 10, "ns-5/svc-5-abcde": 10}; !maps.Equal(got, want) {
		t.Errorf("zone slices: got %v, want %v", got, want)
	}
	if want := "endpointslices watch: decoding an event"; !strings.Contains(logs.String(), want) {
		t.Errorf("logs: got %q, want a line with %q", logs, want)
	}
}

// TestSliceWatchCoalesces: events that arrive together are applied as one
// generation.
func TestSliceWatchCoalesces(t *testing.T) {
	z, _ := newZone(t, Config{})
	var burst [][]byte
	for i := range 50 {
		burst = append(burst, watchFrame(t, "MODIFIED", apiSlice(i, fmt.Sprint(100+i), true)))
	}
	f := newFakeSliceAPI(t,
		stream([][]byte{watchFrame(t, "BOOKMARK", bookmark("12", true))}),
		stream(burst),
	)
	startSliceWatch(t, z, f, newRelistSpread(0, nil), nil)
	f.waitRequest(2)
	if got := len(zoneSlices(z)); got != 50 {
		t.Fatalf("zone slices: got %d, want 50", got)
	}
	// The list's bookmark published nothing; the burst, one generation
	// (fewer than 50 in any case: the server wrote it at once, the client
	// may read it in a few pieces).
	if g := z.Generation(); g >= 50 {
		t.Errorf("generations for a burst of 50: got %d, want far fewer than 50", g)
	}
}

// TestNewClients: against a server that offers HTTP/2, the EndpointSlice
// watch runs over HTTP/1.1 and the clientset's requests over HTTP/2.
func TestNewClients(t *testing.T) {
	z, _ := newZone(t, Config{})
	f := newFakeSliceAPITLS(t, stream([][]byte{watchFrame(t, "ADDED", apiSlice(1, "10", false)),
		watchFrame(t, "BOOKMARK", bookmark("12", true))}))
	c, err := NewClients(&rest.Config{Host: f.srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	w := newSliceWatch(z, c, newRelistSpread(0, nil))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	f.waitRequest(1)
	if _, err := c.Kube.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := zoneSlices(z); len(got) != 1 {
		t.Errorf("zone slices: got %v, want the one listed", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Watches are HTTP/1.1 (1); the clientset's list is HTTP/2 (stored as -2).
	if want := []int{1, 1, -2}; !slices.Equal(f.protos, want) {
		t.Errorf("HTTP versions of the requests: got %v, want %v", f.protos, want)
	}
}

// TestSliceWatchIdle: a watch that receives nothing for the idle limit is
// opened again from where it was, with one logged line.
func TestSliceWatchIdle(t *testing.T) {
	z, logs := newZone(t, Config{})
	silent := func(w http.ResponseWriter, _ url.Values) {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
		_, _ = w.Write(watchFrame(t, "BOOKMARK", bookmark("12", true)))
		w.(http.Flusher).Flush()
		time.Sleep(time.Second) // silent until the watch gives up on it (or the test ends)
	}
	f := newFakeSliceAPI(t, silent)
	w := newSliceWatch(z, Clients{Kube: f.client()}, newRelistSpread(0, nil))
	w.idle, w.delay = 100*time.Millisecond, func() time.Duration { return time.Millisecond }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	f.waitRequest(1)
	if q := f.query(1); q.Get("resourceVersion") != "12" {
		t.Errorf("after the silence: got %v, want a watch from 12", q)
	}
	waitFor(t, "the idle line in the log", func() bool { return strings.Contains(logs.String(), "EndpointSlice watch silent") })
	if strings.Contains(logs.String(), "unreachable") {
		t.Errorf("logs: got %q, want a silent watch not reported as an unreachable API server", logs)
	}
}

// runCountingBackoff runs a slice watch of z on f until the test ends, its
// backoff a millisecond; waits says how often it backed off so far.
func runCountingBackoff(t *testing.T, z *Zone, f *fakeSliceAPI) (waits func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	startSliceWatch(t, z, f, newRelistSpread(0, nil), func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		n++
		return time.Millisecond
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// TestSliceWatchQuickCloseBacksOff: a server that ends every watch at once
// is asked again only after the backoff.
func TestSliceWatchQuickCloseBacksOff(t *testing.T) {
	z, _ := newZone(t, Config{})
	f := newFakeSliceAPI(t, stream([][]byte{watchFrame(t, "BOOKMARK", bookmark("12", true))}), stream(), stream(), stream())
	waits := runCountingBackoff(t, z, f)
	f.waitRequest(4)
	if waits := waits(); waits < 4 {
		t.Errorf("backoff waits before 4 requests after watches that ended at once: got %d, want 4", waits)
	}
}

// listResponse answers a LIST with items at rv, continued by cont.
func listResponse(t *testing.T, items []discoveryv1.EndpointSlice, rv, cont string) func(w http.ResponseWriter, q url.Values) {
	return func(w http.ResponseWriter, _ url.Values) {
		l := &discoveryv1.EndpointSliceList{TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSliceList"},
			ListMeta: metav1.ListMeta{ResourceVersion: rv, Continue: cont}, Items: items}
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		if err := testPB.Encode(l, w); err != nil {
			t.Error(err)
		}
	}
}

// statusResponse answers a request with an API Status of code and reason.
func statusResponse(code int, reason metav1.StatusReason) func(w http.ResponseWriter, q url.Values) {
	return func(w http.ResponseWriter, _ url.Values) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d,"message":"test"}`, reason, code)
	}
}

// TestSliceWatchResumeErrors: a resumed watch the API server refuses with
// a client error is not resumed again from the same version but relisted;
// one that fails with a server error (it passes) is resumed.
func TestSliceWatchResumeErrors(t *testing.T) {
	z, _ := newZone(t, Config{})
	listed := stream([][]byte{watchFrame(t, "ADDED", apiSlice(1, "10", false)), watchFrame(t, "BOOKMARK", bookmark("12", true))})
	f := newFakeSliceAPI(t, listed,
		statusResponse(http.StatusInternalServerError, metav1.StatusReasonInternalError),
		statusResponse(http.StatusBadRequest, metav1.StatusReasonBadRequest),
		listed)
	startSliceWatch(t, z, f, newRelistSpread(0, nil), nil)
	f.waitRequest(4)
	if q := f.query(2); q.Get("resourceVersion") != "12" || q.Has("sendInitialEvents") {
		t.Errorf("after a 500: got %v, want the watch resumed from 12", q)
	}
	if q := f.query(3); q.Get("sendInitialEvents") != "true" {
		t.Errorf("after a 400: got %v, want a list", q)
	}
	if q := f.query(4); q.Get("resourceVersion") != "12" {
		t.Errorf("after the relist: got %v, want a watch from 12", q)
	}
}

// TestSliceWatchExpiredAtOnceBacksOff: a server whose watches are refused
// with 410 right after every list gets the backoff, not a relist loop.
func TestSliceWatchExpiredAtOnceBacksOff(t *testing.T) {
	z, _ := newZone(t, Config{})
	listed := stream([][]byte{watchFrame(t, "BOOKMARK", bookmark("12", true))})
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Code: http.StatusGone, Reason: metav1.StatusReasonExpired}
	expired := stream([][]byte{watchFrame(t, "ERROR", gone)})
	f := newFakeSliceAPI(t, listed, expired, listed, expired, listed, expired, listed)
	waits := runCountingBackoff(t, z, f)
	f.waitRequest(6)
	// The lists that end at once back off too (TestSliceWatchQuickCloseBacksOff);
	// every 410 after the first in a row adds one more.
	if waits := waits(); waits < 5 {
		t.Errorf("backoff waits over 3 lists and 3 watches refused at once: got %d, want at least 5", waits)
	}
}

// TestSliceWatchJSONStream: a watch answered in JSON says so.
func TestSliceWatchJSONStream(t *testing.T) {
	z, _ := newZone(t, Config{})
	w := &sliceWatch{z: z, known: map[string]string{}}
	err := w.read(t.Context(), strings.NewReader(`{"type":"ADDED","object":{"kind":"EndpointSlice"}}`+"\n"))
	if err == nil || !strings.Contains(err.Error(), "JSON, not protobuf") {
		t.Errorf("read: got %v, want the JSON stream named", err)
	}
}

// TestSliceWatchPagedListExpiredContinue: a continue token that expired
// mid-list is followed by one list of everything, not a loop of pages.
func TestSliceWatchPagedListExpiredContinue(t *testing.T) {
	z, _ := newZone(t, Config{})
	f := newFakeSliceAPI(t, statusResponse(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid),
		listResponse(t, []discoveryv1.EndpointSlice{*apiSlice(1, "5", false)}, "40", "page-2"),
		statusResponse(http.StatusGone, metav1.StatusReasonExpired),
		listResponse(t, []discoveryv1.EndpointSlice{*apiSlice(1, "5", false), *apiSlice(2, "6", false)}, "50", ""))
	w := startSliceWatch(t, z, f, newRelistSpread(0, nil), nil)
	f.waitRequest(4)
	if q := f.query(1); q.Get("resourceVersion") != "0" || q.Get("limit") != "500" {
		t.Errorf("first list: got %v, want limit 500 from the cache (resourceVersion 0)", q)
	}
	if q := f.query(3); q.Has("limit") || q.Has("continue") {
		t.Errorf("after the expired continue: got %v, want one list without limit", q)
	}
	if q := f.query(4); q.Get("resourceVersion") != "50" || q.Get("watch") != "true" {
		t.Errorf("after the list: got %v, want a watch from 50", q)
	}
	if !w.HasSynced() || len(zoneSlices(z)) != 2 {
		t.Errorf("synced %v, zone slices %v: want synced with both", w.HasSynced(), zoneSlices(z))
	}
}

// TestSliceWatchFrameLimit: a frame length past the limit ends the read
// with an error that says so, before anything is allocated for it.
func TestSliceWatchFrameLimit(t *testing.T) {
	z, _ := newZone(t, Config{})
	w := &sliceWatch{z: z, known: map[string]string{}}
	err := w.read(t.Context(), bytes.NewReader(binary.BigEndian.AppendUint32(nil, maxWatchFrame+1)))
	if err == nil || !strings.Contains(err.Error(), "a frame of 16777217 bytes, over the 16777216 limit") || cap(w.frame) != 0 {
		t.Errorf("read: got %v (frame buffer %d bytes), want the limit error and no buffer", err, cap(w.frame))
	}
}
