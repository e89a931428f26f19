package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/nodecache/nodecache/pkg/wire"
)

// maxPasses is how many times Exchange walks a server set before giving up
// (the overall deadline usually ends it first). A second pass covers a lost
// datagram when there is a single upstream.
const maxPasses = 2

// Forwarder sends queries to upstream resolvers. It is safe for concurrent
// use; Close stops its background goroutines.
type Forwarder struct {
	cfg   Config // defaults applied, validated
	log   *slog.Logger
	m     *metrics
	sem   *semaphore.Weighted
	def   *serverSet            // the default servers
	stubs map[string]*serverSet // lowercased wire-form name -> set; read-only
	all   []*server             // every distinct server, default ones first
	bufs  bufPool
	hooks hooks

	ctx    context.Context // ends on Close; probes and the sweeper run under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // background goroutines

	mu     sync.Mutex // guards following
	closed bool       // no new goroutine may start once set

	closeOnce sync.Once
}

// hooks let tests observe internal events.
type hooks struct {
	healthChanged func(addr netip.AddrPort, up bool) // nil means none
	now           func() time.Time                   // the clock; nil means time.Now
}

// now is the time by the hooks' clock.
func (f *Forwarder) now() time.Time {
	if f.hooks.now != nil {
		return f.hooks.now()
	}
	return time.Now()
}

// New validates cfg, applies its defaults and returns a Forwarder whose
// metrics are registered on reg. reg may be nil: the metrics are then kept
// but registered nowhere. log may be nil: logs are then discarded.
func New(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Forwarder, error) {
	return newForwarder(cfg, reg, log, hooks{})
}

