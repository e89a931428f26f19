package kubezone

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A fixture's objects served without a clientset (Clients.Objects, the
// agent's --fixture) give the zone the informers give it from a fake
// clientset of the same objects: the same records and counts, pods
// selected alike (by node, all when verified, none otherwise), and the
// source is the fixture.
func TestFixtureObjectsAsInformers(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{{"node pods", fixtureConfig()}, {"verified pods", Config{Pods: PodsVerified}}, {"no pods", Config{}}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				objs, err := LoadFixture(fixturePath)
				if err != nil {
					t.Fatal(err)
				}
				informed, _ := newZone(t, tc.cfg)
				runZone(t, informed, fake.NewClientset(objs...))
				direct, _ := newZone(t, tc.cfg)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- direct.Run(ctx, Clients{Objects: objs, Fixture: true}) }()
				t.Cleanup(func() {
					cancel()
					if err := <-done; err != nil {
						t.Errorf("Run: %v", err)
					}
				})
				settle()
				if !direct.Synced() || direct.Source() != SourceFixture {
					t.Fatalf("direct: synced %v, source %q; want synced from %q", direct.Synced(), direct.Source(), SourceFixture)
				}
				want, got := listWithoutSOA(informed), listWithoutSOA(direct)
				if len(want) == 0 || !slices.Equal(got, want) {
					t.Errorf("records: got %d %v\nwant %d %v", len(got), got, len(want), want)
				}
				ws, gs := informed.Stats(), direct.Stats()
				ws.Source, ws.Generation, gs.Source, gs.Generation = "", 0, "", 0
				if tc.cfg.NodeName != "" {
					// The fake clientset ignores the informer's field
					// selector; an API server keeps the node's pods.
					ws.Pods = 0
					for _, o := range objs {
						if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName == tc.cfg.NodeName {
							ws.Pods++
						}
					}
				}
				if gs != ws {
					t.Errorf("stats: got %+v, want %+v", gs, ws)
				}
			})
		})
	}
}
