package kubezone

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// sliceSeeds are EndpointSlices that cover what decodeSliceProto reads:
// the controller's full form, not-ready endpoints, host names, IPv6,
// ports without a number or protocol, FQDN slices, a slice of no
// service, and a streaming list's closing bookmark.
func sliceSeeds() []*discoveryv1.EndpointSlice {
	full := controllerSlice(7, true)
	later := metav1.NewTime(time.Unix(1_700_000_100, 0))
	full.ManagedFields = append(full.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubectl", Time: &later})
	headless := slice("Demo", "Web-1", "Web", []discoveryv1.EndpointPort{slicePort("HTTP", 80), {Port: ptrTo[int32](53)}, {Name: ptrTo("all")}},
		ep{addrs: []string{"10.0.0.1", "10.0.0.2"}, hostname: "Pod-A"}, ep{addrs: []string{"fd00::1"}, hostname: "pod-b", ready: ptrTo(true)},
		ep{addrs: []string{"10.0.0.3"}, ready: ptrTo(false)}, ep{addrs: []string{"not-an-ip"}})
	udp := slice("demo", "dns-1", "dns", []discoveryv1.EndpointPort{{Name: ptrTo("dns"), Port: ptrTo[int32](53), Protocol: ptrTo(corev1.ProtocolUDP)}},
		ep{addrs: []string{"10.0.0.9"}})
	fqdn := slice("demo", "ext-1", "ext", nil, ep{addrs: []string{"example.com"}})
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	orphan := slice("demo", "orphan", "", nil, ep{addrs: []string{"10.0.0.4"}})
	delete(orphan.Labels, discoveryv1.LabelServiceName)
	bookmark := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "42",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	return []*discoveryv1.EndpointSlice{full, headless, udp, fqdn, orphan, bookmark, {}}
}

// checkSlimDecode fails t unless decodeSliceProto(b) is the slim trim
// makes of the generated decoder's EndpointSlice, wherever the generated
// decoder accepts b.
func checkSlimDecode(t *testing.T, b []byte) {
	t.Helper()
	var es discoveryv1.EndpointSlice
	wantErr := es.Unmarshal(b)
	got, err := decodeSliceProto(b)
	if wantErr != nil {
		return // a message the API server never sends; ours may be lenient, never panics
	}
	if err != nil {
		t.Fatalf("decodeSliceProto: got error %v, want the slim of %+v", err, &es)
	}
	compareSlim(t, got, &es)
}

// compareSlim fails t unless got is the slim trim makes of es.
func compareSlim(t *testing.T, got *slim, es *discoveryv1.EndpointSlice) {
	t.Helper()
	w, _ := trim(es)
	want := w.(*slim)
	if got.name != want.name || got.namespace != want.namespace || got.resourceVersion != want.resourceVersion ||
		got.uid != want.uid || !got.written.Equal(want.written) {
		t.Fatalf("metadata: got %q %q %q %q %v, want %q %q %q %q %v", got.namespace, got.name, got.resourceVersion,
			got.uid, got.written, want.namespace, want.name, want.resourceVersion, want.uid, want.written)
	}
	gotModel := got.model
	if _, ok := gotModel.(initialEventsEnd); ok {
		gotModel = nil
	}
	wantModel, _ := want.model.(*sliceModel)
	if g, _ := gotModel.(*sliceModel); !reflect.DeepEqual(g, wantModel) {
		t.Fatalf("model: got %+v, want %+v", gotModel, want.model)
	}
	if end := es.Annotations[metav1.InitialEventsAnnotationKey] == "true" && want.model == nil; end !=
		(got.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true") {
		t.Fatalf("initial-events-end annotation: got %v, want %v", got.GetAnnotations(), end)
	}
}

func TestDecodeSliceProto(t *testing.T) {
	for i, es := range sliceSeeds() {
		b, err := es.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: %d bytes", i, len(b))
		checkSlimDecode(t, b)
	}
	// Two messages in a row are one message, merged: repeated fields
	// append, the last scalar wins, maps keep the last value of a key.
	seeds := sliceSeeds()
	a, _ := seeds[1].Marshal()
	b, _ := seeds[0].Marshal()
	checkSlimDecode(t, append(a, b...))
	checkSlimDecode(t, append(b, a...))
	// Fields the schema does not have, of every wire type, are skipped and
	// the fields after them read.
	for _, unknown := range [][]byte{
		{0x30, 0x80, 0x01},             // field 6, varint
		{0x31, 1, 2, 3, 4, 5, 6, 7, 8}, // field 6, fixed64
		{0x32, 2, 'h', 'i'},            // field 6, length-delimited
		{0x33, 0x08, 0x01, 0x34},       // field 6, a group holding a varint
		{0x35, 1, 2, 3, 4},             // field 6, fixed32
	} {
		checkSlimDecode(t, append(bytes.Clone(unknown), b...))
	}
}

// FuzzDecodeSliceProto: wherever the generated decoder accepts the input,
// decodeSliceProto gives the slim trim makes of its EndpointSlice, and so
// it does on that EndpointSlice marshalled again.
func FuzzDecodeSliceProto(f *testing.F) {
	var prev []byte
	for _, es := range sliceSeeds() {
		b, err := es.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(append(bytes.Clone(prev), b...))
		prev = b
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkSlimDecode(t, b)
		var es discoveryv1.EndpointSlice
		if es.Unmarshal(b) != nil {
			return
		}
		canon, err := es.Marshal()
		if err != nil {
			t.Fatalf("marshalling a decoded EndpointSlice: %v", err)
		}
		checkSlimDecode(t, canon)
	})
}

