package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"

	"github.com/nodecache/nodecache/internal/supervise"
	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/corednsmetrics"
	"github.com/nodecache/nodecache/pkg/iface"
	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/rewrite"
	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/static"
	"github.com/nodecache/nodecache/pkg/tap"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// Agent is `nodecache run`: it builds the components from a Config and
// runs them until its context ends. It holds the running components for
// the health checks and the admin API.
type Agent struct {
	cfg       *Config
	version   string // the build's version: logs, metrics, dnstap, the API server's user agent
	log       *slog.Logger
	reg       *prometheus.Registry
	started   time.Time
	addrs     []netip.AddrPort
	forwarder *upstream.Live  // the upstream forwarder; a config reload replaces it
	fcfg      upstream.Config // the live forwarder's config; guarded by live.mu after build
	live      *liveState      // config generation and reloads
	hup       chan os.Signal  // SIGHUP: reload the config; nil in tests
	cache     *cache.Cache
	zone      *kubezone.Zone    // nil without a zone source
	static    *static.Records   // the static records; never nil after build
	rewrites  *rewrite.Resolver // the rewrite rules; never nil after build
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
	sup          *supervise.Conn      // the supervisor's control socket; nil when unsupervised
	journal      *cache.Journal       // the cache journal the supervisor keeps; nil without one
	jfile        *os.File             // the inherited journal, until startJournal continues it
	jscan        cache.JournalScan    // what ScanJournal found in it
	jrestored    <-chan struct{}      // closed when its import ends
	jscanned     <-chan struct{}      // closed when restoreCache has returned (restoreBehind)
	gcDefault    func()               // applies the GC target after the start's (gc.go); nil: leave it
	keptSockets  bool                 // the listeners are the supervisor's: queries wait in them
	httpGuards   sync.Map             // health/metrics address -> *connGuard
	// downgradeRefused is the kube-dns ConfigMap's upstreamNameservers not
	// used, for the status; nil when none is refused (downgrade.go).
	downgradeRefused atomic.Pointer[[]netip.AddrPort]
}

// New returns an agent for cfg (from ParseConfig) that Run starts.
func New(cfg *Config, log *slog.Logger, version string) *Agent {
	return &Agent{cfg: cfg, log: log, version: version, reg: prometheus.NewRegistry(), started: time.Now(),
		addrs: listenAddrs(cfg.LocalIPs, uint16(cfg.Port)), clients: newClientStats(4096), tail: newTailHub(),
		handedOff: make(chan struct{}), pod: podState{dir: cfg.PodStateDir, uid: cfg.PodUID}}
}

// Run starts the components in order (zone, listeners, interface and rules,
// then the HTTP, admin and handover sockets), serves until ctx ends or a
// successor takes the sockets over, and shuts down in reverse. It returns
// once everything it started has stopped.
func (a *Agent) Run(ctx context.Context) error {
	cfg := a.cfg
	if successor, ok := a.pod.superseded(); ok {
		a.endStartGC(ctx, nil, nil) // nothing to start
		return a.idleSuperseded(ctx, successor)
	}
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.m = newAgentMetrics(a.reg, cfg.NodeName, a.version)
	a.registerSupervisorMetrics(a.reg)
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
	stopProbes, probesDone := a.startProbes(parent)
	defer stopProbes()
	ctx, a.stopEarly = context.WithCancel(ctx)
	defer a.stopEarly()
	defer a.forwarder.Close()
	defer a.cache.Close()
	if a.tap != nil {
		defer a.tap.Close()
	}

	defer a.iface.Close()

	g, gctx := errgroup.WithContext(ctx)
	if err := a.start(ctx, gctx, g); err != nil {
		return err
	}
	a.runBeside(gctx, g)
	a.publishServing()
	if a.journal != nil {
		defer a.journal.Close()
	}
	a.log.Info("nodecache serving", append(servingAttrs(a.addrs, a.fcfg, a.cfg, a.zone != nil),
		"startup", time.Since(a.started).Round(time.Millisecond))...)

	err := g.Wait()
	err = a.shutdown(err)
	if a.pod.enabled() && isHandedOff(a.handedOff) {
		a.idleAfterHandover(parent)
	}
	stopProbes()
	<-probesDone
	return err
}

