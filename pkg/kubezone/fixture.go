package kubezone

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// A fixture: the objects of a file instead of an API server (--fixture).
// They are applied as the informers' initial lists would be, without a
// clientset: client-go's fake clientset, which the informers would need,
// costs the binary 0.5 MB and 3 ms of package initialisation at every
// start, the supervisor's and a restarted serving process's included.

// runObjects is Run on a fixture's objects: they are the zone's initial
// lists (pods as the informer's would select them), then the zone stays
// as it is, its source SourceFixture, until ctx is done.
func (z *Zone) runObjects(ctx context.Context, objs []runtime.Object) error {
	if !z.running.CompareAndSwap(false, true) {
		return errors.New("running zone: already running")
	}
	defer z.running.Store(false)
	z.syncSource = SourceFixture
	for _, obj := range objs {
		kind, ok := z.fixtureKind(obj)
		if !ok {
			continue
		}
		slim, err := trim(obj)
		if err != nil {
			return fmt.Errorf("running zone: %w", err)
		}
		z.handler(kind).OnAdd(slim, true)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	z.serveSynced(ctx, &wg, func() bool { return true }, "the fixture")
	return nil
}

// fixtureKind is obj's kind, and whether the informers Run starts would
// list it: pods only with PodsVerified (all) or a NodeName (that node's).
func (z *Zone) fixtureKind(obj runtime.Object) (objKind, bool) {
	switch o := obj.(type) {
	case *corev1.Service:
		return objService, true
	case *discoveryv1.EndpointSlice:
		return objSlice, true
	case *corev1.Namespace:
		return objNamespace, true
	case *corev1.Pod:
		switch {
		case z.cfg.Pods == PodsVerified:
			return objPod, true
		case z.cfg.NodeName != "":
			return objPod, o.Spec.NodeName == z.cfg.NodeName
		}
	}
	return 0, false
}

// LoadFixture reads a multi-document YAML (or JSON) file of Namespaces,
// Services, EndpointSlices and Pods (a List of them works too) and returns
// its objects: Run with Clients.Objects serves them (`--fixture`), and a
// fake clientset seeded with them goes through the informers as a real
// cluster does (the tests).
func LoadFixture(path string) ([]runtime.Object, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loading fixture: %w", err)
	}
	defer f.Close()
	objs, err := decodeFixture(f)
	if err != nil {
		return nil, fmt.Errorf("loading fixture %s: %w", path, err)
	}
	return objs, nil
}

func decodeFixture(r io.Reader) ([]runtime.Object, error) {
	dec := scheme.Codecs.UniversalDeserializer()
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var objs []runtime.Object
	for i := 0; ; i++ {
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || isOnlyComments(doc) {
			continue
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding document %d: %w", i, err)
		}
		flat, err := flatten(obj)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		objs = append(objs, flat...)
	}
}

// flatten accepts the kinds the zone reads, expanding typed lists.
func flatten(obj runtime.Object) ([]runtime.Object, error) {
	switch o := obj.(type) {
	case *corev1.Namespace, *corev1.Service, *discoveryv1.EndpointSlice, *corev1.Pod:
		return []runtime.Object{obj}, nil
	case *corev1.List:
		var out []runtime.Object
		for _, item := range o.Items {
			inner, _, err := scheme.Codecs.UniversalDeserializer().Decode(item.Raw, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("decoding list item: %w", err)
			}
			flat, err := flatten(inner)
			if err != nil {
				return nil, err
			}
			out = append(out, flat...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported kind %s", obj.GetObjectKind().GroupVersionKind().Kind)
}

func isOnlyComments(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}
