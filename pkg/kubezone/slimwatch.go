package kubezone

import (
	"bytes"
	"context"
	"slices"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// sliceListWatch lists and watches EndpointSlices in every namespace, and
// says what the watch's objects are. On a real API server its watches
// (streaming lists included) decode EndpointSlices straight into slims
// (decodeSliceProto), and obj is a *slim; its plain lists, rare, stay
// client-go's typed ones, trimmed by the factory's transform. On a client
// without a REST client (the fake clientset of --fixture and the tests)
// both are client-go's typed calls and obj an EndpointSlice.
func sliceListWatch(c kubernetes.Interface) (obj runtime.Object, lw *cache.ListWatch) {
	lw = listWatchOf[*discoveryv1.EndpointSliceList](c.DiscoveryV1().EndpointSlices(metav1.NamespaceAll), nil)
	rc, err := slimSliceClient(c)
	if err != nil || rc == nil {
		return &discoveryv1.EndpointSlice{}, lw
	}
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return watchSlim(ctx, rc, o)
	}
	return &slim{}, lw
}

// slimSliceClient is a REST client for discovery.k8s.io/v1 sharing c's
// connection, rate limiter and content types, whose watch decoder returns
// slims (slimCodecs). It is nil when c has no REST client.
func slimSliceClient(c kubernetes.Interface) (*rest.RESTClient, error) {
	rc, ok := c.DiscoveryV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil || rc.Client == nil {
		return nil, nil
	}
	gv := discoveryv1.SchemeGroupVersion
	return rest.NewRESTClient(rc.Get().AbsPath("/").URL(), "/apis/"+gv.String(), rest.ClientContentConfig{
		AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON,
		ContentType:        runtime.ContentTypeProtobuf,
		GroupVersion:       gv,
		Negotiator:         runtime.NewClientNegotiator(slimCodecs{}, gv),
	}, rc.GetRateLimiter(), rc.Client)
}

// watchSlim watches EndpointSlices in every namespace, as the typed
// client's Watch does, with events of *slim.
func watchSlim(ctx context.Context, rc *rest.RESTClient, o metav1.ListOptions) (watch.Interface, error) {
	var timeout time.Duration
	if o.TimeoutSeconds != nil {
		timeout = time.Duration(*o.TimeoutSeconds) * time.Second
	}
	o.Watch = true
	return rc.Get().Resource("endpointslices").VersionedParams(&o, scheme.ParameterCodec).Timeout(timeout).Watch(ctx)
}

// slimCodecs are client-go's codecs with the decoder wrapped by
// slimDecoder.
type slimCodecs struct{}

var _ runtime.NegotiatedSerializer = slimCodecs{}

// SupportedMediaTypes are client-go's, the protobuf watch stream's frames
// decoded by watchEventDecoder.
func (slimCodecs) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := slices.Clone(scheme.Codecs.WithoutConversion().SupportedMediaTypes())
	for i, info := range infos {
		if info.MediaType == runtime.ContentTypeProtobuf && info.StreamSerializer != nil {
			stream := *info.StreamSerializer // a copy: client-go's codecs stay as they are
			stream.Serializer = watchEventDecoder{Serializer: stream.Serializer}
			infos[i].StreamSerializer = &stream
		}
	}
	return infos
}

func (slimCodecs) EncoderForVersion(e runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return scheme.Codecs.WithoutConversion().EncoderForVersion(e, gv)
}

func (slimCodecs) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	return slimDecoder{next: scheme.Codecs.WithoutConversion().DecoderToVersion(d, gv)}
}

// slimDecoder decodes EndpointSlices into slims: from protobuf with
// decodeSliceProto, in any other form through next and trim. Everything
// else (a watch's error Status) goes to next.
type slimDecoder struct{ next runtime.Decoder }

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

// watchEventDecoder decodes a protobuf watch frame into a
// metav1.WatchEvent whose object aliases the frame instead of copying it:
// client-go decodes the object (slimDecoder, which copies what it keeps)
// before it reads the next frame into the same buffer. Anything else, and
// a frame it cannot read, goes to the wrapped serializer.
type watchEventDecoder struct{ runtime.Serializer }

func (d watchEventDecoder) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok {
		return d.Serializer.Decode(data, gvk, into)
	}
	var typ, raw []byte
	err := eachField(data, func(f pbField) (err error) {
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
	if err != nil {
		return d.Serializer.Decode(data, gvk, into)
	}
	*ev = metav1.WatchEvent{Type: eventType(typ), Object: runtime.RawExtension{Raw: raw}}
	return ev, &schema.GroupVersionKind{Group: metav1.GroupName, Version: "v1", Kind: "WatchEvent"}, nil
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
