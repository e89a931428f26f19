package upstream

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/wire"
)

// maxProbeBackoff is how many times ProbeInterval the wait between probes
// of a down server may grow to.
const maxProbeBackoff = 30

// server is one upstream resolver, shared by every set that lists it.
type server struct {
	addr    netip.AddrPort // always valid
	tls     *tls.Config    // DNS over TLS; nil for UDP and TCP
	udpAddr *net.UDPAddr   // addr, converted once
	tcp     *tcpPool       // always non-nil
	// dotSlots bounds the DNS over TLS connections to the server, open or
	// in use (dotMaxConns); nil for UDP and TCP servers.
	dotSlots chan struct{}
	udp      *udpPool // always non-nil
	maxUses  int      // queries per pooled UDP socket (udpMaxUses)
	m        serverMetrics
	cm       *upstreamSeries // the CoreDNS-compatible series
	// tcpProbe probes the server over TCP when down: it is in a set that
	// sends over TCP only. Written by newForwarder before any goroutine.
	tcpProbe bool

	fails    atomic.Int64 // consecutive failed attempts
	down     atomic.Bool  // marked down after FailThreshold fails
	probing  atomic.Bool  // a probe goroutine runs for this server
	lastRTT  atomic.Int64 // nanoseconds of the last successful attempt
	requests atomic.Uint64
	errors   atomic.Uint64

	cases caseState // what it showed of echoing a query's random case (case.go)
}

func newServer(addr netip.AddrPort, cfg *Config, m *metrics) *server {
	tcp := newConnPool[net.Conn](cfg.TCPMaxIdle)
	var slots chan struct{}
	if cfg.TLS[addr] != nil {
		tcp, slots = newConnPool[net.Conn](dotMaxConns), make(chan struct{}, dotMaxConns)
	}
	return &server{
		addr:     addr,
		udpAddr:  net.UDPAddrFromAddrPort(addr),
		dotSlots: slots,
		tcp:      tcp,
		udp:      newConnPool[*udpSock](min(udpMaxIdle, cfg.MaxInFlight)),
		maxUses:  cmp.Or(cfg.udpMaxUses, udpMaxUses),
		m:        m.forServer(addr.String()),
		cm:       m.coredns.forServer(addr.String()),
		tls:      tlsFor(cfg, addr),
	}
}

func tlsFor(cfg *Config, addr netip.AddrPort) *tls.Config {
	if t := cfg.TLS[addr]; t != nil {
		t = t.Clone()
		t.ClientSessionCache = tls.NewLRUClientSessionCache(8) // resumption on reconnect
		return t
	}
	return nil
}

// countRequest counts an attempt on proto; health probes are not counted.
func (s *server) countRequest(proto string, probe bool) {
	if probe {
		return
	}
	s.requests.Add(1)
	s.cm.attempt()
	if proto == protoTCP {
		s.m.reqTCP.Inc()
		return
	}
	s.m.reqUDP.Inc()
}

func (s *server) countError(kind string) {
	s.errors.Add(1)
	s.m.errs[kind].Inc()
}

// ServerStatus is a snapshot of one upstream server for the CLI and readyz.
type ServerStatus struct {
	Addr             netip.AddrPort
	Up               bool
	ConsecutiveFails int64
	LastRTT          time.Duration // zero until the first success
	Requests         uint64        // attempts sent, UDP and TCP, health probes not included
	Errors           uint64        // failures and ignored replies of every kind
}

func (s *server) status() ServerStatus {
	return ServerStatus{
		Addr:             s.addr,
		Up:               !s.down.Load(),
		ConsecutiveFails: s.fails.Load(),
		LastRTT:          time.Duration(s.lastRTT.Load()),
		Requests:         s.requests.Load(),
		Errors:           s.errors.Load(),
	}
}

// serverSet is the ordered servers of the default set or of a stub domain.
type serverSet struct {
	servers []*server           // non-empty, in configured order
	next    atomic.Uint64       // round_robin rotation
	opts    StubOptions         // a stub domain's own settings; zero for the default set
	sem     *semaphore.Weighted // opts.MaxInFlight; nil without one
}