// startProbes serves the probe socket until stop is called; done is closed
// once it has stopped.
func (a *Agent) startProbes(ctx context.Context) (stop context.CancelFunc, done <-chan struct{}) {
	a.probes.set(a.healthMux())
	probesDone := make(chan struct{})
	probeCtx, stop := context.WithCancel(ctx)
	go func() {
		defer close(probesDone)
		if err := a.serveProbes(probeCtx, &a.probes); err != nil {
			a.log.Error("probe socket unavailable: the kubelet's exec probes will fail", logkey.Err, err)
		}
	}()
	return stop, probesDone
}

// start brings the DNS path up in order: the zone's informers (in g),
// the listeners (a predecessor's or new), then the link, addresses and
// rules, each step only once the one before answers. On an error it stops
// what it started in g.
func (a *Agent) start(ctx, gctx context.Context, g *errgroup.Group) error {
	st := startTimes{begin: time.Now()}
	// The zone's list first: it waits on the API server while the rest
	// starts, and the zone's names that could be negative wait for it.
	if a.zone != nil {
		if err := a.startZone(gctx, g); err != nil {
			return err
		}
	}
	st.zoneStart = time.Now()
	restored := a.restoreBehind(gctx, g) // while the zone syncs and the sockets are read
	// Listeners first: inherited from a predecessor, or new.
	listeners, finish, err := a.acquireListeners(ctx)
	if err != nil {
		return errors.Join(err, a.abort(g))
	}
	st.listeners = time.Now()
	switch {
	case a.readsBeforeZone():
		// Queries wait in the supervisor's sockets: read them now, and
		// hold only what the zone cannot answer yet.
		a.holdZone(gctx)
	case finish != nil:
		// The predecessor serves until we read the sockets: start only
		// once the zone answers, so the switch costs no SERVFAIL.
		a.waitZoneSynced(ctx, a.cfg.HandoverWait)
	}
	st.zone = time.Now()
	if !closed(restored) {
		// Queries that miss wait for the journal's scan and import; the
		// rest are answered now.
		a.server.HoldMisses(restored, journalImportWait)
	}
	if err := a.server.Serve(listeners); err != nil {
		listeners.Close()
		return errors.Join(err, a.abort(g))
	}
	a.logRestart(st, restored)
	a.endStartGC(gctx, g, restored)
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
	if err := a.selfCheck(ctx, a.cfg.SetupInterface); err != nil {
		a.log.Warn("listeners do not answer on their addresses yet", logkey.Err, err)
	}
	return nil
}

// runBeside starts in g what runs beside the DNS path once it serves: the
// interface reconciler, the static-file and config watches, the health and
// metrics listeners, the admin API and the handover socket.
func (a *Agent) runBeside(ctx context.Context, g *errgroup.Group) {
	g.Go(func() error { return a.iface.Run(ctx) })
	g.Go(func() error { return a.static.Run(ctx) })
	g.Go(func() error { return a.watchConfig(ctx, a.hup) })
	g.Go(func() error { return a.serveHTTP(ctx) })
	// The admin API and the handover socket are conveniences: if their
	// directory is not writable, say so once and keep serving DNS.
	g.Go(func() error {
		if err := a.serveAdmin(ctx); err != nil {
			a.log.Error("admin API unavailable; DNS keeps serving", logkey.Err, err)
		}
		return nil
	})
	g.Go(func() error {
		err := a.serveHandover(ctx)
		if err != nil && !errors.Is(err, errHandedOver) {
			a.log.Error("handover socket unavailable: the next upgrade will start cold; DNS keeps serving", logkey.Err, err)
			return nil
		}
		return err
	})
}