func newForwarder(cfg Config, reg prometheus.Registerer, log *slog.Logger, h hooks) (*Forwarder, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("creating upstream forwarder: %w", err)
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	f := &Forwarder{
		cfg:   cfg,
		log:   log,
		m:     m,
		sem:   semaphore.NewWeighted(int64(cfg.MaxInFlight)),
		stubs: make(map[string]*serverSet, len(cfg.StubDomains)),
		hooks: h,
	}
	byAddr := make(map[netip.AddrPort]*server)
	newSet := func(addrs []netip.AddrPort) *serverSet {
		ss := &serverSet{}
		for _, a := range addrs {
			s, ok := byAddr[a]
			if !ok {
				s = newServer(a, &f.cfg, m)
				byAddr[a] = s
				f.all = append(f.all, s)
			}
			ss.servers = append(ss.servers, s)
		}
		return ss
	}
	f.def = newSet(cfg.Servers)
	f.def.opts.ForceTCP = cfg.ForceTCP
	for _, domain := range sortedDomains(cfg.StubDomains) {
		name, err := wireName(domain)
		if err != nil {
			return nil, fmt.Errorf("creating upstream forwarder: stub domain %q: %w", domain, err)
		}
		ss := newSet(cfg.StubDomains[domain])
		ss.setOptions(cfg.StubOptions[domain])
		f.stubs[name] = ss
	}
	f.def.markTCPProbe()
	for _, ss := range f.stubs {
		ss.markTCPProbe()
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.wg.Add(1)
	go f.sweepLoop()
	return f, nil
}

// Exchange asks the upstream for key's entry (the query
// wire.Key.AppendRequest builds) and returns the first valid reply, read
// once (wire.UpstreamReply: scanned in place, or unpacked, and checked to
// answer the question asked), and the server that gave it. The reply is a
// fresh one the caller owns, and keeps whatever OPT record the upstream
// sent; the caller strips it before caching. One read over UDP sits in a
// read buffer of f's, lent to it: the caller's Release gives it back (a
// reply never released is left to the garbage collector). A REFUSED answer makes
// Exchange try the next server, and is returned only if no server answers
// otherwise.
//
// The query ends by the earliest of by, ctx's deadline and
// Config.Deadline; ctx otherwise only cancels, so that the cache can pass
// its long-lived context and each miss's deadline beside it rather than
// derive a context per miss. A zero by means no deadline beyond ctx's and
// the config's.
//
// Errors: ErrBadRequest, ErrClosed, ErrOverloaded, or ErrNoAnswer wrapping
// the last *AttemptError (and the context's error when the caller gave
// up).
func (f *Forwarder) Exchange(ctx context.Context, key wire.Key, by time.Time) (reply wire.UpstreamReply, from netip.AddrPort, err error) {
	if len(key.Name) == 0 || len(key.Name) > wire.MaxNameLen {
		return reply, from, ErrBadRequest
	}
	if f.ctx.Err() != nil {
		return reply, from, ErrClosed
	}
	if !f.sem.TryAcquire(1) {
		f.m.overloaded.Inc()
		f.m.coredns.maxRejects.Inc()
		return reply, from, ErrOverloaded
	}
	defer f.sem.Release(1)
	set := f.route(key.Name)
	if set.sem != nil {
		if !set.sem.TryAcquire(1) {
			f.m.overloaded.Inc()
			return reply, from, ErrOverloaded
		}
		defer set.sem.Release(1)
	}

	bufp := f.bufs.get()
	defer f.bufs.put(bufp)
	req := key.AppendRequest((*bufp)[:0])
	now := time.Now() // the first attempt's start
	deadline := now.Add(f.cfg.Deadline)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if !by.IsZero() && by.Before(deadline) {
		deadline = by
	}
	var stack [8]*server
	servers := set.order(stack[:0], set.policy(f.cfg.Policy))
	tryTimeout := set.tryTimeout(f.cfg.TryTimeout)

	var lastErr error
	var refused wire.UpstreamReply
	var refusedBy netip.AddrPort
	for pass := 0; pass < maxPasses && refused.Raw == nil; pass++ {
		for _, s := range servers {
			start := now
			if now.IsZero() {
				start = time.Now()
			}
			now = time.Time{} // read afresh for every later attempt
			if ctx.Err() != nil || !start.Before(deadline) {
				break
			}
			from = s.addr
			tryDeadline := start.Add(tryTimeout)
			if deadline.Before(tryDeadline) {
				tryDeadline = deadline
			}
			r, tryErr := f.tryServer(ctx, s, req, start, tryDeadline, set.opts.ForceTCP)
			if tryErr != nil {
				lastErr = tryErr
				f.recordFailure(s, errorKind(tryErr))
				continue
			}
			rcode := r.Rcode()
			f.recordSuccess(s, rcode, time.Since(start))
			if rcode == dns.RcodeRefused {
				s.countError(kindRefused)
				refused.Release() // a later REFUSED stands in for it
				refused, refusedBy = r, s.addr
				continue
			}
			refused.Release()
			return r, s.addr, nil
		}
	}
	if refused.Raw != nil {
		return refused, refusedBy, nil
	}
	return reply, from, noAnswer(ctx, lastErr)
}

func noAnswer(ctx context.Context, lastErr error) error {
	ctxErr := ctx.Err()
	switch {
	case lastErr == nil && ctxErr == nil:
		return fmt.Errorf("%w: %w", ErrNoAnswer, context.DeadlineExceeded)
	case lastErr == nil:
		return fmt.Errorf("%w: %w", ErrNoAnswer, ctxErr)
	case ctxErr != nil && !errors.Is(lastErr, ctxErr):
		return fmt.Errorf("%w: %w (%w)", ErrNoAnswer, ctxErr, lastErr)
	}
	return fmt.Errorf("%w: %w", ErrNoAnswer, lastErr)
}

// route picks the server set for the lowercased wire name qname: the stub
// domain that is its longest suffix on label boundaries, else the default
// set.
func (f *Forwarder) route(qname string) *serverSet {
	if len(f.stubs) == 0 {
		return f.def
	}
	for off := 0; off < len(qname); off += 1 + int(qname[off]) {
		if ss, ok := f.stubs[qname[off:]]; ok {
			return ss
		}
		if qname[off] == 0 {
			break
		}
	}
	return f.def
}

// wireName returns the lowercased wire form of a domain name.
func wireName(domain string) (string, error) {
	var b [wire.MaxNameLen]byte
	n, err := dns.PackDomainName(dns.Fqdn(strings.ToLower(domain)), b[:], 0, nil, false)
	if err != nil {
		return "", err
	}
	return string(b[:n]), nil
}

// sweepLoop closes expired pooled TCP connections and UDP sockets until
// Close.
func (f *Forwarder) sweepLoop() {
	defer f.wg.Done()
	t := time.NewTicker(max(min(f.cfg.TCPIdleTimeout, udpMaxAge)/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case now := <-t.C:
			for _, s := range f.all {
				s.tcp.sweep(now)
				s.udp.sweep(now)
			}
		}
	}
}

// allDown reports whether every server is marked down.
func (f *Forwarder) allDown() bool {
	for _, s := range f.all {
		if !s.down.Load() {
			return false
		}
	}
	return true
}

// Healthy reports whether at least one default server is not marked down.
func (f *Forwarder) Healthy() bool {
	for _, s := range f.def.servers {
		if !s.down.Load() {
			return true
		}
	}
	return false
}

// Status returns a snapshot of every distinct server, default ones first
// in configured order, then those only in stub domains.
func (f *Forwarder) Status() []ServerStatus {
	out := make([]ServerStatus, 0, len(f.all))
	for _, s := range f.all {
		out = append(out, s.status())
	}
	return out
}

// Close stops the probes and the pool sweeper, waits for them and closes
// the pooled TCP connections and UDP sockets (those in use are closed when
// their query ends). Exchange calls still running finish on their own
// deadline. Close is idempotent and always returns nil.
func (f *Forwarder) Close() error {
	f.closeOnce.Do(func() {
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
		f.cancel()
		f.wg.Wait()
		for _, s := range f.all {
			s.tcp.close()
			s.udp.close()
		}
	})
	return nil
}
