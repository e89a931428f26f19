package main

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// namespaces of the synthetic cluster: service i lives in ns-(i%namespaces).
const namespaces = 10

// cluster is the synthetic cluster the driver loads and churns: services
// svc-i, every headlessEvery-th one headless, each with one EndpointSlice
// of endpoints ready endpoints.
type cluster struct {
	services, endpoints, headlessEvery int

	svcMu []sync.Mutex // by service: one update of a slice at a time

	mu     sync.Mutex // guards slices, nextIP
	slices []*discoveryv1.EndpointSlice
	nextIP uint32 // churned endpoints get fresh addresses from 10.128.0.0/9
}

func (c *cluster) ns(i int) string     { return fmt.Sprintf("ns-%d", i%namespaces) }
func (c *cluster) name(i int) string   { return fmt.Sprintf("svc-%d", i) }
func (c *cluster) headless(i int) bool { return i%c.headlessEvery == 0 }
func (c *cluster) fqdn(i int) string   { return c.name(i) + "." + c.ns(i) + ".svc.cluster.local." }
func addr(x uint32) string {
	return netip.AddrFrom4([4]byte{10, byte(x >> 16), byte(x >> 8), byte(x)}).String()
}
func ptr[T any](v T) *T                   { return &v }
func (c *cluster) sliceName(i int) string { return c.name(i) + "-churn" }

// load creates the namespaces, services and slices (8 writers).
func (c *cluster) load(ctx context.Context, cs kubernetes.Interface) error {
	for i := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns(i)}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace: %w", err)
		}
	}
	c.slices = make([]*discoveryv1.EndpointSlice, c.services)
	c.svcMu = make([]sync.Mutex, c.services)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range c.services {
		g.Go(func() error {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns(i), Name: c.name(i)},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
			if c.headless(i) {
				svc.Spec.ClusterIP = corev1.ClusterIPNone
			}
			if _, err := cs.CoreV1().Services(c.ns(i)).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating service %d: %w", i, err)
			}
			es := c.newSlice(i)
			got, err := cs.DiscoveryV1().EndpointSlices(c.ns(i)).Create(ctx, es, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("creating slice %d: %w", i, err)
			}
			c.mu.Lock()
			c.slices[i] = got
			c.mu.Unlock()
			return nil
		})
	}
	return g.Wait()
}

// newSlice is the slice of service i as the EndpointSlice controller would
// write it: ready, serving endpoints with node names, zones and pod refs.
func (c *cluster) newSlice(i int) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns(i), Name: c.sliceName(i), Labels: map[string]string{
			discoveryv1.LabelServiceName: c.name(i), discoveryv1.LabelManagedBy: "churn.nodecache.bench"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(80))}},
	}
	for j := range c.endpoints {
		es.Endpoints = append(es.Endpoints, endpoint(addr(uint32(i*c.endpoints+j+1)), c.ns(i), fmt.Sprintf("%s-%d", c.name(i), j), j))
	}
	return es
}

func endpoint(ip, ns, pod string, j int) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
		NodeName:   ptr(fmt.Sprintf("node-%d", j)), Zone: ptr("zone-a"),
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod}}
}

// churn replaces one endpoint of service i by a pod with a fresh address
// (a rollout step) and returns that address.
func (c *cluster) churn(ctx context.Context, cs kubernetes.Interface, i int) (string, error) {
	c.svcMu[i].Lock()
	defer c.svcMu[i].Unlock()
	c.mu.Lock()
	es := c.slices[i].DeepCopy()
	c.nextIP++
	n := c.nextIP
	c.mu.Unlock()
	ip, j := addr(0x80_0000+n), int(n)%len(es.Endpoints)
	es.Endpoints[j] = endpoint(ip, es.Namespace, fmt.Sprintf("%s-r%d", c.name(i), n), j)
	got, err := cs.DiscoveryV1().EndpointSlices(es.Namespace).Update(ctx, es, metav1.UpdateOptions{})
	if err != nil {
		return "", fmt.Errorf("updating slice of service %d: %w", i, err)
	}
	c.mu.Lock()
	c.slices[i] = got
	c.mu.Unlock()
	return ip, nil
}