// order appends the servers to dst in the order policy gives, then moves
// down servers behind the up ones, keeping their relative order.
func (ss *serverSet) order(dst []*server, policy Policy) []*server {
	n := len(ss.servers)
	switch policy {
	case PolicySequential:
		dst = append(dst, ss.servers...)
	case PolicyRoundRobin:
		start := int((ss.next.Add(1) - 1) % uint64(n))
		dst = append(dst, ss.servers[start:]...)
		dst = append(dst, ss.servers[:start]...)
	default:
		dst = append(dst, ss.servers...)
		rand.Shuffle(n, func(i, j int) { dst[i], dst[j] = dst[j], dst[i] })
	}
	// Stable insertion sort on the down flag; sets are a handful long.
	for i := 1; i < len(dst); i++ {
		for j := i; j > 0 && dst[j-1].down.Load() && !dst[j].down.Load(); j-- {
			dst[j-1], dst[j] = dst[j], dst[j-1]
		}
	}
	return dst
}

// recordSuccess notes a valid reply with rcode from s after rtt.
func (f *Forwarder) recordSuccess(s *server, rcode int, rtt time.Duration) {
	s.cm.reply(rcode, rtt)
	s.m.duration.Observe(rtt.Seconds())
	f.markHealthy(s, rtt)
}

// markHealthy notes that s answered after rtt: a query or a probe.
func (f *Forwarder) markHealthy(s *server, rtt time.Duration) {
	s.fails.Store(0)
	s.lastRTT.Store(int64(rtt))
	f.markUp(s)
}

// recordFailure notes a failed attempt at s and marks it down after
// FailThreshold consecutive health failures.
func (f *Forwarder) recordFailure(s *server, kind string) {
	s.countError(kind)
	if !healthFailure(kind) {
		return
	}
	if s.fails.Add(1) < int64(f.cfg.FailThreshold) {
		return
	}
	if s.down.CompareAndSwap(false, true) {
		s.m.healthy.Set(healthyGaugeDown)
		if f.allDown() {
			f.m.coredns.hcBroken.Inc()
		}
		f.log.Warn("upstream marked down", "server", s.addr, "consecutive_fails", s.fails.Load(), "kind", kind)
		f.notify(s, false)
	}
	f.startProbe(s)
}

func (f *Forwarder) markUp(s *server) {
	if s.down.CompareAndSwap(true, false) {
		s.m.healthy.Set(healthyGaugeUp)
		f.log.Info("upstream back up", "server", s.addr)
		f.notify(s, true)
	}
}

func (f *Forwarder) notify(s *server, up bool) {
	if f.hooks.healthChanged != nil {
		f.hooks.healthChanged(s.addr, up)
	}
}

// startProbe starts the probe goroutine of s unless one runs or the
// Forwarder is closing. At most one probe per server is ever in flight.
func (f *Forwarder) startProbe(s *server) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || !s.probing.CompareAndSwap(false, true) {
		return
	}
	f.wg.Add(1)
	go f.probeLoop(s)
}

// probeLoop probes a down server with ". NS" queries, backing off, until
// it answers, a real query brings it back, or the Forwarder closes.
func (f *Forwarder) probeLoop(s *server) {
	defer func() {
		s.probing.Store(false)
		// A failure may have marked it down again while we were leaving.
		if s.down.Load() && f.ctx.Err() == nil {
			f.startProbe(s)
		}
		f.wg.Done()
	}()
	wait := f.cfg.ProbeInterval
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-timer.C:
		}
		if !s.down.Load() {
			return
		}
		if err := f.probe(s); err == nil {
			return
		}
		wait = min(2*wait, maxProbeBackoff*f.cfg.ProbeInterval)
		timer.Reset(wait)
	}
}

