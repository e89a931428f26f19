package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/miekg/dns"
	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// hollowClient returns a clientset with its own transport, hence its own
// TCP/TLS/HTTP2 connection to the API server, set up as the agent sets up
// its client (protobuf, QPS 20). A custom Dial keeps client-go from sharing
// one cached transport between clientsets of equal config.
func hollowClient(base *rest.Config, userAgent string) (kubernetes.Interface, error) {
	c, err := hollowClients(base, userAgent)
	return c.Kube, err
}

// hollowClients are an agent's clients, as the agent makes them
// (kubezone.NewClients), on connections of their own.
func hollowClients(base *rest.Config, userAgent string) (kubezone.Clients, error) {
	rc := rest.CopyConfig(base)
	rc.UserAgent = userAgent
	rc.QPS, rc.Burst = 20, 40
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	rc.Dial = d.DialContext
	cs, err := kubezone.NewClients(rc)
	if err != nil {
		return kubezone.Clients{}, fmt.Errorf("building client %s: %w", userAgent, err)
	}
	return cs, nil
}

// hollowAgent is one agent's informers without its DNS server: the
// agent's own kubezone.Zone run on its own connection, with the node name
// set (so it also watches that node's pods, as a deployed agent does).
type hollowAgent struct {
	zone *kubezone.Zone
	done chan struct{}
}

func startHollowAgent(ctx context.Context, base *rest.Config, i int, relistSpread time.Duration) (*hollowAgent, error) {
	cs, err := hollowClients(base, fmt.Sprintf("nodecache-hollow/%d", i))
	if err != nil {
		return nil, err
	}
	z, err := kubezone.New(kubezone.Config{NodeName: fmt.Sprintf("hollow-%d", i), RelistSpread: relistSpread}, prometheus.NewRegistry(), nil)
	if err != nil {
		return nil, err
	}
	a := &hollowAgent{zone: z, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		if err := z.Run(ctx, cs); err != nil {
			logf("hollow agent %d: %v", i, err)
		}
	}()
	return a, nil
}

// has reports whether the agent's zone answers name with an A record.
func (a *hollowAgent) has(name string) bool {
	ans := a.zone.Lookup(name, dns.TypeA)
	return ans.Rcode == dns.RcodeSuccess && len(ans.Answer) > 0
}

// hollowProxy is a kube-proxy-shaped watcher: kube-proxy's informers
// (Services and EndpointSlices cluster-wide, without headless services and
// those of another proxy; its own Node by name) on their own connection.
type hollowProxy struct {
	services corelisters.ServiceLister
	synced   []cache.InformerSynced
}

func startHollowProxy(ctx context.Context, base *rest.Config, i int) (*hollowProxy, error) {
	cs, err := hollowClient(base, fmt.Sprintf("kube-proxy-hollow/%d", i))
	if err != nil {
		return nil, err
	}
	// kube-proxy's selectors (cmd/kube-proxy/app/server.go): no headless
	// services, none proxied by another implementation.
	const proxySel = "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = proxySel }))
	svc := f.Core().V1().Services()
	slices := f.Discovery().V1().EndpointSlices().Informer()
	node := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", fmt.Sprintf("hollow-%d", i)).String()
		}))
	nodes := node.Core().V1().Nodes().Informer()
	noop := cache.ResourceEventHandlerFuncs{AddFunc: func(any) {}, UpdateFunc: func(any, any) {}, DeleteFunc: func(any) {}}
	p := &hollowProxy{services: svc.Lister()}
	for _, inf := range []cache.SharedIndexInformer{svc.Informer(), slices, nodes} {
		reg, err := inf.AddEventHandler(noop)
		if err != nil {
			return nil, fmt.Errorf("hollow proxy %d: %w", i, err)
		}
		p.synced = append(p.synced, reg.HasSynced)
	}
	f.Start(ctx.Done())
	node.Start(ctx.Done())
	return p, nil
}

func (p *hollowProxy) has(name string) bool {
	_, err := p.services.Services(markerNamespace).Get(name)
	return err == nil
}

// markerNamespace holds the marker services written to time propagation.
const markerNamespace = "churn"

func markerService(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: markerNamespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}}
}
