package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/nodecache/nodecache/pkg/wire"
	"github.com/nodecache/nodecache/pkg/workers"
)

// Observer sees every answered query (the agent's tail and query log hang
// here; the per-client counts are a Counter). It is called on the hot path
// and must not block. One that is also an IdleObserver is asked first.
type Observer interface {
	Observe(client netip.Addr, q *wire.Query, res Result, took time.Duration)
}

// IdleObserver is an Observer that may have nobody to tell (the tail with
// no subscriber): while Idle reports true it is not called, and no clock
// is read for it. Idle is called once per answered query, or once per
// batch of them in the batched UDP loop (a subscriber that comes in
// mid-batch sees the next batch on), and must be cheap.
type IdleObserver interface {
	Observer
	Idle() bool
}

// Counter counts answered queries per client (the agent's top): unlike an
// Observer it sees no query, so the batched read loop gives it a batch's
// queries from one client with one result together. It is called on the
// hot path and must not block.
type Counter interface {
	// Count accounts n queries from client answered with res; took is
	// their time summed.
	Count(client netip.Addr, res Result, n uint64, took time.Duration)
}

// Tap sees the wire form of every answered query (dnstap): the client,
// the listen address, the query and the reply. It is called on the hot
// path, must not block, and must copy what it keeps.
type Tap interface {
	TapClient(client, local netip.AddrPort, tcp bool, query, reply []byte, start, end time.Time)
}

// Deps are what a Server asks: the resolver is required, the rest optional.
type Deps struct {
	Zone     Zone     // nil: no cluster zone
	Resolver Resolver // the cache in front of the upstreams
	Observer Observer // nil: no per-query observer
	Counter  Counter  // nil: no per-client counts
	Pods     Pods     // nil: no autopath
	Tap      Tap      // nil: no dnstap
}

// Server answers DNS queries on a set of listeners.
type Server struct {
	cfg        Config
	log        *slog.Logger
	zone       Zone // nil: no cluster zone
	resolver   Resolver
	observer   Observer       // may be nil
	idle       IdleObserver   // observer, when it can be idle
	counter    Counter        // may be nil
	tap        Tap            // may be nil
	pods       Pods           // may be nil
	limiter    *clientLimiter // nil: no per-client limit
	domainWire []byte
	cuts       atomic.Pointer[stubCuts] // stub domains more specific than the zone; nil: none
	noAAAA     suppressSet              // AAAA queries answered NODATA; read-only
	memo       *zoneMemo
	metrics    *metrics
	inflight   *semaphore.Weighted
	tcpConns   *semaphore.Weighted
	// clientSlots and tcpPerClient cap each client's share of inflight
	// and tcpConns.
	clientSlots  *perClient
	tcpPerClient *perClient
	workers      *workers.Pool            // runs the slow path
	slowBufs     slowBufPool              // the UDP slow path's query and reply buffers
	hold         atomic.Pointer[missHold] // misses waiting for a cache restore (HoldMisses); nil: none
	zoneHold     atomic.Pointer[missHold] // the zone's queries waiting for its first list (HoldZone); nil: none
	logLimiter   rateLimiter

	ctx    context.Context // cancelled by Shutdown's deadline to abort the slow path
	cancel context.CancelFunc

	mu        sync.Mutex // guards following
	listeners *Listeners
	conns     map[net.Conn]struct{}
	closing   bool

	// udpEdges says which listen address each UDP socket serves; written
	// by Serve before the read loops start, read-only after.
	udpEdges []udpEdge

	wg      sync.WaitGroup // read loops and accept loops
	queries sync.WaitGroup // slow-path goroutines and TCP connections
	serving atomic.Bool

	// afterAccept, when set (by tests, before Serve), runs after each TCP
	// accept, before the connection is registered.
	afterAccept func()
}

