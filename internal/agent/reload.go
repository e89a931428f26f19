package agent

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// Live configuration: the --config file and the kube-dns ConfigMap
// directory are checked every --config-check-interval, and SIGHUP and
// `nodecache reload` (POST /v1/reload) reload at once. A reload parses
// the command line and the files again, builds everything it would
// change, and only then swaps it in: upstreams and stub domains (a new
// forwarder), static records, rewrite rules and TTL caps. Anything wrong
// refuses the reload whole; the running config keeps serving, the log
// and nodecache_config_reloads_total{result="refused"} say why, and the
// generation (status, nodecache_config_generation) does not move.
// Settings that need sockets or kernel state (listeners, interface, cache
// size, ...) are logged as needing a restart and left as they are.

// liveFields are the Config fields a reload applies.
var liveFields = map[string]bool{ //nolint:gochecknoglobals // constant set
	"Upstream": true, "StubDomains": true, "KubeDNSConfig": true, "UpstreamPolicy": true,
	"UpstreamTimeout": true, "UpstreamForceTCP": true, "UpstreamDeadline": true, "MaxUpstreamInFlight": true,
	"StaticRecords": true, "StaticFiles": true, "StaticTTL": true, "StaticNoReverse": true,
	"RewriteNames": true, "UpstreamTLSCA": true, "MaxTTL": true, "MaxNegativeTTL": true, "ConfigCheckInterval": true,
}

// replacingRegisterer registers collectors, replacing one already
// registered under the same name: a reloaded forwarder's metrics take
// over from its predecessor's (their counters restart from zero).
type replacingRegisterer struct{ reg *prometheus.Registry }

func (r replacingRegisterer) Register(c prometheus.Collector) error {
	err := r.reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		r.reg.Unregister(are.ExistingCollector)
		return r.reg.Register(c)
	}
	return err
}

func (r replacingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r replacingRegisterer) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// liveState is the config generation and what the last reload said.
type liveState struct {
	mu      sync.Mutex             // serialises reloads; guards following
	cfg     *Config                // the config live now
	stamp   [sha256.Size]byte      // the watched files at the last reload attempt
	gen     atomic.Uint64          // 1 at start, +1 per applied reload
	lastErr atomic.Pointer[string] // the last refusal; nil after a success
	genG    prometheus.Gauge       // nodecache_config_generation
	reloads *prometheus.CounterVec // nodecache_config_reloads_total{result}
}

func newLiveState(cfg *Config, reg prometheus.Registerer) *liveState {
	s := &liveState{cfg: cfg,
		genG: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nodecache_config_generation",
			Help: "Generation of the live config: 1 at start, +1 for each reload applied."}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodecache_config_reloads_total",
			Help: "Config reloads by result: applied, or refused (the running config kept serving)."}, []string{"result"}),
	}
	s.gen.Store(1)
	s.genG.Set(1)
	s.stamp = watchedStamp(cfg)
	reg.MustRegister(s.genG, s.reloads)
	return s
}

// watchedStamp hashes the --config file and the kube-dns ConfigMap's
// files (ConfigMap volumes swap a symlink; reading follows it).
func watchedStamp(cfg *Config) [sha256.Size]byte {
	h := sha256.New()
	paths := []string{cfg.ConfigFile}
	if cfg.KubeDNSConfig != "" {
		paths = append(paths, filepath.Join(cfg.KubeDNSConfig, "stubDomains"), filepath.Join(cfg.KubeDNSConfig, "upstreamNameservers"))
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			data = []byte("unreadable: " + err.Error())
		}
		fmt.Fprintf(h, "%s %d\n", p, len(data))
		h.Write(data)
	}
	var out [sha256.Size]byte
	copy(out[:], h.Sum(nil))
	return out
}

