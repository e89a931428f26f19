package main

import (
	"context"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// TestChurnSlicesRestores: the churn writes slices of the cluster's
// services, and leaves every one as it was loaded (all endpoints ready).
func TestChurnSlicesRestores(t *testing.T) {
	spec := clusterSpec{Namespaces: 2, Services: 20, Endpoints: 3, Headless: 5}
	var objs []kruntime.Object
	for _, o := range spec.objects(0) {
		objs = append(objs, o.(kruntime.Object))
	}
	cs := fake.NewClientset(objs...)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	r, err := spec.churnSlices(ctx, cs, 500)
	if err != nil {
		t.Fatalf("churnSlices: %v", err)
	}
	t.Logf("%s", r.format())
	list, err := cs.DiscoveryV1().EndpointSlices("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	churned := 0
	for _, s := range list.Items {
		if s.Annotations["benchtool/churn"] != "" {
			churned++
		}
		if !allReady(&s) {
			t.Errorf("slice %s/%s: an endpoint not ready after the churn, want all ready as loaded", s.Namespace, s.Name)
		}
	}
	if churned == 0 && r.Updates > 0 {
		t.Errorf("%d updates reported, but no slice carries the churn's annotation", r.Updates)
	}
}

func allReady(s *discoveryv1.EndpointSlice) bool {
	for _, ep := range s.Endpoints {
		if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
			return false
		}
	}
	return true
}