// build constructs the forwarder, cache, zone, server and interface manager.
func (a *Agent) build() error {
	cfg, log := a.cfg, a.log
	// What `nodecache check-config` checks, with the same code: a config
	// it accepts gets this far, one it refuses stops here alike.
	if err := loadConfig(cfg, CheckOptions{}); err != nil {
		return cfg.locate(err)
	}
	if err := a.buildTap(); err != nil {
		return err
	}
	ql, err := newQueryLog(&cfg.QueryLog, log.With(logkey.Component, "querylog"))
	if err != nil {
		return err
	}
	fcfg, stubs, err := upstreamConfig(cfg, a.addrs, a.upstreamTap())
	if err != nil {
		return err
	}
	fwd, err := upstream.New(fcfg, replacingRegisterer{a.reg}, log.With(logkey.Component, "upstream"))
	if err != nil {
		return fmt.Errorf("upstreams: %w", err)
	}
	a.fcfg = fcfg
	a.forwarder = upstream.NewLive(fwd)
	a.noteDowngrade(cfg, stubs.refusedUps)
	a.cache, err = cache.New(cacheConfig(cfg, stubs.limits), a.forwarder, a.reg, log.With(logkey.Component, "cache"))
	if err != nil {
		_ = a.forwarder.Close()
		return fmt.Errorf("cache: %w", err)
	}
	var zone server.Zone
	if zoneSource(cfg) {
		if note := podAccessNote(cfg); note != "" {
			log.Warn(note)
		}
		a.zone, err = kubezone.New(zoneConfig(cfg), a.reg, log) // kubezone names itself in its log lines
		if err != nil {
			return fmt.Errorf("cluster zone: %w", err)
		}
		zone = zoneAdapter{a.zone}
	}
	resolver, err := a.localResolver(a.cache, zone) // the cache asks a.forwarder on a miss
	if err != nil {
		return err
	}
	obs := observers{a.tail}
	if ql != nil {
		obs = append(obs, ql)
	}
	deps := server.Deps{Zone: zone, Resolver: resolver, Observer: obs, Counter: a.clients}
	if a.tap != nil {
		deps.Tap = a.tap
	}
	if a.zone != nil {
		deps.Pods = podsAdapter{a.zone}
	}
	stubNames := stubDomainNames(stubs)
	a.reg.MustRegister(newCorednsCacheCollector(a.cache, corednsServers(a.addrs), a.pluginZones(stubNames)))
	a.server, err = server.New(serverConfig(cfg, a.addrs, stubNames), deps, a.reg, log.With(logkey.Component, "server"))
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	a.iface, err = iface.New(a.ifaceConfig(), a.reg, log.With(logkey.Component, "iface"))
	if err != nil {
		return fmt.Errorf("interface: %w", err)
	}
	if !cfg.SetupInterface && !cfg.SetupIPTables {
		log.Info("not touching the host: --setup-interface=false --setup-iptables=false")
	}
	dropNetRaw(a.iface.Status().Rules.Backend, log)
	return nil
}

// corednsServers are the server label values of the CoreDNS-compatible
// metrics: one per listen address.
func corednsServers(addrs []netip.AddrPort) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = corednsmetrics.ServerLabel(a)
	}
	return out
}

// pluginZones says, for coredns_plugin_enabled, which CoreDNS plugins do
// the jobs nodecache does in each zone.
func (a *Agent) pluginZones(stubs []string) map[string][]string {
	forwarding := []string{corednsmetrics.PluginCache, corednsmetrics.PluginForward, corednsmetrics.PluginPrometheus}
	z := map[string][]string{".": forwarding}
	for _, s := range stubs {
		z[dns.Fqdn(strings.ToLower(s))] = forwarding
	}
	if a.zone != nil {
		names := []string{corednsmetrics.PluginKubernetes, corednsmetrics.PluginPrometheus}
		if autopathOn(a.cfg) {
			names = append(names, corednsmetrics.PluginAutopath)
		}
		z[dns.Fqdn(strings.ToLower(a.cfg.ClusterDomain))] = names
	}
	return z
}

// buildTap starts the dnstap output when --dnstap asks for one.
func (a *Agent) buildTap() error {
	if a.cfg.Dnstap == "" {
		return nil
	}
	hostname, _ := os.Hostname()
	t, err := tap.New(tapConfig(a.cfg, a.version, hostname), a.reg, a.log.With(logkey.Component, "dnstap"))
	if err != nil {
		return fmt.Errorf("--dnstap: %w", err)
	}
	a.tap = t
	return nil
}

// upstreamTap is the forwarder's dnstap hook: nil (an untyped nil, not a
// nil *tap.Tap) without --dnstap.
func (a *Agent) upstreamTap() upstream.Tap {
	if a.tap == nil {
		return nil
	}
	return a.tap
}

func (a *Agent) healthAddr() string  { return a.cfg.healthAddr() }
func (a *Agent) metricsAddr() string { return a.cfg.metricsAddr() }

// InCluster reports whether the process runs in a pod with the API
// server's address in its environment.
func InCluster() bool {
	return os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != ""
}

func joinAddrs(addrs []netip.AddrPort) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}