// probe sends one ". NS" query to s over UDP (TCP for a DNS over TLS or
// TCP-only server). Any valid reply, whatever
// its rcode, brings the server back up.
func (f *Forwarder) probe(s *server) error {
	q := dns.Question{Name: ".", Qtype: dns.TypeNS, Qclass: dns.ClassINET}
	req, err := (&dns.Msg{Question: []dns.Question{q}}).Pack()
	if err != nil {
		return err
	}
	start := time.Now()
	if s.tls != nil || s.tcpProbe { // a DNS over TLS server answers no UDP; a force-tcp one may not
		_, err = f.tryTCP(f.ctx, s, req, start.Add(f.cfg.TryTimeout))
	} else {
		var r wire.UpstreamReply
		r, _, err = f.tryUDP(f.ctx, s, req, start, start.Add(f.cfg.TryTimeout), true)
		r.Release()
	}
	s.cm.probed(err == nil)
	if err != nil {
		f.log.Debug("upstream probe failed", "server", s.addr, logkey.Err, err)
		return err
	}
	f.markHealthy(s, time.Since(start))
	return nil
}

// Error kinds used as the "kind" label of nodecache_upstream_errors_total.
// The set is closed so the label stays bounded.
const (
	kindTimeout      = "timeout"      // no valid reply before the try deadline
	kindRefused      = "refused"      // the server answered REFUSED
	kindConnRefused  = "conn_refused" // ICMP port unreachable / TCP RST
	kindSpoofed      = "spoofed"      // a reply with a wrong ID or question, ignored
	kindMalformed    = "malformed"    // a reply that does not unpack, ignored
	kindNetwork      = "network"      // any other socket error
	kindTruncated    = "truncated"    // a truncated UDP reply, retried over TCP
	kindCanceled     = "canceled"     // the caller's context ended the try
	protoUDP         = "udp"
	protoTCP         = "tcp"
	healthyGaugeUp   = 1
	healthyGaugeDown = 0
)

// metrics holds the collectors of one Forwarder.
type metrics struct {
	requests   *prometheus.CounterVec   // server, proto
	errors     *prometheus.CounterVec   // server, kind
	duration   *prometheus.HistogramVec // server
	healthy    *prometheus.GaugeVec     // server
	overloaded prometheus.Counter
	coredns    *corednsMetrics
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodecache_upstream_requests_total",
			Help: "Queries sent to upstream servers, per attempt and transport (health probes not included).",
		}, []string{"server", "proto"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodecache_upstream_errors_total",
			Help: "Upstream failures and ignored replies by kind (timeout, refused, conn_refused, spoofed, malformed, network, truncated, canceled).",
		}, []string{"server", "kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nodecache_upstream_duration_seconds",
			Help:    "Round-trip time of successful upstream attempts.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16),
		}, []string{"server"}),
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nodecache_upstream_healthy",
			Help: "1 while the upstream server is considered up, 0 while it is marked down and probed.",
		}, []string{"server"}),
		overloaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodecache_upstream_overloaded_total",
			Help: "Queries refused because the in-flight upstream limit was reached.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.errors, m.duration, m.healthy, m.overloaded} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering upstream metrics: %w", err)
		}
	}
	var err error
	if m.coredns, err = newCorednsMetrics(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// serverMetrics are one server's children, resolved once so the query
// path does no label lookups.
type serverMetrics struct {
	reqUDP, reqTCP prometheus.Counter
	duration       prometheus.Observer
	healthy        prometheus.Gauge
	errs           map[string]prometheus.Counter // read-only after construction
}

func (m *metrics) forServer(label string) serverMetrics {
	sm := serverMetrics{
		reqUDP:   m.requests.WithLabelValues(label, protoUDP),
		reqTCP:   m.requests.WithLabelValues(label, protoTCP),
		duration: m.duration.WithLabelValues(label),
		healthy:  m.healthy.WithLabelValues(label),
		errs:     make(map[string]prometheus.Counter),
	}
	kinds := []string{kindTimeout, kindRefused, kindConnRefused, kindSpoofed,
		kindMalformed, kindNetwork, kindTruncated, kindCanceled}
	for _, k := range kinds {
		sm.errs[k] = m.errors.WithLabelValues(label, k)
	}
	sm.healthy.Set(healthyGaugeUp)
	return sm
}
