package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodecache/nodecache/internal/logkey"
	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/iface"
	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/tap"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// agent holds the running components, for the health checks and the admin API.
type agent struct {
	cfg       *runConfig
	log       *slog.Logger
	reg       *prometheus.Registry
	started   time.Time
	addrs     []netip.AddrPort
	forwarder *liveUpstream   // the upstream forwarder; a config reload replaces it
	fcfg      upstream.Config // the live forwarder's config; guarded by live.mu after build
	live      *liveState      // config generation and reloads
	hup       chan os.Signal  // SIGHUP: reload the config; nil in tests
	cache     *cache.Cache
	zone      *kubezone.Zone // nil without a zone source
	local     *localAnswers  // static records and rewrites; never nil after build
	server    *server.Server
	iface     *iface.Manager
	clients   *clientStats
	tap       *tap.Tap // nil without --dnstap
	tail      *tailHub // the `nodecache tail` subscribers
	m         *agentMetrics
	handedOff chan struct{} // closed when a successor took the sockets over
	// successorSeen is set when a successor greeted us on the handover
	// socket, whether or not it took the sockets.
	successorSeen atomic.Bool
	// successorPod is the pod UID of the successor that took the sockets.
	successorPod atomic.Pointer[string]
	stopEarly    context.CancelFunc
	pod          podState
	probes       swapHandler          // the probe socket's handler
	kube         kubernetes.Interface // nil without a zone from an API server
	httpGuards   sync.Map             // health/metrics address -> *connGuard
}

func newLogger(c *runConfig) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == logFormatJSON {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
}

// cmdRun is `nodecache run`.
func cmdRun(args []string) error {
	cfg, err := parseRunConfig(args)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg)
	if err != nil {
		return err
	}
	klog.SetSlogLogger(log.With(logkey.Component, "client-go"))
	applyGCDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	a := newAgent(cfg, log)
	a.hup = make(chan os.Signal, 1)
	signal.Notify(a.hup, syscall.SIGHUP)
	defer signal.Stop(a.hup)
	return a.run(ctx)
}

func newAgent(cfg *runConfig, log *slog.Logger) *agent {
	return &agent{cfg: cfg, log: log, reg: prometheus.NewRegistry(), started: time.Now(),
		addrs: listenAddrs(cfg.LocalIPs, uint16(cfg.Port)), clients: newClientStats(4096), tail: newTailHub(),
		handedOff: make(chan struct{}), pod: podState{dir: cfg.PodStateDir, uid: cfg.PodUID}}
}

