package cache

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/wire"
)

// flight is one upstream query that concurrent misses for a key share.
//
// A flight is reused (Cache.spent), done channel included, once the query
// and every miss that waited for it are done with it (release), so that a
// miss makes neither: they were a third of the bytes a miss load
// allocates. done carries one token when one miss at most waits (the
// token stays in it if that miss gave up, and is drained for the next
// use), and is closed, not reused, when several wait.
type flight struct {
	key      wire.Key
	hash     uint64
	started  time.Time     // by the cache clock
	deadline time.Time     // the upstream query's, by the real clock
	bg       bool          // holds a slot of Cache.sem until done
	done     chan struct{} // capacity 1
	c        *Cache        // runs it (Run)
	waiters  int           // misses that joined (Resolve); guarded by c.mu
	closed   bool          // done was closed: several waited
	refs     atomic.Int32  // the query's and each waiting miss's; the last one out recycles

	// Set before done is signalled, read-only after.
	packed *wire.Packed
	server netip.AddrPort
	err    error
}

// release ends one holder's use of f; the last one recycles it.
func (f *flight) release() {
	if f.refs.Add(-1) != 0 {
		return
	}
	c, done := f.c, f.done
	if f.closed {
		done = make(chan struct{}, 1)
	} else {
		select {
		case <-done: // the token of a miss that gave up
		default:
		}
	}
	*f = flight{done: done} // unshared now: no holder is left
	c.spent.Put(f)
}

// Resolve answers a miss for key by the deadline by: a fresh entry if one
// arrived meanwhile, else the answer of an upstream query shared with
// concurrent misses for the same key (stored per the cache policy, and
// returned even when not cacheable), else, when the upstream fails, an
// expired entry served stale. Errors wrap the Exchanger's.
//
// by is given beside ctx, which then only cancels; a zero by means ctx's
// deadline alone. The server passes its long-lived context and each
// query's deadline rather than a timer context per miss. A timer is only
// made when the caller joins a flight that may outlast it.
//
// The query sent upstream is built from key alone (RD set, the key's DO
// and CD, EDNS, no AD), never from a client's query: the reply is stored
// under key and served to every client whose query has it, so no client's
// other flags may shape it.
func (c *Cache) Resolve(ctx context.Context, key wire.Key, by time.Time) (wire.Answer, error) {
	if d, ok := ctx.Deadline(); ok && (by.IsZero() || d.Before(by)) {
		by = d
	}
	now := c.cfg.Now()
	h := key.Hash(c.seed)
	if r, ok := c.cached(&key, h, now); ok {
		return r, nil
	}
	c.met.misses.Add(1)
	f, _, err := c.join(key, h, now, false, by)
	if err != nil {
		return wire.Answer{}, err
	}
	defer f.release()
	var expired <-chan time.Time
	if !by.IsZero() && f.deadline.After(by) { // joined a flight that may outlast the caller
		t := time.NewTimer(time.Until(by))
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return c.giveUp(&key, h, ctx.Err())
	case <-expired:
		return c.giveUp(&key, h, context.DeadlineExceeded)
	}
	failed := f.err != nil || f.packed.Rcode() == dns.RcodeServerFailure
	if failed && !c.overloaded(f.err) {
		if r, ok := c.stale(&key, h, c.cfg.Now(), true); ok {
			return r, nil
		}
	}
	if f.err != nil {
		return wire.Answer{}, f.err
	}
	return wire.Answer{Packed: f.packed, Source: wire.SourceUpstream, Server: f.server}, nil
}

// giveUp answers a caller that stopped waiting for its flight (which goes
// on, and stores its answer): stale if there is an entry to serve, else why.
func (c *Cache) giveUp(key *wire.Key, h uint64, why error) (wire.Answer, error) {
	if r, ok := c.stale(key, h, c.cfg.Now(), false); ok {
		return r, nil
	}
	return wire.Answer{}, fmt.Errorf("waiting for the upstream answer to %s: %w", key.PresentationName(), why)
}

func (c *Cache) overloaded(err error) bool {
	return errors.Is(err, wire.ErrOverloaded)
}