// FuzzSlimDecoder: the watch's object decoder never panics, and on every
// EndpointSlice client-go's protobuf serializer makes of the input, encoded
// again (envelope and all), it gives the slim trim makes of it.
func FuzzSlimDecoder(f *testing.F) {
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	for _, es := range sliceSeeds() {
		var buf bytes.Buffer
		if err := pb.Encode(es, &buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	dec := sliceDecoder
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, _ = dec.Decode(data, nil, nil)
		obj, _, err := pb.Decode(data, nil, nil)
		es, ok := obj.(*discoveryv1.EndpointSlice)
		if err != nil || !ok {
			return
		}
		var buf bytes.Buffer
		if err := pb.Encode(es, &buf); err != nil {
			t.Fatalf("encoding a decoded EndpointSlice: %v", err)
		}
		got, _, err := dec.Decode(buf.Bytes(), nil, nil)
		s, isSlim := got.(*slim)
		if err != nil || !isSlim {
			t.Fatalf("got %T, %v; want the slim of %+v", got, err, es)
		}
		compareSlim(t, s, es)
	})
}

// TestSlimDecoder: the watch's object decoder turns protobuf and JSON
// EndpointSlices into the same slims and leaves a Status alone.
func TestSlimDecoder(t *testing.T) {
	es := sliceSeeds()[1]
	es.APIVersion, es.Kind = "discovery.k8s.io/v1", "EndpointSlice"
	pb := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	var buf bytes.Buffer
	if err := pb.Encode(es, &buf); err != nil {
		t.Fatal(err)
	}
	js, err := runtime.Encode(scheme.Codecs.LegacyCodec(discoveryv1.SchemeGroupVersion), es)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sliceRaw(buf.Bytes()[len(protobufPrefix):]); !ok {
		t.Fatal("sliceRaw: got no EndpointSlice in the envelope, want the protobuf path taken")
	}
	want, _ := trim(es.DeepCopy())
	dec := sliceDecoder
	for name, data := range map[string][]byte{"protobuf": buf.Bytes(), "json": js} {
		got, err := runtime.Decode(dec, data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s, ok := got.(*slim)
		if !ok || s.name != "web-1" && s.name != "Web-1" || !reflect.DeepEqual(s.model, want.(*slim).model) {
			t.Errorf("%s: got %T %+v, want the slim %+v", name, got, got, want)
		}
	}
	st := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Code: 410}
	buf.Reset()
	if err := pb.Encode(st, &buf); err != nil {
		t.Fatal(err)
	}
	if got, err := runtime.Decode(dec, buf.Bytes()); err != nil || got.(*metav1.Status).Code != 410 {
		t.Errorf("Status: got %#v, %v; want the Status", got, err)
	}
}

// FuzzWatchFrame: parseWatchFrame reads every frame client-go's raw
// protobuf serializer reads, to the same event type and object bytes.
func FuzzWatchFrame(f *testing.F) {
	for _, typ := range []string{"ADDED", "BOOKMARK", "ERROR", "other"} {
		b, err := (&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: []byte("k8s\x00\x0a\x02")}}).Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	raw := protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)
	f.Fuzz(func(t *testing.T, b []byte) {
		var want metav1.WatchEvent
		typ, obj, gotErr := parseWatchFrame(b)
		if _, _, err := raw.Decode(b, nil, &want); err != nil {
			return // refused by client-go: the watch ends on such a frame too
		}
		if gotErr != nil || string(typ) != want.Type || !bytes.Equal(obj, want.Object.Raw) {
			t.Fatalf("got %q %q, %v; want %q %q", typ, obj, gotErr, want.Type, want.Object.Raw)
		}
	})
}
