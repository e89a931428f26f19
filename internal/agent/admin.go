package agent

import (
	"context"
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
	"github.com/nodecache/nodecache/pkg/kubezone"
)

// The admin API's server: adminapi.NewHandler over adminAgent, on a
// root-only unix socket. The CLI commands, through adminapi.Client, are its
// only intended client.

// adminAgent is the agent as the admin API sees it.
type adminAgent struct{ *Agent }

var _ adminapi.Agent = adminAgent{}

func (a adminAgent) Status() adminapi.Status        { return a.status() }
func (a adminAgent) Upstreams() []adminapi.Upstream { return a.upstreamRows() }
func (a adminAgent) CacheStats() cache.Stats        { return a.cache.Stats() }

func (a adminAgent) Reload() adminapi.Reload {
	gen, err := a.reload("nodecache reload")
	rep := adminapi.Reload{Generation: gen}
	if err != nil {
		rep.Error = err.Error()
	}
	return rep
}

func (a adminAgent) CacheDump(filter string, limit int) []cache.EntryInfo {
	var out []cache.EntryInfo
	a.cache.Dump(filter, func(e cache.EntryInfo) bool {
		out = append(out, e)
		return len(out) < limit
	})
	return out
}

func (a adminAgent) CacheFlush(s adminapi.FlushScope) adminapi.Flush {
	rep := adminapi.Flush{Name: s.Name, Zone: s.Zone, All: s.All}
	switch {
	case s.Name != "":
		rep.Flushed = a.cache.Flush(s.Name)
	case s.Zone != "":
		rep.Flushed = a.cache.FlushZone(s.Zone)
	default:
		rep.Flushed = a.cache.FlushAll()
	}
	return rep
}

func (a adminAgent) ZoneList(ns string) ([]kubezone.Record, error) {
	if err := a.noZone(); err != nil {
		return nil, err
	}
	return a.zone.List(ns), nil
}

func (a adminAgent) ZoneShow(name string) ([]kubezone.Record, error) {
	if err := a.noZone(); err != nil {
		return nil, err
	}
	return zoneShow(a.zone.List(""), name, a.cfg.ClusterDomain), nil
}

func (a adminAgent) PodByName(ns, name string) (kubezone.PodInfo, error) {
	if err := a.noZone(); err != nil {
		return kubezone.PodInfo{}, err
	}
	p, ok := a.zone.PodByName(ns, name)
	switch {
	case !ok && !a.cfg.WatchPods:
		return p, adminapi.Errorf(http.StatusNotFound, "no pod %s/%s known: the agent watches no pods (--watch-pods=false); "+
			"give the pod's resolv.conf with --resolv-conf instead", ns, name)
	case !ok:
		return p, adminapi.Errorf(http.StatusNotFound, "no pod %s/%s on this node (%s): the agent knows its own node's pods", ns, name, a.cfg.NodeName)
	}
	return p, nil
}

func (a adminAgent) PodByIP(ip netip.Addr) (kubezone.PodInfo, error) {
	if err := a.noZone(); err != nil {
		return kubezone.PodInfo{}, err
	}
	p, ok := a.zone.PodByIP(ip)
	if !ok {
		if !a.cfg.WatchPods {
			return p, adminapi.Errorf(http.StatusNotFound, "no pod known by IP: the agent watches no pods (--watch-pods=false)")
		}
		return p, adminapi.Errorf(http.StatusNotFound, "no pod of this node has that IP")
	}
	return p, nil
}

func (a adminAgent) Top(n int) adminapi.Top {
	rows, t := a.clients.snapshot(n, a.podName)
	return adminapi.Top{Clients: rows, Totals: t, Time: time.Now()}
}

func (a adminAgent) ServeTail(w http.ResponseWriter, r *http.Request) { a.adminTail(w, r) }

// noZone is the error of a call that needs the cluster zone when the
// agent serves none; nil when it serves one.
func (a adminAgent) noZone() error {
	if a.zone == nil {
		return adminapi.Errorf(http.StatusNotFound, "this agent serves no cluster zone (no --kubeconfig, --fixture or in-cluster config)")
	}
	return nil
}