// New builds a server. reg may be nil: the metrics are then kept but
// registered nowhere. log may be nil: logs are then discarded.
func New(cfg Config, deps Deps, reg prometheus.Registerer, log *slog.Logger) (*Server, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	cfg.Domain = dns.Fqdn(strings.ToLower(cfg.Domain))
	if deps.Resolver == nil {
		return nil, errors.New("server needs a resolver")
	}
	dw := make([]byte, wire.MaxNameLen)
	n, err := dns.PackDomainName(dns.Fqdn(strings.ToLower(cfg.Domain)), dw, 0, nil, false)
	if err != nil {
		return nil, fmt.Errorf("cluster domain %q: %w", cfg.Domain, err)
	}
	m, err := newMetrics(reg, &cfg)
	if err != nil {
		return nil, err
	}
	cuts, err := newStubCuts(cfg.Domain, cfg.StubDomains)
	if err != nil {
		return nil, err
	}
	noAAAA, err := newSuppressSet(cfg.SuppressAAAA)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var limiter *clientLimiter
	if cfg.ClientQPS > 0 {
		limiter = newClientLimiter(cfg.ClientQPS, cfg.ClientBurst, 65536)
	}
	pods := deps.Pods
	if !cfg.Autopath || deps.Zone == nil {
		pods = nil
	}
	s := &Server{
		cfg: cfg, log: log, zone: deps.Zone, resolver: deps.Resolver, observer: deps.Observer, counter: deps.Counter, tap: deps.Tap,
		pods: pods, limiter: limiter,
		domainWire: dw[:n], noAAAA: noAAAA,
		memo:         newZoneMemo(100_000),
		metrics:      m,
		inflight:     semaphore.NewWeighted(int64(cfg.MaxInFlight)),
		tcpConns:     semaphore.NewWeighted(int64(cfg.MaxTCPConns)),
		clientSlots:  newPerClient(cfg.MaxInFlightPerClient),
		tcpPerClient: newPerClient(cfg.MaxTCPConnsPerClient),
		workers:      workers.New(ctx),
		ctx:          ctx, cancel: cancel,
		conns: make(map[net.Conn]struct{}),
	}
	s.idle, _ = deps.Observer.(IdleObserver)
	if len(cuts.wire) > 0 {
		s.cuts.Store(cuts)
	}
	return s, nil
}

// Serve starts reading from l and returns at once; the server owns l until
// Shutdown (or Detach for a handover).
func (s *Server) Serve(l *Listeners) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listeners != nil {
		return errors.New("server already serving")
	}
	if s.closing {
		return errors.New("server is shut down")
	}
	s.listeners = l
	s.udpEdges = s.udpEdges[:0]
	for _, c := range l.UDP {
		s.udpEdges = append(s.udpEdges, udpEdge{c, edge{proto: protoUDP, server: s.serverOf(c.LocalAddr())}})
	}
	for _, c := range l.UDP {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveUDP(c)
		}()
	}
	for _, ln := range l.TCP {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveTCP(ln)
		}()
	}
	s.serving.Store(true)
	return nil
}

// Serving reports whether the read loops are running.
func (s *Server) Serving() bool { return s.serving.Load() }

// Listeners returns what the server reads from (nil before Serve).
func (s *Server) Listeners() *Listeners {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listeners
}

// StopReading makes every read loop return without closing the sockets, so
// that a successor holding duplicates keeps them open, then waits for the
// queries in flight (up to ctx). Used by the handover: the kernel queues new
// packets on the shared sockets for the successor.
func (s *Server) StopReading(ctx context.Context) error {
	return s.stop(ctx, false)
}

// Shutdown stops reading, closes the sockets, and waits for in-flight queries
// until ctx ends; then it aborts them. Safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.stop(ctx, true)
}

func (s *Server) stop(ctx context.Context, closeSockets bool) error {
	s.mu.Lock()
	already := s.closing
	s.closing = true
	l := s.listeners
	s.mu.Unlock()
	if !already && l != nil {
		past := time.Unix(1, 0)
		for _, c := range l.UDP {
			_ = c.SetReadDeadline(past)
		}
		for _, ln := range l.TCP {
			_ = ln.SetDeadline(past)
		}
	}
	s.wg.Wait()
	s.serving.Store(false)
	s.endHold() // the read loops are done: answer what they held
	// TCP connections answer what is already on its way, then close; busy
	// ones finish their queries first.
	s.mu.Lock()
	for c := range s.conns {
		_ = c.SetReadDeadline(time.Now().Add(tcpDrain))
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.queries.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		s.cancel()
		<-done
		err = fmt.Errorf("waiting for in-flight queries: %w", ctx.Err())
	}
	s.cancel()
	if closeSockets && l != nil {
		l.Close()
	}
	return err
}