// reload parses the config again and applies it, or refuses it whole.
func (a *Agent) reload(why string) (uint64, error) {
	s := a.live
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg, err := ParseConfig(a.cfg.args)
	defer func() { s.stamp = watchedStamp(s.cfg) }()
	if err == nil {
		err = a.applyLive(cfg)
	}
	if err != nil {
		msg := err.Error()
		s.lastErr.Store(&msg)
		s.reloads.WithLabelValues("refused").Inc()
		if errors.Is(err, errKubeDNSConfig) {
			a.iface.CountConfigMapError()
		}
		a.log.Error("config reload refused; the running config keeps serving", "trigger", why, logkey.Err, err,
			logkey.Generation, s.gen.Load())
		return s.gen.Load(), err
	}
	restart := restartOnly(s.cfg, cfg)
	s.cfg = cfg
	gen := s.gen.Add(1)
	s.genG.Set(float64(gen))
	s.lastErr.Store(nil)
	s.reloads.WithLabelValues("applied").Inc()
	a.log.Info("config reloaded", "trigger", why, logkey.Generation, gen)
	if len(restart) > 0 {
		a.log.Warn("these settings changed but apply only when the agent restarts", "settings", restart)
	}
	return gen, nil
}

// liveConfig is the config live now.
func (a *Agent) liveConfig() *Config {
	a.live.mu.Lock()
	defer a.live.mu.Unlock()
	return a.live.cfg
}

// restartOnly lists the fields that differ between two configs and that
// a reload does not apply.
func restartOnly(old, cur *Config) []string {
	var out []string
	ov, cv := reflect.ValueOf(old).Elem(), reflect.ValueOf(cur).Elem()
	for i := 0; i < ov.NumField(); i++ {
		f := ov.Type().Field(i)
		if !f.IsExported() || liveFields[f.Name] {
			continue
		}
		if !reflect.DeepEqual(ov.Field(i).Interface(), cv.Field(i).Interface()) {
			out = append(out, f.Name)
		}
	}
	sort.Strings(out)
	return out
}

// applyLive builds everything cfg changes, then swaps it in. Whatever
// can fail runs before the first swap.
func (a *Agent) applyLive(cfg *Config) error {
	fcfg, stubs, err := upstreamConfig(cfg, a.addrs, a.upstreamTap())
	if err != nil {
		return err
	}
	limits := zoneLimitsFor(cfg, stubs)
	if err := (&cache.Config{ZoneLimits: limits}).Validate(); err != nil {
		return err
	}
	rules, err := parseRewrites(cfg.RewriteNames)
	if err != nil {
		return err
	}
	commitStatic, err := a.static.Prepare(staticConfig(cfg))
	if err != nil {
		return fmt.Errorf("--static-record/--static-file: %w", err)
	}
	var fwd *upstream.Forwarder
	if !reflect.DeepEqual(fcfg, a.fcfg) { // a new forwarder only when it changes: it starts cold
		if fwd, err = upstream.New(fcfg, replacingRegisterer{a.reg}, a.log.With(logkey.Component, "upstream")); err != nil {
			return fmt.Errorf("upstreams: %w", err)
		}
	}
	// Nothing below fails.
	if fwd != nil {
		a.forwarder.Swap(fwd)
		a.fcfg = fcfg
	}
	if err := a.server.SetStubDomains(stubDomainNames(stubs)); err != nil { // the forwarder took them: they pack
		a.log.Error("routing stub domains below the cluster domain", logkey.Err, err)
	}
	a.noteDowngrade(cfg, stubs.refusedUps)
	commitStatic()
	a.rewrites.SetRules(rules)
	if err := a.cache.SetZoneLimits(limits); err != nil { // validated above
		a.log.Error("setting TTL caps", logkey.Err, err)
	}
	return nil
}

// watchConfig reloads when the watched files change, and on SIGHUP.
func (a *Agent) watchConfig(ctx context.Context, hup <-chan os.Signal) error {
	var tick <-chan time.Time
	if every := a.cfg.ConfigCheckInterval; every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			_, _ = a.reload("SIGHUP")
		case <-tick:
			a.live.mu.Lock()
			changed := watchedStamp(a.live.cfg) != a.live.stamp
			a.live.mu.Unlock()
			if changed {
				_, _ = a.reload("a watched file changed")
			}
		}
	}
}
