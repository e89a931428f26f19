package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/pkg/cache"
)

// The admin API's server: JSON over HTTP on a root-only unix socket,
// encoding the types of internal/adminapi. The CLI commands, through
// adminapi.Client, are its only intended client.

func (a *agent) adminMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+adminapi.PathStatus, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, a.status()) })
	mux.HandleFunc("GET "+adminapi.PathQuery, a.adminQuery)
	mux.HandleFunc("POST "+adminapi.PathReload, func(w http.ResponseWriter, _ *http.Request) {
		gen, err := a.reload("nodecache reload")
		rep := adminapi.Reload{Generation: gen}
		if err != nil {
			rep.Error = err.Error()
		}
		writeJSON(w, rep)
	})
	mux.HandleFunc("GET "+adminapi.PathUpstreams, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, a.upstreamRows()) })
	mux.HandleFunc("GET "+adminapi.PathCacheStats, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, a.cache.Stats()) })
	mux.HandleFunc("GET "+adminapi.PathCacheDump, func(w http.ResponseWriter, r *http.Request) {
		limit := atoiDefault(r.URL.Query().Get("limit"), 1000)
		var out []cache.EntryInfo
		a.cache.Dump(r.URL.Query().Get("filter"), func(e cache.EntryInfo) bool {
			out = append(out, e)
			return len(out) < limit
		})
		writeJSON(w, out)
	})
	mux.HandleFunc("POST "+adminapi.PathCacheFlush, a.adminFlush)
	mux.HandleFunc("GET "+adminapi.PathZoneList, func(w http.ResponseWriter, r *http.Request) {
		if a.hasZone(w) {
			writeJSON(w, a.zone.List(r.URL.Query().Get("namespace")))
		}
	})
	mux.HandleFunc("GET "+adminapi.PathZoneShow, func(w http.ResponseWriter, r *http.Request) {
		if a.hasZone(w) {
			writeJSON(w, zoneShow(a.zone.List(""), r.URL.Query().Get("name"), a.cfg.ClusterDomain))
		}
	})
	mux.HandleFunc("GET "+adminapi.PathTop, func(w http.ResponseWriter, r *http.Request) {
		rows, t := a.clients.snapshot(atoiDefault(r.URL.Query().Get("n"), 20), a.podName)
		writeJSON(w, adminapi.Top{Clients: rows, Totals: t, Time: time.Now()})
	})
	mux.HandleFunc("GET "+adminapi.PathTail, a.adminTail)
	mux.HandleFunc("GET "+adminapi.PathPod, a.adminPod)
	return mux
}

// adminFlush is POST /v1/cache/flush with exactly one of name=NAME,
// zone=SUFFIX or all=true; with none it flushes nothing and says so.
func (a *agent) adminFlush(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name, zone, all := q.Get("name"), q.Get("zone"), q.Get("all") == "true"
	set := 0
	for _, on := range []bool{name != "", zone != "", all} {
		if on {
			set++
		}
	}
	if set != 1 {
		http.Error(w, "flush: want exactly one of name=NAME, zone=SUFFIX or all=true", http.StatusBadRequest)
		return
	}
	rep := adminapi.Flush{All: all}
	if target := name + zone; !all {
		if _, ok := dns.IsDomainName(target); !ok {
			http.Error(w, fmt.Sprintf("flush: %q is not a domain name", target), http.StatusBadRequest)
			return
		}
	}
	switch {
	case name != "":
		rep.Name = dns.Fqdn(name)
		rep.Flushed = a.cache.Flush(rep.Name)
	case zone != "":
		rep.Zone = dns.Fqdn(zone)
		rep.Flushed = a.cache.FlushZone(rep.Zone)
	default:
		rep.Flushed = a.cache.FlushAll()
	}
	writeJSON(w, rep)
}

// adminPod is GET /v1/pod?ip=IP or ?name=NAMESPACE/NAME: one of this
// node's pods.
func (a *agent) adminPod(w http.ResponseWriter, r *http.Request) {
	if !a.hasZone(w) {
		return
	}
	if nsName := r.URL.Query().Get("name"); nsName != "" {
		ns, name, ok := strings.Cut(nsName, "/")
		if !ok {
			http.Error(w, "name: want NAMESPACE/NAME", http.StatusBadRequest)
			return
		}
		p, ok := a.zone.PodByName(ns, name)
		if !ok {
			http.Error(w, fmt.Sprintf("no pod %s on this node (%s): the agent knows its own node's pods", nsName, a.cfg.NodeName), http.StatusNotFound)
			return
		}
		writeJSON(w, p)
		return
	}
	ip, err := netip.ParseAddr(r.URL.Query().Get("ip"))
	if err != nil {
		http.Error(w, "want ip=IP or name=NAMESPACE/NAME", http.StatusBadRequest)
		return
	}
	p, ok := a.zone.PodByIP(ip)
	if !ok {
		http.Error(w, "no pod of this node has that IP", http.StatusNotFound)
		return
	}
	writeJSON(w, p)
}