// Query answers one packet as if it had arrived over UDP from client, for
// the admin API and health checks. It returns the reply and where it came from.
func (s *Server) Query(ctx context.Context, pkt []byte, client netip.Addr) ([]byte, Result, error) {
	var q wire.Query
	perr := wire.Parse(pkt, &q)
	maxSize := 65535
	out, res, ok := s.fast(pkt, &q, perr, client, make([]byte, 0, 512), maxSize, time.Now())
	if !ok {
		if perr != nil {
			return nil, res, perr
		}
		by, ok := ctx.Deadline()
		if !ok {
			by = time.Now().Add(s.cfg.QueryTimeout)
		}
		out, res = s.slow(ctx, by, pkt, &q, client, nil, maxSize)
	}
	if out == nil {
		return nil, res, fmt.Errorf("query: %w", wire.ErrNoReply)
	}
	return out, res, nil
}

// record accounts one answered query pkt from client that came in at ep,
// answered with reply: at once, or, with a tally t, in t until its batch
// is flushed.
func (s *Server) record(t *tally, ep edge, client netip.AddrPort, q *wire.Query, res Result, start time.Time, pkt, reply []byte) {
	var took time.Duration
	observe := t != nil && t.observe || t == nil && s.observing() // a batch asks once (tally.observe)
	if t == nil || observe || s.tap != nil {
		// time.Since reads the monotonic clock alone, where time.Now
		// reads the wall clock too.
		took = time.Since(start)
	}
	if t != nil {
		t.add(s.metrics.recordKeyOf(ep, client.Addr(), q, res, len(pkt), reply))
		if s.counter != nil {
			t.count(client.Addr(), res)
		}
	} else {
		seconds := took.Seconds()
		s.metrics.observe(int(ep.proto), q.Type, res, seconds)
		s.metrics.coredns.observe(ep, client.Addr(), q, res, seconds, len(pkt), reply)
		if s.counter != nil {
			s.counter.Count(client.Addr(), res, 1, took)
		}
	}
	if observe {
		s.observer.Observe(client.Addr(), q, res, took)
	}
	if s.tap != nil {
		s.tap.TapClient(client, s.cfg.Addrs[ep.server], ep.proto == protoTCP, pkt, reply, start, start.Add(took))
	}
}

// observing reports whether answered queries are to be shown to the
// Observer now: there is one, and it is not idle.
func (s *Server) observing() bool { return s.observer != nil && (s.idle == nil || !s.idle.Idle()) }

// udpEdge is one UDP socket and the edge its queries come in at.
type udpEdge struct {
	c  *net.UDPConn
	ep edge
}

// udpEdge returns the edge of the UDP socket c: a scan of a handful of
// sockets, cheaper than a map lookup.
func (s *Server) udpEdge(c *net.UDPConn) edge {
	for i := range s.udpEdges {
		if s.udpEdges[i].c == c {
			return s.udpEdges[i].ep
		}
	}
	return edge{proto: protoUDP}
}

// serverOf returns the index of the listen address a is, for the server
// label of the CoreDNS-compatible metrics.
func (s *Server) serverOf(a net.Addr) uint8 {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.UDPAddr:
		ap = a.AddrPort()
	case *net.TCPAddr:
		ap = a.AddrPort()
	}
	return s.metrics.coredns.serverIndex(ap)
}

// logRated logs at Warn at most once per interval per kind, so a flood of
// bad packets costs one line, not one per packet.
func (s *Server) logRated(kind, msg string, args ...any) {
	if s.logLimiter.allow(kind, time.Now()) {
		s.log.Warn(msg, args...)
	}
}

// rateLimiter allows one event per kind per 10 seconds.
type rateLimiter struct {
	mu   sync.Mutex // guards last
	last map[string]time.Time
}

func (r *rateLimiter) allow(kind string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = make(map[string]time.Time)
	}
	if now.Sub(r.last[kind]) < 10*time.Second {
		return false
	}
	r.last[kind] = now
	return true
}
