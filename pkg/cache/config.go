package cache

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"time"
)

// Defaults applied by New to zero-valued Config fields.
const (
	DefaultMaxBytes        = 64 << 20
	DefaultMaxTTL          = time.Hour
	DefaultMaxNegativeTTL  = time.Hour
	DefaultServfailTTL     = 5 * time.Second
	DefaultStaleMaxAge     = time.Hour
	DefaultStaleTTL        = 30 * time.Second
	DefaultFlightMaxAge    = 2 * time.Second
	DefaultRefreshTimeout  = 5 * time.Second
	DefaultPrefetchPercent = 10
	DefaultPrefetchMinHits = 2
	DefaultMaxPrefetches   = 16

	// maxShards bounds Config.Shards; minShardBytes is the smallest byte
	// budget a shard may have, so that an ordinary reply always fits.
	maxShards     = 1024
	minShardBytes = 4 << 10
	// autoShardBytes is the budget per shard below which New picks fewer
	// shards than its CPU-based choice.
	autoShardBytes = 256 << 10
)

// Config configures a Cache. The zero value of every field selects the
// documented default; New works on a copy with the defaults filled in.
type Config struct {
	// MaxBytes bounds the memory the cache accounts for its entries (reply
	// bytes, key and per-entry overhead), split evenly across the shards.
	// Zero means DefaultMaxBytes (64 MiB).
	MaxBytes int64
	// MaxTTL caps how long a positive reply is kept, whatever its records
	// say. Zero means DefaultMaxTTL (1h).
	MaxTTL time.Duration
	// MaxNegativeTTL caps how long NXDOMAIN and NODATA replies are kept.
	// Zero means DefaultMaxNegativeTTL (1h).
	MaxNegativeTTL time.Duration
	// ZoneLimits caps TTLs under some zones ("corp.example.") apart from
	// MaxTTL and MaxNegativeTTL: the longest zone a name is under wins.
	// Nil means none. Cache.SetZoneLimits replaces them while running.
	ZoneLimits map[string]ZoneLimit
	// ServfailTTL is how long a SERVFAIL reply is kept (RFC 2308 7.1).
	// Zero means DefaultServfailTTL (5s).
	ServfailTTL time.Duration
	// StaleMaxAge is how long past its expiry an entry may still be served
	// stale when the upstream fails (RFC 8767). Zero means
	// DefaultStaleMaxAge (1h); a negative value disables serve-stale (an
	// operator's "0 disables" maps to -1 here).
	StaleMaxAge time.Duration
	// StaleTTL is the TTL written into stale answers, and also how long
	// after an upstream failure a name is answered stale without asking the
	// upstream again (RFC 8767's failure recheck timer). Zero means
	// DefaultStaleTTL (30s).
	StaleTTL time.Duration
	// FlightMaxAge is the age past which an upstream query in flight is no
	// longer joined by new misses for the same key: a client's retry gets a
	// fresh query instead of waiting on a dead one. Zero means
	// DefaultFlightMaxAge (2s, about one upstream try).
	FlightMaxAge time.Duration
	// RefreshTimeout bounds prefetches, background refreshes, and flights
	// started by a caller whose context has no deadline. Zero means
	// DefaultRefreshTimeout (5s).
	RefreshTimeout time.Duration
	// PrefetchPercent: an entry hit at least PrefetchMinHits times is
	// refreshed in the background once its remaining TTL falls under this
	// percentage of its original TTL. Zero means DefaultPrefetchPercent
	// (10); a negative value disables prefetching.
	PrefetchPercent int
	// PrefetchMinHits is the number of hits an entry needs before it is
	// prefetched. Zero means DefaultPrefetchMinHits (2).
	PrefetchMinHits int
	// MaxPrefetches bounds prefetches and background refreshes running at
	// once; beyond it they are skipped (and retried by a later hit). Zero
	// means DefaultMaxPrefetches (16).
	MaxPrefetches int
	// Shards is the number of independently locked LRUs, a power of two up
	// to 1024. Zero picks 4×GOMAXPROCS rounded up to a power of two (at most
	// 64), fewer when that would leave a shard under 256 KiB.
	Shards int
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Validate reports the first invalid field. Zero values are valid.
func (c *Config) Validate() error {
	durations := []struct {
		name string
		d    time.Duration
	}{
		{"MaxTTL", c.MaxTTL}, {"MaxNegativeTTL", c.MaxNegativeTTL}, {"ServfailTTL", c.ServfailTTL},
		{"StaleTTL", c.StaleTTL}, {"FlightMaxAge", c.FlightMaxAge}, {"RefreshTimeout", c.RefreshTimeout},
	}
	for _, d := range durations {
		if d.d < 0 {
			return fmt.Errorf("cache config: %s is %v, want >= 0", d.name, d.d)
		}
	}
	switch {
	case c.MaxBytes < 0:
		return fmt.Errorf("cache config: MaxBytes is %d, want >= 0", c.MaxBytes)
	case c.StaleTTL > 0 && c.StaleTTL < time.Second:
		return fmt.Errorf("cache config: StaleTTL is %v, want at least 1s", c.StaleTTL)
	case c.PrefetchPercent > 100:
		return fmt.Errorf("cache config: PrefetchPercent is %d, want <= 100", c.PrefetchPercent)
	case c.PrefetchMinHits < 0:
		return fmt.Errorf("cache config: PrefetchMinHits is %d, want >= 0", c.PrefetchMinHits)
	case c.MaxPrefetches < 0:
		return fmt.Errorf("cache config: MaxPrefetches is %d, want >= 0", c.MaxPrefetches)
	case c.Shards < 0 || c.Shards > maxShards || bits.OnesCount(uint(c.Shards)) > 1:
		return fmt.Errorf("cache config: Shards is %d, want 0 or a power of two up to %d", c.Shards, maxShards)
	}
	if _, err := buildZoneLimits(c.ZoneLimits, limits{}); err != nil {
		return err
	}
	d := c.withDefaults()
	if d.MaxBytes/int64(d.Shards) < minShardBytes {
		return fmt.Errorf("cache config: MaxBytes %d over %d shards leaves under %d bytes a shard: %w",
			d.MaxBytes, d.Shards, minShardBytes, errTooSmall)
	}
	return nil
}

var errTooSmall = errors.New("cache too small")

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	setDur := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	setInt := func(i *int, def int) {
		if *i == 0 {
			*i = def
		}
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	setDur(&c.MaxTTL, DefaultMaxTTL)
	setDur(&c.MaxNegativeTTL, DefaultMaxNegativeTTL)
	setDur(&c.ServfailTTL, DefaultServfailTTL)
	setDur(&c.StaleMaxAge, DefaultStaleMaxAge)
	setDur(&c.StaleTTL, DefaultStaleTTL)
	setDur(&c.FlightMaxAge, DefaultFlightMaxAge)
	setDur(&c.RefreshTimeout, DefaultRefreshTimeout)
	setInt(&c.PrefetchPercent, DefaultPrefetchPercent)
	setInt(&c.PrefetchMinHits, DefaultPrefetchMinHits)
	setInt(&c.MaxPrefetches, DefaultMaxPrefetches)
	if c.Shards == 0 {
		c.Shards = autoShards(c.MaxBytes, runtime.GOMAXPROCS(0))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// autoShards picks 4×procs shards rounded up to a power of two, capped at 64
// and lowered while a shard would get under autoShardBytes.
func autoShards(maxBytes int64, procs int) int {
	n := 1 << bits.Len(uint(4*procs-1))
	n = min(n, 64)
	for n > 1 && maxBytes/int64(n) < autoShardBytes {
		n /= 2
	}
	return n
}