// hasZone reports whether the agent serves a cluster zone, answering 404
// when it does not.
func (a *agent) hasZone(w http.ResponseWriter) bool {
	if a.zone == nil {
		http.Error(w, "this agent serves no cluster zone (no --kubeconfig, --fixture or in-cluster config)", http.StatusNotFound)
	}
	return a.zone != nil
}

func (a *agent) podName(ip netip.Addr) string {
	if a.zone == nil {
		return ""
	}
	if p, ok := a.zone.PodByIP(ip); ok && !p.Shared {
		return p.Namespace + "/" + p.Name
	}
	return ""
}

func (a *agent) status() adminapi.Status {
	st := adminapi.Status{
		Version: version, Uptime: time.Since(a.started).Round(time.Second).String(),
		Serving: a.server.Serving(), NotReady: a.readiness(), Interface: a.iface.Status(),
		Cache: a.cache.Stats(), Upstreams: a.upstreamRows(),
		Config: map[string]string{
			"local-ip": joinAddrs(a.addrs), "cluster-domain": a.cfg.ClusterDomain,
			"upstream": a.liveConfig().Upstream, "cache-size": a.cfg.CacheSize.String(),
			"health-addr": a.healthAddr(), "metrics-addr": a.metricsAddr(),
		},
	}
	for _, ad := range a.addrs {
		st.Listeners = append(st.Listeners, "udp+tcp "+ad.String())
	}
	if a.zone != nil {
		zs := a.zone.Stats()
		st.Zone = &zs
	}
	_, st.Totals = a.clients.snapshot(0, nil)
	st.ConfigGeneration = a.live.gen.Load()
	if e := a.live.lastErr.Load(); e != nil {
		st.ConfigError = *e
	}
	return st
}

func (a *agent) upstreamRows() []adminapi.Upstream {
	var rows []adminapi.Upstream
	for _, s := range a.forwarder.Status() {
		rows = append(rows, adminapi.Upstream{Addr: s.Addr.String(), Up: s.Up, ConsecutiveFails: s.ConsecutiveFails,
			LastRTTMillis: float64(s.LastRTT.Microseconds()) / 1000, Requests: s.Requests, Errors: s.Errors})
	}
	return rows
}

func (a *agent) adminQuery(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	typ := strings.ToUpper(r.URL.Query().Get("type"))
	if typ == "" {
		typ = "A"
	}
	qtype, ok := dns.StringToType[typ]
	if !ok || name == "" {
		http.Error(w, "want name=NAME and type=TYPE (A, AAAA, SRV, PTR, ...)", http.StatusBadRequest)
		return
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(1232, false)
	pkt, err := m.Pack()
	if err != nil {
		http.Error(w, "packing query: "+err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	out, res, err := a.server.Query(ctx, pkt, a.addrs[0].Addr())
	took := time.Since(start)
	if err != nil {
		http.Error(w, "query: "+err.Error(), http.StatusBadGateway)
		return
	}
	var reply dns.Msg
	if err := reply.Unpack(out); err != nil {
		http.Error(w, "unpacking reply: "+err.Error(), http.StatusBadGateway)
		return
	}
	qr := adminapi.Query{Name: dns.Fqdn(name), Type: typ, Rcode: dns.RcodeToString[reply.Rcode],
		Source: res.Source.String(), Micros: took.Microseconds(), Answer: []string{}}
	if res.Server.IsValid() {
		qr.Server = res.Server.String()
	}
	for _, rr := range reply.Answer {
		qr.Answer = append(qr.Answer, rr.String())
	}
	for _, rr := range reply.Ns {
		qr.Ns = append(qr.Ns, rr.String())
	}
	for _, rr := range reply.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			qr.Extra = append(qr.Extra, rr.String())
		}
	}
	var flags []string
	for _, f := range []struct {
		on   bool
		name string
	}{{reply.Authoritative, "aa"}, {reply.Truncated, "tc"}, {reply.RecursionDesired, "rd"}, {reply.RecursionAvailable, "ra"}} {
		if f.on {
			flags = append(flags, f.name)
		}
	}
	qr.Flags = strings.Join(flags, " ")
	writeJSON(w, qr)
}

// serveAdmin serves the admin API on the unix socket until ctx ends.
func (a *agent) serveAdmin(ctx context.Context) error {
	path := a.cfg.AdminSocket
	if path == "" {
		<-ctx.Done()
		return nil
	}
	ln, err := listenRootSocket(ctx, path, a.socketWait(), a.log)
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	// Requests live under ctx, so that a `tail` stream ends with the agent;
	// no write timeout, which would cut that stream (the peers are root).
	h := httpServer(a.adminMux(), 0)
	h.BaseContext = func(net.Listener) context.Context { return ctx }
	errc := make(chan error, 1)
	go func() { errc <- h.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = h.Shutdown(sctx)
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("admin api: %w", err)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func atoiDefault(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return n
	}
	return def
}