func (a *agent) run(ctx context.Context) error {
	cfg, log := a.cfg, a.log
	if successor, ok := a.pod.superseded(); ok {
		return a.idleSuperseded(ctx, successor)
	}
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.m = newAgentMetrics(a.reg, cfg.NodeName)
	a.live = newLiveState(cfg, a.reg)
	if err := a.build(); err != nil {
		if a.tap != nil {
			_ = a.tap.Close()
		}
		return err
	}
	// The probe socket outlives the errgroup: after a handover it says
	// "alive, not ready" until the pod is deleted.
	parent := ctx
	a.probes.set(a.healthMux())
	probesDone := make(chan struct{})
	probeCtx, stopProbes := context.WithCancel(parent)
	defer stopProbes()
	go func() {
		defer close(probesDone)
		if err := a.serveProbes(probeCtx, &a.probes); err != nil {
			log.Error("probe socket unavailable: the kubelet's exec probes will fail", logkey.Err, err)
		}
	}()
	ctx, a.stopEarly = context.WithCancel(ctx)
	defer a.stopEarly()
	defer a.forwarder.Close()
	defer a.cache.Close()
	if a.tap != nil {
		defer a.tap.Close()
	}

	defer a.iface.Close()

	g, gctx := errgroup.WithContext(ctx)
	if a.zone != nil {
		if err := a.startZone(gctx, g); err != nil {
			return err
		}
	}
	// Listeners first: inherited from a predecessor, or new.
	listeners, finish, err := a.acquireListeners(ctx)
	if err != nil {
		return errors.Join(err, a.abort(g))
	}
	if finish != nil {
		// The predecessor serves until we read the sockets: start only
		// once the zone answers, so the switch costs no SERVFAIL.
		a.waitZoneSynced(ctx, a.cfg.HandoverWait)
	}
	if err := a.server.Serve(listeners); err != nil {
		listeners.Close()
		return errors.Join(err, a.abort(g))
	}
	if finish != nil {
		finish()
	}
	if err := a.selfCheck(ctx, false); err != nil {
		_ = a.server.Shutdown(context.Background())
		return errors.Join(fmt.Errorf("listeners do not answer before setup: %w", err), a.abort(g))
	}

	// Then the address and the rules, so traffic is only ever steered to a
	// socket that answers.
	if err := a.iface.Setup(ctx); err != nil {
		_ = a.server.Shutdown(context.Background())
		return errors.Join(fmt.Errorf("setting up interface and rules: %w", err), a.abort(g))
	}
	if err := a.selfCheck(ctx, cfg.SetupInterface); err != nil {
		log.Warn("listeners do not answer on their addresses yet", logkey.Err, err)
	}
	g.Go(func() error { return a.iface.Run(gctx) })
	g.Go(func() error { return a.local.static.Run(gctx) })
	g.Go(func() error { return a.watchConfig(gctx, a.hup) })
	g.Go(func() error { return a.serveHTTP(gctx) })
	// The admin API and the handover socket are conveniences: if their
	// directory is not writable, say so once and keep serving DNS.
	g.Go(func() error {
		if err := a.serveAdmin(gctx); err != nil {
			log.Error("admin API unavailable; DNS keeps serving", logkey.Err, err)
		}
		return nil
	})
	g.Go(func() error {
		err := a.serveHandover(gctx)
		if err != nil && !errors.Is(err, errHandedOver) {
			log.Error("handover socket unavailable: the next upgrade will start cold; DNS keeps serving", logkey.Err, err)
			return nil
		}
		return err
	})
	log.Info("nodecache serving", "addrs", a.addrs, "upstreams", a.forwarder.Status(), "zone", a.zone != nil,
		"startup", time.Since(a.started).Round(time.Millisecond))

	err = g.Wait()
	err = a.shutdown(err)
	if a.pod.enabled() && isHandedOff(a.handedOff) {
		a.idleAfterHandover(parent)
	}
	stopProbes()
	<-probesDone
	return err
}

