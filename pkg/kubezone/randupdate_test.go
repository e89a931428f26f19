package kubezone

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestRandomUpdatesMatchRebuild: over random EndpointSlice updates of a
// headless and a ClusterIP service (several slices with their own named
// ports, addresses shared between slices and services, IPv6, hostnames, a
// hostname that is a _<proto> label or another endpoint's dashed address,
// slices emptied and removed), the updated zone holds exactly what a zone
// built afresh from the same objects holds, after every batch.
func TestRandomUpdatesMatchRebuild(t *testing.T) {
	randomUpdates(t, 400, func(step int, z *Zone, objects map[string]event) {
		fresh, _ := newZone(t, Config{})
		for _, ev := range objects {
			fresh.enqueue(ev)
		}
		fresh.drain()
		if got, want := zoneDump(z), zoneDump(fresh); got != want {
			t.Fatalf("step %d: updated zone differs from a fresh build\n got: %s\nwant: %s", step, got, want)
		}
	})
}

// randomUpdates applies steps random batches of slice events to a zone
// holding the services db (headless) and web (ClusterIP), calling check
// after each with the current objects by kind and key.
func randomUpdates(t *testing.T, steps int, check func(step int, z *Zone, objects map[string]event)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	addrs := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "fd00::1", "fd00::2"}
	hosts := []string{"", "", "a", "b", "a", "_tcp", "10-0-0-3"}
	ports := []portModel{{Name: "http", Protocol: "tcp", Port: 80}, {Name: "dns", Protocol: "udp", Port: 53},
		{Protocol: "tcp", Port: 9000}, {Name: "http", Protocol: "tcp", Port: 8080}}
	z, _ := newZone(t, Config{})
	objects := map[string]event{}
	put := func(ev event) {
		if ev.obj == nil {
			delete(objects, fmt.Sprint(ev.kind, ev.key))
		} else {
			objects[fmt.Sprint(ev.kind, ev.key)] = ev
		}
		z.enqueue(ev)
	}
	put(event{kind: objNamespace, key: "ns", obj: nsPresent{}})
	for _, s := range []*svcModel{lazySvc("db"), lazySvc("web", "10.96.0.1")} {
		put(event{kind: objService, key: s.key(), obj: s})
	}
	for step := range steps {
		for range 1 + rng.IntN(2) {
			svc := []string{"db", "web"}[rng.IntN(2)]
			name := fmt.Sprint(svc, "-", rng.IntN(3))
			if rng.IntN(8) == 0 {
				put(event{kind: objSlice, key: "ns/" + name})
				continue
			}
			var eps []epModel
			for range rng.IntN(5) {
				eps = append(eps, epModel{Addr: netip.MustParseAddr(addrs[rng.IntN(len(addrs))]), Hostname: hosts[rng.IntN(len(hosts))]})
			}
			s := lazySlice(name, svc, eps...)
			s.Ports = nil
			for _, p := range ports {
				if rng.IntN(2) == 0 {
					s.Ports = append(s.Ports, p)
				}
			}
			put(sliceEvent(s))
		}
		z.drain()
		check(step, z, objects)
	}
}
