package kubezone

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSliceWatchPanicRelists: a panic inside the watch (here in the
// paginated list) is recovered, counted and logged once, the zone keeps
// what it held, and the watch relists and goes on.
func TestSliceWatchPanicRelists(t *testing.T) {
	z, logs := newZone(t, Config{})
	listed := stream([][]byte{watchFrame(t, "ADDED", apiSlice(1, "10", false)), watchFrame(t, "BOOKMARK", bookmark("12", true))})
	f := newFakeSliceAPI(t, listed,
		statusResponse(http.StatusGone, metav1.StatusReasonExpired),          // the resumed watch: relist
		statusResponse(http.StatusBadRequest, metav1.StatusReasonBadRequest), // no streaming list: paginated
		stream()) // the watch after the paginated list
	w := newSliceWatch(z, Clients{Kube: f.client()}, newRelistSpread(0, nil))
	w.delay = func() time.Duration { return 10 * time.Millisecond }
	var lists atomic.Int32
	w.list = func(_ context.Context, _ metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
		if lists.Add(1) == 1 {
			if got := zoneSlices(z); len(got) != 1 {
				t.Errorf("before the panic: zone slices %v, want the one listed", got)
			}
			var m map[string]int
			m["a"]++ // a nil map write: a real runtime panic
		}
		l := &discoveryv1.EndpointSliceList{Items: []discoveryv1.EndpointSlice{*apiSlice(1, "10", false), *apiSlice(2, "13", false)}}
		l.ResourceVersion = "20"
		return l, nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "the relist after the panic", func() bool { return lists.Load() >= 2 && len(zoneSlices(z)) == 2 })
	if got := testutil.ToFloat64(z.met.watchPanics); got != 1 {
		t.Errorf("nodecache_zone_watch_panics_total: got %v, want 1", got)
	}
	out := logs.String()
	if n := strings.Count(out, "EndpointSlice watch panicked"); n != 1 || !strings.Contains(out, "assignment to entry in nil map") {
		t.Errorf("log: got %d panic lines, want 1 naming the panic:\n%s", n, out)
	}
}

// TestSliceWatchFrameLengthUint32: the largest length a header can hold is
// refused as a number, not turned into an int first (negative on 32-bit
// builds: GOARCH=386 go test -run FrameLength ./pkg/kubezone).
func TestSliceWatchFrameLengthUint32(t *testing.T) {
	z, _ := newZone(t, Config{})
	w := &sliceWatch{z: z, known: map[string]string{}}
	err := w.read(t.Context(), bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff, 0}))
	if err == nil || !strings.Contains(err.Error(), "a frame of 4294967295 bytes") {
		t.Errorf("read: got %v, want the limit error", err)
	}
	br := bufio.NewReader(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3}))
	_, _ = br.Peek(7)
	if frameBuffered(br) {
		t.Error("frameBuffered: got true for a 4 GiB frame with 3 bytes buffered")
	}
}

// FuzzWatchFrames feeds arbitrary bytes to the watch stream reader as the
// API server's body: it may refuse them, never panic or allocate past the
// frame limit. The seeds are real frames of every event type.
func FuzzWatchFrames(f *testing.F) {
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Code: http.StatusGone, Reason: metav1.StatusReasonExpired}
	seeds := [][]byte{
		watchFrame(f, "ADDED", apiSlice(1, "10", false)),
		watchFrame(f, "MODIFIED", apiSlice(2, "11", true)),
		watchFrame(f, "DELETED", apiSlice(1, "12", false)),
		watchFrame(f, "BOOKMARK", bookmark("13", true)),
		watchFrame(f, "ERROR", gone),
		binary.BigEndian.AppendUint32(nil, 3),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add(bytes.Join(seeds[:4], nil))
	z, _ := newZone(f, Config{}) // one zone for every input: what they apply piles up, as on a long watch
	f.Fuzz(func(t *testing.T, body []byte) {
		w := &sliceWatch{z: z, known: map[string]string{}, seen: map[string]bool{}}
		_ = w.read(t.Context(), bytes.NewReader(body))
		w.flush()
		if cap(w.frame) > maxWatchFrame {
			t.Fatalf("frame buffer of %d bytes, over the limit", cap(w.frame))
		}
	})
}