func isHandedOff(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// idleAfterHandover keeps the process of a pod that handed over alive until
// the pod is deleted (see podstate.go): exiting would make the kubelet
// restart it.
func (a *agent) idleAfterHandover(ctx context.Context) {
	successor := ""
	if p := a.successorPod.Load(); p != nil {
		successor = *p
	}
	if err := a.pod.markSuperseded(successor); err != nil {
		a.log.Error("recording the handover in the pod state dir; a restart of this container would start cold", logkey.Err, err)
	}
	a.probes.set(supersededMux(successor))
	a.log.Info("handed over; idle until this pod is deleted", "successor_pod", successor)
	<-ctx.Done()
	a.log.Info("superseded agent stopping; interface and rules are the successor's")
}

// abort stops what run started in g before serving, for an early return.
func (a *agent) abort(g *errgroup.Group) error {
	a.stopEarly()
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// waitZoneSynced waits until the zone answers (synced, or from a snapshot),
// at most d.
func (a *agent) waitZoneSynced(ctx context.Context, d time.Duration) {
	if a.zone == nil {
		return
	}
	deadline := time.Now().Add(d)
	for !a.zoneAnswers() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if !a.zoneAnswers() {
		a.log.Warn("taking over before the zone synced", "waited", d)
	}
}

// build constructs the forwarder, cache, zone, server and interface manager.
func (a *agent) build() error {
	cfg, log := a.cfg, a.log
	if err := a.buildTap(); err != nil {
		return err
	}
	ql, err := newQueryLog(&cfg.QueryLog, log.With(logkey.Component, "querylog"))
	if err != nil {
		return err
	}
	fcfg, stubs, err := a.forwarderConfig(cfg)
	if err != nil {
		return err
	}
	fwd, err := upstream.New(fcfg, replacingRegisterer{a.reg}, log.With(logkey.Component, "upstream"))
	if err != nil {
		return fmt.Errorf("upstreams: %w", err)
	}
	a.fcfg = fcfg
	a.forwarder = newLiveUpstream(fwd)
	a.cache, err = cache.New(cacheConfig(cfg, stubs.limits), a.forwarder, a.reg, log.With(logkey.Component, "cache"))
	if err != nil {
		_ = a.forwarder.Close()
		return fmt.Errorf("cache: %w", err)
	}
	var zone server.Zone
	if cfg.Kubeconfig != "" || cfg.Fixture != "" || inCluster() {
		a.zone, err = kubezone.New(kubezone.Config{
			Domain: cfg.ClusterDomain, TTL: cfg.TTL, NegativeTTL: cfg.NegativeTTL, Pods: cfg.Pods,
			NodeName: cfg.NodeName, LocalIPs: cfg.LocalIPs, SnapshotPath: cfg.ZoneSnapshot,
			SnapshotMaxAge: cfg.SnapshotAge, RelistSpread: relistSpread(cfg.RelistSpread),
		}, a.reg, log) // kubezone names itself in its log lines
		if err != nil {
			return fmt.Errorf("cluster zone: %w", err)
		}
		zone = zoneAdapter{a.zone}
	}
	a.local, err = a.buildLocal()
	if err != nil {
		return err
	}
	obs := observers{a.clients, a.tail}
	if ql != nil {
		obs = append(obs, ql)
	}
	deps := server.Deps{Zone: zone, Resolver: resolverAdapter{a.cache, a.local}, Observer: obs}
	if a.tap != nil {
		deps.Tap = a.tap
	}
	if a.zone != nil {
		deps.Pods = podsAdapter{a.zone}
	}
	stubNames := make([]string, 0, len(stubs.servers))
	for d := range stubs.servers {
		stubNames = append(stubNames, d)
	}
	a.reg.MustRegister(newCorednsCacheCollector(a.cache, corednsServers(a.addrs), a.pluginZones(stubNames)))
	a.server, err = server.New(server.Config{
		Addrs: a.addrs, MaxTCPConns: cfg.MaxTCPConns, TCPIdleTimeout: cfg.TCPIdleTimeout,
		MaxTCPConnsPerClient: cfg.MaxTCPConnsPerClient, MaxInFlightPerClient: cfg.MaxInFlightPerClient,
		Domain: cfg.ClusterDomain, StubDomains: stubNames, Autopath: cfg.Autopath, AutopathSearch: hostSearch(cfg),
		ClientQPS: cfg.ClientQPSLimit, ClientBurst: cfg.ClientBurst,
	}, deps, a.reg, log.With(logkey.Component, "server"))
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	a.iface, err = iface.New(iface.Config{
		InterfaceName: cfg.InterfaceName, LocalIPs: cfg.LocalIPs, Port: uint16(cfg.Port),
		ExtraTCPPorts:  a.localHTTPPorts(),
		SetupInterface: cfg.SetupInterface, SetupIPTables: cfg.SetupIPTables,
		IPTablesMode: cfg.IPTablesMode, SyncInterval: cfg.SyncInterval,
	}, a.reg, log.With(logkey.Component, "iface"))
	if err != nil {
		return fmt.Errorf("interface: %w", err)
	}
	if !cfg.SetupInterface && !cfg.SetupIPTables {
		log.Info("not touching the host: --setup-interface=false --setup-iptables=false")
	}
	return nil
}

// corednsServers are the server label values of the CoreDNS-compatible
// metrics: one per listen address.
func corednsServers(addrs []netip.AddrPort) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = "dns://" + a.String()
	}
	return out
}

// pluginZones says, for coredns_plugin_enabled, which CoreDNS plugins do
// the jobs nodecache does in each zone.
func (a *agent) pluginZones(stubs []string) map[string][]string {
	z := map[string][]string{".": {"cache", "forward", "prometheus"}}
	for _, s := range stubs {
		z[dns.Fqdn(strings.ToLower(s))] = []string{"cache", "forward", "prometheus"}
	}
	if a.zone != nil {
		names := []string{"kubernetes", "prometheus"}
		if a.cfg.Autopath {
			names = append(names, "autopath")
		}
		z[dns.Fqdn(strings.ToLower(a.cfg.ClusterDomain))] = names
	}
	return z
}

// buildTap starts the dnstap output when --dnstap asks for one.
func (a *agent) buildTap() error {
	if a.cfg.Dnstap == "" {
		return nil
	}
	identity := a.cfg.NodeName
	if identity == "" {
		identity, _ = os.Hostname()
	}
	t, err := tap.New(tap.Config{Addr: a.cfg.Dnstap, Identity: identity, Version: "nodecache " + version},
		a.reg, a.log.With(logkey.Component, "dnstap"))
	if err != nil {
		return fmt.Errorf("--dnstap: %w", err)
	}
	a.tap = t
	return nil
}

