package kubezone

import (
	"context"
	"fmt"
	"net"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Clients are what Run watches the API server through.
type Clients struct {
	// Kube serves every list and watch, and the EndpointSlice watch too
	// when Slices is nil. A fake clientset (--fixture, tests) goes through
	// client-go's informers for everything.
	Kube kubernetes.Interface
	// Slices, if set, serves the EndpointSlice watch: a REST client of
	// discovery.k8s.io/v1 (NewClients gives it a connection of its own).
	Slices rest.Interface
	// Objects, with Kube nil, are a fixture's (LoadFixture): Run serves
	// them as the initial lists, with no clientset, and watches nothing.
	Objects []runtime.Object
	// Fixture says that Kube serves the objects of a fixture file, not an
	// API server: once synced, the zone's Source is SourceFixture instead
	// of SourceAPI (always so with Objects).
	Fixture bool
}

// NewClients returns the zone's clients for cfg: a clientset that speaks
// protobuf, and for the EndpointSlice watch a REST client on an HTTP/1.1
// connection of its own. EndpointSlices are the watch that carries nearly
// every change, and on its own HTTP/1.1 connection the watch goroutine
// reads the response body from the TLS connection itself: over the shared
// HTTP/2 connection every event also crossed client-go's HTTP/2 read loop
// (frames, flow-control window updates written back, a hand-off to the
// reader), which cost each agent a fifth of its CPU per update
// (docs/scale.md). The price is one more connection per agent.
func NewClients(cfg *rest.Config) (Clients, error) {
	kc := rest.CopyConfig(cfg)
	kc.ContentType = runtime.ContentTypeProtobuf
	kc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(kc)
	if err != nil {
		return Clients{}, fmt.Errorf("kubernetes client: %w", err)
	}
	sc := rest.CopyConfig(kc)
	sc.GroupVersion = &discoveryv1.SchemeGroupVersion
	sc.APIPath = "/apis"
	sc.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	sc.NextProtos = []string{"http/1.1"} // no HTTP/2: a transport, and so a connection, of its own
	dial := sc.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext // client-go's
	}
	sc.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return withRawReads(c), nil // rawread_linux.go
	}
	slices, err := rest.RESTClientFor(sc)
	if err != nil {
		return Clients{}, fmt.Errorf("EndpointSlice watch client: %w", err)
	}
	return Clients{Kube: kube, Slices: slices}, nil
}
