package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// selfCheck asks the agent's own listeners a question: through the server
// in-process, and, when overNetwork, over real UDP to every local address.
func (a *Agent) selfCheck(ctx context.Context, overNetwork bool) error {
	m := a.probeQuery()
	pkt, err := m.Pack()
	if err != nil {
		return err
	}
	if _, _, err := a.server.Query(ctx, pkt, a.addrs[0].Addr()); err != nil {
		return fmt.Errorf("in-process query: %w", err)
	}
	if !overNetwork {
		return nil
	}
	var errs []error
	for _, addr := range a.addrs {
		if err := a.udpProbe(ctx, addr.String(), m); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// probeQuery is a question the agent answers itself, without an upstream:
// the zone's version record, or the RFC 8482 answer to ANY without a zone.
func (a *Agent) probeQuery() *dns.Msg {
	m := new(dns.Msg)
	if a.zone != nil {
		m.SetQuestion("dns-version."+dns.Fqdn(a.cfg.ClusterDomain), dns.TypeTXT)
	} else {
		m.SetQuestion("nodecache.health.", dns.TypeANY)
	}
	return m
}

func (a *Agent) udpProbe(ctx context.Context, addr string, m *dns.Msg) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	r, _, err := (&dns.Client{Net: "udp", Timeout: time.Second}).ExchangeContext(ctx, m, addr)
	if err != nil {
		return fmt.Errorf("query to %s: %w", addr, err)
	}
	if r.Id != m.Id {
		return fmt.Errorf("query to %s: reply ID %d, want %d", addr, r.Id, m.Id)
	}
	return nil
}

// zoneAnswers reports whether the zone can answer: synced from the API
// server, or loaded from a snapshot, not past its maximum age, while it is
// unreachable.
func (a *Agent) zoneAnswers() bool {
	return a.zone.Synced() || a.zone.Source() == "snapshot" && a.zone.SnapshotProblem() == ""
}

// readiness lists the checks that fail; empty means ready.
func (a *Agent) readiness() []string {
	var failing []string
	if !a.server.Serving() {
		failing = append(failing, "listeners: not serving")
	}
	if a.zone != nil && !a.zoneAnswers() {
		why := "no snapshot loaded (source " + a.zone.Source() + ")"
		if p := a.zone.SnapshotProblem(); p != "" {
			why = p
		}
		failing = append(failing, "zone: not synced and "+why)
	}
	if !a.forwarder.Healthy() {
		failing = append(failing, "upstreams: every upstream is marked down")
	}
	if why := a.crashLoop(); why != "" {
		failing = append(failing, why)
	}
	return failing
}

func (a *Agent) healthMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		// In-process first: on the host network a surge pod shares the
		// sockets, so only this check is sure to be this process's.
		if err := a.selfCheck(r.Context(), false); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if err := a.udpProbe(r.Context(), a.addrs[0].String(), a.probeQuery()); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok: listener answered")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if failing := a.readiness(); len(failing) > 0 {
			http.Error(w, "not ready:\n"+strings.Join(failing, "\n"), http.StatusServiceUnavailable)
			return
		}
		src := "none"
		if a.zone != nil {
			src = a.zone.Source()
		}
		fmt.Fprintf(w, "ready: listeners serving, zone source %s, upstream healthy\n", src)
	})
	return mux
}

// httpGuardOpen is the number of health and metrics connections held.
func (a *Agent) httpGuardOpen() int {
	n := 0
	a.httpGuards.Range(func(_, g any) bool { n += g.(*connGuard).open(); return true })
	return n
}

// serveHTTP runs the health and metrics listeners (one when they share an
// address), and with --pprof the profiles' own, until ctx ends.
func (a *Agent) serveHTTP(ctx context.Context) error {
	health := a.healthMux()
	metrics := promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{Registry: a.reg})
	servers := map[string]*http.ServeMux{}
	servers[a.healthAddr()] = health
	metricsMux := health
	if a.metricsAddr() != a.healthAddr() {
		metricsMux = http.NewServeMux()
		servers[a.metricsAddr()] = metricsMux
	}
	metricsMux.Handle("/metrics", metrics)
	var pprofMux *http.ServeMux
	if a.cfg.Pprof { // validatePprofAddr: an address of its own
		pprofMux = http.NewServeMux()
		handlePprof(pprofMux)
		servers[a.cfg.PprofAddr] = pprofMux
	}
	errc := make(chan error, len(servers))
	var hs []*http.Server
	for addr, mux := range servers {
		lc := net.ListenConfig{Control: reuseAddrPort}
		ln, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			for _, h := range hs {
				_ = h.Close()
			}
			return fmt.Errorf("listening for http on %s: %w", addr, err)
		}
		write := httpWriteTimeout
		if mux == pprofMux {
			write = 65 * time.Second // /debug/pprof/profile?seconds=60
		}
		h := httpServer(mux, write)
		g := newConnGuard(httpMaxConns, httpMaxConnsPerClient, a.m.httpRefused)
		a.httpGuards.Store(addr, g)
		ln = g.guard(ln, h)
		hs = append(hs, h)
		go func() { errc <- h.Serve(ln) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, h := range hs {
		_ = h.Shutdown(sctx)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	return nil
}
