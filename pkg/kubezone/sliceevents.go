package kubezone

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
)

// handle applies one watch event frame to the watch's state and queues
// what the zone must apply.
func (w *sliceWatch) handle(frame []byte) error {
	t, raw, err := parseWatchFrame(frame)
	if err != nil {
		return fmt.Errorf("decoding an event: %w", err)
	}
	typ := watch.EventType(eventType(t))
	switch typ {
	case watch.Error:
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
		if err != nil {
			return fmt.Errorf("an ERROR event that does not decode: %w", err)
		}
		if st, ok := obj.(*metav1.Status); ok {
			return apierrors.FromObject(st)
		}
		return fmt.Errorf("an ERROR event holding a %T, not a Status", obj)
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
	default:
		return fmt.Errorf("unknown event type %q", typ)
	}
	s, err := decodeSlim(raw)
	if err != nil {
		return fmt.Errorf("decoding a %s event: %w", typ, err)
	}
	if w.seen == nil && s.resourceVersion != "" {
		w.rv = s.resourceVersion // during a streaming list, only its end says where to resume
	}
	switch typ {
	case watch.Bookmark:
		if _, end := s.model.(initialEventsEnd); end && w.seen != nil {
			w.rv = s.resourceVersion // the list's version: the stream goes on as a watch from it
			w.endList()
			w.armed = true
		}
	case watch.Deleted:
		w.remove(nsKey(s.namespace, s.name))
	default:
		w.upsert(nsKey(s.namespace, s.name), s)
	}
	return nil
}

// remove queues the deletion of a slice.
func (w *sliceWatch) remove(key string) {
	delete(w.known, key)
	w.pending = append(w.pending, event{kind: objSlice, key: key, arrived: w.z.now()})
}

// upsert queues an added or modified slice unless the zone holds it at
// this resource version already (a relist of an unchanged object).
func (w *sliceWatch) upsert(key string, s *slim) {
	listing := w.seen != nil
	if listing {
		w.seen[key] = true
	}
	if rv, ok := w.known[key]; ok && rv == s.resourceVersion {
		return
	}
	w.known[key] = s.resourceVersion
	ev := event{kind: objSlice, key: key, arrived: w.z.now()}
	if m, ok := s.model.(*sliceModel); ok {
		ev.obj = m
	}
	if !listing {
		ev.written = s.written
	}
	w.pending = append(w.pending, ev)
}

// startList starts collecting the keys a list holds.
func (w *sliceWatch) startList() {
	w.seen = make(map[string]bool, len(w.known))
}

// endList deletes what the zone holds that the list did not, applies the
// list and marks the zone's slices synced.
func (w *sliceWatch) endList() {
	for key := range w.known {
		if !w.seen[key] {
			w.remove(key) // deleting from a map while ranging over it is allowed
		}
	}
	w.seen = nil
	w.flush()
	w.synced.Store(true)
}

// flush applies the pending events as one generation.
func (w *sliceWatch) flush() {
	if len(w.pending) == 0 {
		return
	}
	w.z.apply(w.pending)
	clear(w.pending) // the models are the zone's now; the array is reused
	w.pending = w.pending[:0]
}

// decodeSlim decodes an EndpointSlice (or a bookmark of one) into a slim.
func decodeSlim(raw []byte) (*slim, error) {
	obj, _, err := sliceDecoder.Decode(raw, nil, nil)
	if err != nil {
		return nil, err
	}
	s, ok := obj.(*slim)
	if !ok {
		return nil, fmt.Errorf("a %T, not an EndpointSlice", obj)
	}
	return s, nil
}
