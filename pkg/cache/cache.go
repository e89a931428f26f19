package cache

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/wire"
	"github.com/nodecache/nodecache/pkg/workers"
)

// Exchanger asks the upstream for one key's entry. *upstream.Forwarder
// implements it. The query (wire.Key.AppendRequest) must end by the
// deadline by; ctx only cancels (the cache passes its own long-lived
// context rather than deriving one per miss). The reply comes read once
// and checked to answer the key's question: scanned in place, or unpacked.
// It is the cache's: its Msg may be modified, and its bytes are not kept;
// the cache releases it (wire.UpstreamReply.Release) once it has stored it,
// which gives a read buffer the reply was lent back to the Exchanger.
type Exchanger interface {
	Exchange(ctx context.Context, key wire.Key, by time.Time) (wire.UpstreamReply, netip.AddrPort, error)
}

// ErrClosed is returned by Resolve after Close.
var ErrClosed = errors.New("cache: closed")

// errBusy means a background refresh was skipped: MaxPrefetches are running.
var errBusy = errors.New("cache: background refreshes at their limit")

// Cache is a byte-bounded, sharded LRU of upstream replies in front of an
// Exchanger. All methods are safe for concurrent use.
type Cache struct {
	cfg Config // defaults filled in; immutable
	lim limits
	// zoneLim are the per-zone caps over lim; never nil after New.
	zoneLim zoneLimitsPtr
	up      Exchanger
	log     *slog.Logger
	seed    maphash.Seed
	shards  []*shard // len a power of two; immutable
	mask    uint64
	met     *metrics
	sem     chan struct{}           // one token per running background refresh
	runner  *workers.Pool           // runs the flights
	spent   sync.Pool               // *flight, done with (flight.release), for join
	jnl     atomic.Pointer[Journal] // nil unless StartJournal ran

	ctx    context.Context // cancelled by Close; parent of every upstream query
	cancel context.CancelFunc

	mu      sync.Mutex           // guards following
	flights map[wire.Key]*flight // upstream queries in flight, by key
	closed  bool                 // set by Close; no goroutine starts after
	wg      sync.WaitGroup       // flight goroutines; Add only under mu
	once    sync.Once            // Close
}

// New builds a Cache in front of up. reg may be nil: the metrics are then
// kept but registered nowhere. log may be nil: logs are then discarded.
func New(cfg Config, up Exchanger, reg prometheus.Registerer, log *slog.Logger) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if up == nil {
		return nil, errors.New("cache: nil Exchanger")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	c := &Cache{
		cfg:     cfg,
		lim:     limits{maxTTL: cfg.MaxTTL, maxNegativeTTL: cfg.MaxNegativeTTL, servfailTTL: cfg.ServfailTTL},
		up:      up,
		log:     log,
		seed:    maphash.MakeSeed(),
		shards:  make([]*shard, cfg.Shards),
		mask:    uint64(cfg.Shards - 1),
		sem:     make(chan struct{}, cfg.MaxPrefetches),
		flights: make(map[wire.Key]*flight),
	}
	if err := c.SetZoneLimits(cfg.ZoneLimits); err != nil {
		return nil, err
	}
	for i := range c.shards {
		c.shards[i] = newShard(cfg.MaxBytes / int64(cfg.Shards))
	}
	c.met = newMetrics(c)
	if reg != nil {
		if err := reg.Register(c.met); err != nil {
			return nil, fmt.Errorf("registering cache metrics: %w", err)
		}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.runner = workers.New(c.ctx)
	return c, nil
}

func (c *Cache) shardOf(h uint64) *shard { return c.shards[h&c.mask] }

// Lookup returns a fresh cached reply for q and how to write its TTLs. It
// does not allocate. A hit on a popular entry near its expiry starts a
// prefetch in the background.
func (c *Cache) Lookup(q *wire.Query, now time.Time) (*wire.Packed, wire.TTLMode, bool) {
	h := q.Hash(c.seed)
	s := c.shardOf(h)
	s.mu.Lock()
	e, ok := s.lru.Peek(h)
	if !ok || !e.answers(q) || !e.fresh(now) {
		s.mu.Unlock()
		return nil, wire.TTLMode{}, false
	}
	s.touchLocked(h, e)
	s.hits++
	e.hits++
	pf := c.wantPrefetchLocked(e, now)
	s.mu.Unlock()
	if pf {
		c.prefetch(s, e)
	}
	return &e.packed, wire.TTLMode{Elapsed: e.elapsed(now)}, true
}

// wantPrefetchLocked reports whether e should be prefetched now, and marks
// it so it is prefetched once.
func (c *Cache) wantPrefetchLocked(e *entry, now time.Time) bool {
	if c.cfg.PrefetchPercent < 0 || e.prefetching || int(e.hits) < c.cfg.PrefetchMinHits {
		return false
	}
	if e.remaining(now)*100 >= e.lifetime()*time.Duration(c.cfg.PrefetchPercent) {
		return false
	}
	e.prefetching = true
	return true
}

// prefetch refreshes e in the background; when no slot is free the mark
// is cleared so a later hit tries again.
func (c *Cache) prefetch(s *shard, e *entry) {
	started, err := c.refresh(e.key())
	switch {
	case started:
		c.met.prefetches.Add(1)
	case errors.Is(err, errBusy):
		s.mu.Lock()
		e.prefetching = false
		s.mu.Unlock()
	}
}

// refresh starts a background upstream query for key unless one is in
// flight already.
func (c *Cache) refresh(key wire.Key) (bool, error) {
	_, started, err := c.join(key, key.Hash(c.seed), c.cfg.Now(), true, time.Time{})
	return started, err
}

// Close stops background refreshes and upstream queries started by the
// cache and waits for them. It is idempotent; the cache still answers
// Lookup afterwards, and Resolve returns ErrClosed for misses.
func (c *Cache) Close() error {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.cancel()
		c.wg.Wait()
	})
	return nil
}