// upstreamTap is the forwarder's dnstap hook: nil (an untyped nil, not a
// nil *tap.Tap) without --dnstap.
func (a *agent) upstreamTap() upstream.Tap {
	if a.tap == nil {
		return nil
	}
	return a.tap
}

// cacheConfig is the cache's config from the agent's: 0 (off) becomes
// the cache's "disabled" for serve-stale, and --prefetch=false likewise.
func cacheConfig(cfg *runConfig, zoneLimits map[string]cache.ZoneLimit) cache.Config {
	c := cache.Config{
		MaxBytes: int64(cfg.CacheSize), MaxTTL: cfg.MaxTTL, MaxNegativeTTL: cfg.MaxNegativeTTL,
		StaleMaxAge: cfg.StaleMaxAge, ZoneLimits: zoneLimits,
	}
	if c.StaleMaxAge == 0 {
		c.StaleMaxAge = -1
	}
	if !cfg.Prefetch {
		c.PrefetchPercent = -1
	}
	return c
}

// localHTTPPorts are the health and metrics ports that listen on a local IP
// and so need ACCEPT/NOTRACK rules too.
func (a *agent) localHTTPPorts() []uint16 {
	var ports []uint16
	for _, s := range []string{a.healthAddr(), a.metricsAddr()} {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			continue
		}
		for _, ip := range a.cfg.LocalIPs {
			if ap.Addr() == ip {
				ports = append(ports, ap.Port())
				break
			}
		}
	}
	return ports
}

func (a *agent) healthAddr() string  { return a.cfg.defaultAddr(a.cfg.HealthAddr, 8080) }
func (a *agent) metricsAddr() string { return a.cfg.defaultAddr(a.cfg.MetricsAddr, 9253) }

func inCluster() bool {
	return os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != ""
}

// startZone loads a snapshot if there is one and starts the informers.
func (a *agent) startZone(ctx context.Context, g *errgroup.Group) error {
	client, err := a.kubeClient()
	if err != nil {
		return err
	}
	a.kube = client
	if a.cfg.ZoneSnapshot != "" {
		if err := a.zone.LoadSnapshot(); err != nil && !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("not serving from the zone snapshot", logkey.Err, err)
		}
	}
	g.Go(func() error { return a.zone.Run(ctx, client) })
	return nil
}

func (a *agent) kubeClient() (kubernetes.Interface, error) {
	if a.cfg.Fixture != "" {
		c, err := kubezone.LoadFixture(a.cfg.Fixture)
		if err != nil {
			return nil, fmt.Errorf("--fixture: %w", err)
		}
		return c, nil
	}
	var rc *rest.Config
	var err error
	if a.cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", a.cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	rc.UserAgent = "nodecache/" + version
	rc.QPS, rc.Burst = 20, 40
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}

// keepHostState says whether stopping must leave the interface and rules
// alone, and why: --skip-teardown, or a successor that refused our sockets
// (other --local-ip) and serves on its own, relying on the same link.
func (a *agent) keepHostState() (bool, string) {
	switch {
	case a.cfg.SkipTeardown:
		return true, "--skip-teardown"
	case a.successorSeen.Load():
		return true, "a successor agent is running"
	}
	if restart, why := a.containerRestart(); restart {
		return true, why
	}
	return false, ""
}

// shutdown stops serving and, unless a successor took over or
// --skip-teardown is set, removes the rules, then the address and link.
func (a *agent) shutdown(cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if isHandedOff(a.handedOff) {
		a.log.Info("handed over to a successor; leaving interface and rules in place")
		_ = a.server.StopReading(ctx)
		return nil
	}
	// Rules and address go first, while the sockets still answer: traffic
	// stops being steered here before anything stops serving it.
	if keep, why := a.keepHostState(); keep {
		a.log.Info(why + ": leaving interface and rules in place")
	} else if err := a.iface.Teardown(ctx); err != nil {
		a.log.Error("tearing down interface and rules", logkey.Err, err)
	}
	if err := a.server.Shutdown(ctx); err != nil {
		a.log.Warn("shutting down listeners", logkey.Err, err)
	}
	if a.zone != nil {
		a.log.Info("zone at exit", "stats", fmt.Sprintf("%+v", a.zone.Stats()))
	}
	if cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

func joinAddrs(addrs []netip.AddrPort) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// relistSpread maps --relist-spread to kubezone.Config.RelistSpread, where
// zero means the default and a negative value no spread.
func relistSpread(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
