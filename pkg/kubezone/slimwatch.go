package kubezone

import (
	"bytes"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
)

// slimDecoder decodes EndpointSlices into slims: from protobuf with
// decodeSliceProto, in any other form through next and trim. Everything
// else (a watch's error Status) goes to next.
//
// sliceDecoder is the one the EndpointSlice watch uses.
type slimDecoder struct{ next runtime.Decoder }

var sliceDecoder = slimDecoder{next: scheme.Codecs.UniversalDeserializer()}

// protobufPrefix starts every protobuf-encoded Kubernetes object.
var protobufPrefix = []byte{'k', '8', 's', 0}

func (d slimDecoder) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into == nil && bytes.HasPrefix(data, protobufPrefix) {
		if raw, ok := sliceRaw(data[len(protobufPrefix):]); ok {
			s, err := decodeSliceProto(raw)
			if err != nil {
				return nil, nil, err
			}
			return s, &schema.GroupVersionKind{Group: discoveryv1.GroupName, Version: "v1", Kind: "EndpointSlice"}, nil
		}
	}
	obj, kind, err := d.next.Decode(data, gvk, into)
	if es, ok := obj.(*discoveryv1.EndpointSlice); ok && err == nil && into == nil {
		t, _ := trim(es) // never fails
		return t.(*slim), kind, nil
	}
	return obj, kind, err
}

// parseWatchFrame reads a protobuf watch frame (a metav1.WatchEvent): the
// event type and the object's bytes, both aliasing data.
func parseWatchFrame(data []byte) (typ, raw []byte, err error) {
	err = eachField(data, func(f pbField) (err error) {
		switch f.num {
		case 1: // type
			typ, err = f.bytes()
		case 2: // object, a RawExtension: merged, its raw bytes replaced
			var v []byte
			if v, err = f.bytes(); err == nil {
				err = eachField(v, func(f pbField) (err error) {
					if f.num == 1 {
						raw, err = f.bytes()
					}
					return err
				})
			}
		}
		return err
	})
	return typ, raw, err
}

// eventType is the watch event type b, without allocating for the known ones.
func eventType(b []byte) string {
	for _, t := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error} {
		if string(b) == string(t) {
			return string(t)
		}
	}
	return string(b)
}

// sliceRaw returns the object bytes of a runtime.Unknown envelope when it
// holds a plain discovery.k8s.io/v1 EndpointSlice.
func sliceRaw(b []byte) ([]byte, bool) {
	var apiVersion, kind, raw, encoding []byte
	err := eachField(b, func(f pbField) (err error) {
		switch f.num {
		case 1: // typeMeta
			var v []byte
			if v, err = f.bytes(); err == nil {
				apiVersion, kind, err = bytesPair(v)
			}
		case 2:
			raw, err = f.bytes()
		case 3:
			encoding, err = f.bytes()
		}
		return err
	})
	return raw, err == nil && len(encoding) == 0 && string(kind) == "EndpointSlice" &&
		string(apiVersion) == discoveryv1.SchemeGroupVersion.String()
}