// Query packs name and qtype into a query, runs it through the server as
// a client on the first listen address would, and describes the reply.
func (a adminAgent) Query(ctx context.Context, name string, qtype uint16) (adminapi.Query, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(1232, false)
	pkt, err := m.Pack()
	if err != nil {
		return adminapi.Query{}, adminapi.Errorf(http.StatusBadRequest, "packing query: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	out, res, err := a.server.Query(ctx, pkt, a.addrs[0].Addr())
	took := time.Since(start)
	if err != nil {
		return adminapi.Query{}, fmt.Errorf("query: %w", err)
	}
	var reply dns.Msg
	if err := reply.Unpack(out); err != nil {
		return adminapi.Query{}, fmt.Errorf("unpacking reply: %w", err)
	}
	qr := adminapi.Query{Name: name, Type: dns.TypeToString[qtype], Rcode: dns.RcodeToString[reply.Rcode],
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
	return qr, nil
}

func (a *Agent) podName(ip netip.Addr) string {
	if a.zone == nil {
		return ""
	}
	if p, ok := a.zone.PodByIP(ip); ok && !p.Shared {
		return p.Namespace + "/" + p.Name
	}
	return ""
}

func (a *Agent) status() adminapi.Status {
	st := adminapi.Status{
		Version: a.version, Uptime: time.Since(a.started).Round(time.Second).String(),
		Serving: a.server.Serving(), NotReady: a.readiness(), Interface: a.iface.Status(),
		Cache: a.cache.Stats(), Upstreams: a.upstreamRows(), Supervisor: a.supervisorStatus(),
		Config: map[string]string{
			"local-ip": joinAddrs(a.addrs), "cluster-domain": a.cfg.ClusterDomain,
			"upstream": a.liveConfig().Upstream, "cache-size": a.cfg.CacheSize.String(),
			"health-addr": a.healthAddr(), "metrics-addr": a.metricsAddr(),
			"accept-interfaces": commaListFlag{&a.cfg.AcceptInterfaces}.String(),
			"accept-sources":    prefixListFlag{&a.cfg.AcceptSources}.String(),
			"watch-pods":        strconv.FormatBool(a.cfg.WatchPods),
			"loadbalance":       strconv.FormatBool(a.cfg.LoadBalance),
			"suppress-aaaa":     commaListFlag{&a.cfg.SuppressAAAA}.String(),
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
	if p := a.downgradeRefused.Load(); p != nil {
		for _, ad := range *p {
			st.DowngradeRefused = append(st.DowngradeRefused, ad.String())
		}
	}
	if e := a.live.lastErr.Load(); e != nil {
		st.ConfigError = *e
	}
	return st
}

func (a *Agent) upstreamRows() []adminapi.Upstream {
	var rows []adminapi.Upstream
	for _, s := range a.forwarder.Status() {
		rows = append(rows, adminapi.Upstream{Addr: s.Addr.String(), Up: s.Up, ConsecutiveFails: s.ConsecutiveFails,
			LastRTTMillis: float64(s.LastRTT.Microseconds()) / 1000, Requests: s.Requests, Errors: s.Errors})
	}
	return rows
}

// serveAdmin serves the admin API on the unix socket until ctx ends.
func (a *Agent) serveAdmin(ctx context.Context) error {
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
	h := httpServer(adminapi.NewHandler(adminAgent{a}), 0)
	h.BaseContext = func(net.Listener) context.Context { return ctx }
	if err := serveUntil(ctx, h, ln, 2*time.Second); err != nil {
		return fmt.Errorf("admin api: %w", err)
	}
	return nil
}

// zoneShow returns the records of recs owned by name or by names below it,
// for /v1/zone/show. name may be short: "web.demo" means the service
// web.demo.svc.<domain>, and an IP address means its reverse name.
func zoneShow(recs []kubezone.Record, name, domain string) []kubezone.Record {
	name = strings.ToLower(dns.Fqdn(name))
	domain = strings.ToLower(dns.Fqdn(domain))
	if ip, err := netip.ParseAddr(strings.TrimSuffix(name, ".")); err == nil {
		name, _ = dns.ReverseAddr(ip.String())
	} else if !dns.IsSubDomain(domain, name) && dns.CountLabel(name) == 2 {
		name += "svc." + domain
	}
	out := []kubezone.Record{}
	for _, r := range recs {
		if dns.IsSubDomain(name, strings.ToLower(r.Name)) {
			out = append(out, r)
		}
	}
	return out
}
