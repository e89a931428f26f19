package server

import (
	"net/netip"
	"sync"
	"time"
)

// clientLimiter is a token bucket per client IP: rate tokens a second, up
// to burst. It is bounded: past maxClients, the longest-idle buckets are
// dropped (a dropped client starts again with a full bucket).
type clientLimiter struct {
	rate, burst float64
	maxClients  int

	mu      sync.Mutex // guards buckets
	buckets map[netip.Addr]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newClientLimiter(qps float64, burst, maxClients int) *clientLimiter {
	if burst <= 0 {
		burst = max(int(qps), 1)
	}
	return &clientLimiter{rate: qps, burst: float64(burst), maxClients: maxClients, buckets: make(map[netip.Addr]*bucket)}
}

// allow takes a token for client at now, reporting whether one was there.
func (l *clientLimiter) allow(client netip.Addr, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[client]
	if !ok {
		if len(l.buckets) >= l.maxClients {
			l.evictLocked(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[client] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// evictLocked drops buckets that have refilled (idle long enough to be
// full); if none has, it drops half of them.
func (l *clientLimiter) evictLocked(now time.Time) {
	full := time.Duration(l.burst / l.rate * float64(time.Second))
	for ip, b := range l.buckets {
		if now.Sub(b.last) >= full {
			delete(l.buckets, ip)
		}
	}
	for ip := range l.buckets {
		if len(l.buckets) < l.maxClients/2 {
			break
		}
		delete(l.buckets, ip)
	}
}
