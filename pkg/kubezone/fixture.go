package kubezone

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
)

// LoadFixture reads a multi-document YAML (or JSON) file of Namespaces,
// Services, EndpointSlices and Pods (a List of them works too) and returns
// a fake clientset seeded with them. Run on it goes through the same
// informer path as a real cluster: this is how the agent runs without an
// API server (`--fixture`) and how the examples are tested.
func LoadFixture(path string) (kubernetes.Interface, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loading fixture: %w", err)
	}
	defer f.Close()
	objs, err := decodeFixture(f)
	if err != nil {
		return nil, fmt.Errorf("loading fixture %s: %w", path, err)
	}
	return fake.NewClientset(objs...), nil
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