// cached returns a fresh entry for key, or a stale one while the upstream
// failed for it within the last StaleTTL (RFC 8767 failure recheck).
func (c *Cache) cached(key *wire.Key, h uint64, now time.Time) (wire.Answer, bool) {
	s := c.shardOf(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.lru.Peek(h)
	switch {
	case !ok || !e.hasKey(key):
		return wire.Answer{}, false
	case e.fresh(now):
		s.touchLocked(h, e)
		s.hits++
		e.hits++
		return wire.Answer{Packed: &e.packed, Mode: wire.TTLMode{Elapsed: e.elapsed(now)}, Source: wire.SourceCache}, true
	case s.failedWithinLocked(e, now, c.cfg.StaleTTL) && staleable(e, now, c.cfg.StaleMaxAge):
		s.touchLocked(h, e)
		c.met.stale.Add(1)
		return c.staleResult(e), true
	}
	return wire.Answer{}, false
}

// stale returns key's entry after an upstream failure: fresh when one was
// stored meanwhile, else expired but within StaleMaxAge, marked as failed.
// With kick, a background refresh of the entry is started.
func (c *Cache) stale(key *wire.Key, h uint64, now time.Time, kick bool) (wire.Answer, bool) {
	s := c.shardOf(h)
	s.mu.Lock()
	e, ok := s.lru.Peek(h)
	switch {
	case !ok || !e.hasKey(key) || e.fresh(now) && e.kind == kindServfail:
		s.mu.Unlock()
		return wire.Answer{}, false
	case e.fresh(now): // stored by another flight meanwhile
		s.hits++
		s.mu.Unlock()
		return wire.Answer{Packed: &e.packed, Mode: wire.TTLMode{Elapsed: e.elapsed(now)}, Source: wire.SourceCache}, true
	case !staleable(e, now, c.cfg.StaleMaxAge):
		s.mu.Unlock()
		return wire.Answer{}, false
	}
	s.setFailedLocked(e, now.UnixNano())
	s.mu.Unlock()
	c.met.stale.Add(1)
	if kick {
		if _, err := c.refresh(*key); err != nil && !errors.Is(err, errBusy) {
			c.log.Debug("refreshing stale entry", "name", key.PresentationName(), logkey.Err, err)
		}
	}
	return c.staleResult(e), true
}

func (c *Cache) staleResult(e *entry) wire.Answer {
	return wire.Answer{Packed: &e.packed, Mode: wire.TTLMode{Fixed: uint32(c.cfg.StaleTTL / time.Second)}, Source: wire.SourceStale}
}

// join returns the flight for key, starting one unless a flight younger
// than FlightMaxAge is running. A background flight (bg) needs a free
// slot, else errBusy. deadline bounds the upstream query; zero means
// RefreshTimeout.
func (c *Cache) join(key wire.Key, h uint64, now time.Time, bg bool, deadline time.Time) (*flight, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false, ErrClosed
	}
	if f := c.flights[key]; f != nil && now.Sub(f.started) < c.cfg.FlightMaxAge {
		if !bg {
			f.waiters++
			f.refs.Add(1)
		}
		return f, false, nil
	}
	if bg {
		select {
		case c.sem <- struct{}{}:
		default:
			return nil, false, errBusy
		}
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(c.cfg.RefreshTimeout) // the real clock, like every context deadline
	}
	f, _ := c.spent.Get().(*flight)
	if f == nil {
		f = &flight{done: make(chan struct{}, 1)}
	}
	f.key, f.hash, f.started, f.deadline, f.bg, f.c = key, h, now, deadline, bg, c
	f.refs.Store(1) // the query's
	if !bg {
		f.waiters = 1
		f.refs.Add(1)
	}
	c.flights[key] = f
	c.wg.Add(1)
	// On a reused goroutine: unpacking the reply grows a fresh goroutine's
	// stack, and that copy was ~5% of the miss path's CPU. Handed over as a
	// Task: a closure over f would be one more allocation per miss.
	c.runner.RunTask(f)
	return f, true, nil
}

// Run runs the flight on its cache's workers (workers.Task).
func (f *flight) Run() { f.c.run(f) }

// run sends f's query, stores the reply per policy and wakes the waiters.
func (c *Cache) run(f *flight) {
	defer c.wg.Done()
	// c.ctx cancels (Close); the deadline goes alongside, not in a context
	// derived per flight.
	r, server, err := c.exchange(f.key, f.deadline)
	if err != nil {
		f.err = fmt.Errorf("resolving %s %s upstream: %w", f.key.PresentationName(), dns.TypeToString[f.key.Type], err)
	} else {
		f.server = server
		f.packed, f.err = c.storeReply(f.key, f.hash, &r, c.cfg.Now())
		r.Release() // storeReply packed a copy
	}
	c.mu.Lock()
	if c.flights[f.key] == f {
		delete(c.flights, f.key)
	}
	f.closed = f.waiters > 1 // no miss joins f from here on
	c.mu.Unlock()
	if f.bg {
		<-c.sem
	}
	if f.closed {
		close(f.done)
	} else {
		f.done <- struct{}{}
	}
	f.release()
}

// ErrPanicked is what the waiters of a flight get when the upstream query
// panicked: the flight fails like an upstream failure (stale if there is
// an entry, else SERVFAIL) instead of leaving them waiting for a goroutine
// that is gone, or taking the agent down.
var ErrPanicked = errors.New("upstream query panicked")

// exchange asks the upstream for key's entry for a flight, recovering a
// panic as ErrPanicked and logging it with its stack.
func (c *Cache) exchange(key wire.Key, by time.Time) (r wire.UpstreamReply, server netip.AddrPort, err error) {
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("recovered from a panic in an upstream query", logkey.Panic, v, logkey.Stack, string(debug.Stack()))
			r, err = wire.UpstreamReply{}, fmt.Errorf("%w: %v", ErrPanicked, v)
		}
	}()
	return c.up.Exchange(c.ctx, key, by)
}

// storeReply caches the upstream reply r for key when the policy allows,
// and returns it packed either way. A reply the forwarder scanned in place
// (wire.ScanUpstream) is judged and stored from its bytes
// (wire.PackUpstream), with no unpacking and packing again; any other
// comes unpacked and goes through store.
func (c *Cache) storeReply(key wire.Key, h uint64, r *wire.UpstreamReply, now time.Time) (*wire.Packed, error) {
	if !r.Scanned {
		if r.Msg == nil {
			c.met.uncacheable[reasonBadReply].Add(1)
			return nil, fmt.Errorf("upstream reply for %s: neither scanned nor unpacked", key.PresentationName())
		}
		return c.store(key, h, r.Msg, now)
	}
	u := &r.Scan
	ttl, k, why := decideScanned(c.limitsFor(key.Name), &key, u)
	if why != reasonNone {
		c.met.uncacheable[why].Add(1)
		return wire.PackUpstream(r.Raw, u, 0, 0), nil
	}
	e := newEntry(&key, packScannedEntry(r.Raw, u, uint32(ttl/time.Second)), k, now, ttl)
	c.insert(h, e, now)
	return &e.packed, nil
}

// store caches reply for key when the policy allows, and returns the reply
// packed either way.
func (c *Cache) store(key wire.Key, h uint64, reply *dns.Msg, now time.Time) (*wire.Packed, error) {
	ttl, k, why := decide(c.limitsFor(key.Name), &key, reply)
	if why != reasonNone {
		p, err := packChecked(reply, 0)
		if err != nil { // one reason a reply: it fails as a bad one
			c.met.uncacheable[reasonBadReply].Add(1)
			return nil, fmt.Errorf("upstream reply for %s: %w", key.PresentationName(), err)
		}
		c.met.uncacheable[why].Add(1)
		return p, nil
	}
	// The reply is ours (the Exchanger hands over a fresh message per
	// query): clamped and packed in place, with no copy.
	p, err := packEntry(clampTTLs(reply, ttl))
	if err != nil {
		c.met.uncacheable[reasonBadReply].Add(1)
		return nil, fmt.Errorf("upstream reply for %s: %w", key.PresentationName(), err)
	}
	e := newEntry(&key, p, k, now, ttl)
	c.insert(h, e, now)
	return &e.packed, nil
}

// packChecked packs m (ours), with room bytes for a holder in front of it
// (wire.PackOwned), and unpacks the result again. miekg/dns takes a record
// with empty rdata (an SOA from a broken or hostile upstream, say) and
// packs it into rdata that neither it nor a client takes back: such a
// reply is refused, so that the query fails as for any bad upstream reply
// (stale, else SERVFAIL) instead of a malformed reply reaching the client or
// the cache. Only replies wire.ScanUpstream refused come here, so the
// second parse is off the common miss path.
func packChecked(m *dns.Msg, room int) (*wire.Packed, error) {
	p, err := wire.PackOwned(m, room)
	if err != nil {
		return nil, fmt.Errorf("packing: %w", err)
	}
	if _, err := p.Msg(); err != nil {
		return nil, fmt.Errorf("packed into a reply that does not parse: %w", err)
	}
	return p, nil
}

// insert adds e unless it is too large for a shard, or it is a SERVFAIL
// that would displace an entry still usable (fresh or stale).
func (c *Cache) insert(h uint64, e *entry, now time.Time) bool {
	if !c.insertUnjournalled(h, e, now) {
		return false
	}
	if j := c.jnl.Load(); j != nil {
		j.add(h, e)
	}
	return true
}

// insertUnjournalled is insert without telling the journal.
func (c *Cache) insertUnjournalled(h uint64, e *entry, now time.Time) bool {
	s := c.shardOf(h)
	if e.size() > s.budget {
		c.met.uncacheable[reasonTooLarge].Add(1)
		return false
	}
	s.mu.Lock()
	if e.kind == kindServfail { // the kind first: no lookup for any other
		if old, ok := s.lru.Peek(h); ok && old.kind != kindServfail && sameKey(old, e) &&
			usable(old, now, c.cfg.StaleMaxAge) {
			s.mu.Unlock()
			return false
		}
	}
	evicted := s.insertLocked(h, e, now, c.cfg.StaleMaxAge)
	s.mu.Unlock()
	c.met.evictions.Add(uint64(evicted))
	c.met.inserts[e.kind].Add(1)
	return true
}
