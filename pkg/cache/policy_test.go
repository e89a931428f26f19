package cache

import (
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

func TestDecide(t *testing.T) {
	lim := limits{maxTTL: time.Hour, maxNegativeTTL: 10 * time.Minute, servfailTTL: 5 * time.Second}
	req := new(dns.Msg)
	req.SetQuestion("example.org.", dns.TypeA)
	key, err := wire.KeyOf(req)
	if err != nil {
		t.Fatal(err)
	}
	with := func(m *dns.Msg, f func(*dns.Msg)) *dns.Msg { f(m); return m }
	other := new(dns.Msg)
	other.SetQuestion("example.com.", dns.TypeA)
	otherType := new(dns.Msg)
	otherType.SetQuestion("example.org.", dns.TypeAAAA)
	upper := new(dns.Msg)
	upper.SetQuestion("ExAmple.ORG.", dns.TypeA)

	tests := []struct {
		name  string
		reply *dns.Msg
		ttl   time.Duration
		kind  kind
		why   reason
	}{
		{"positive takes the smallest answer TTL", replyA(req, 300, 60, 120), 60 * time.Second, kindPositive, reasonNone},
		{"positive ignores authority TTLs", with(replyA(req, 300), func(m *dns.Msg) { m.Ns = replyNeg(req, 0, 10, 10).Ns }), 300 * time.Second, kindPositive, reasonNone},
		{"positive capped by MaxTTL", replyA(req, 86400), time.Hour, kindPositive, reasonNone},
		{"question case does not matter", replyA(upper, 30), 30 * time.Second, kindPositive, reasonNone},
		{"NXDOMAIN uses SOA MINIMUM when smaller", replyNeg(req, dns.RcodeNameError, 900, 60), 60 * time.Second, kindNegative, reasonNone},
		{"NXDOMAIN uses SOA TTL when smaller", replyNeg(req, dns.RcodeNameError, 30, 600), 30 * time.Second, kindNegative, reasonNone},
		{"NODATA uses min(SOA TTL, MINIMUM)", replyNeg(req, dns.RcodeSuccess, 900, 45), 45 * time.Second, kindNegative, reasonNone},
		{"negative capped by MaxNegativeTTL", replyNeg(req, dns.RcodeNameError, 86400, 86400), 10 * time.Minute, kindNegative, reasonNone},
		{"SERVFAIL kept ServfailTTL", replyNeg(req, dns.RcodeServerFailure, 0, 0), 5 * time.Second, kindServfail, reasonNone},
		{"NXDOMAIN without SOA", replyNeg(req, dns.RcodeNameError, 0, 0), 0, 0, reasonNoSOA},
		{"NODATA without SOA", replyNeg(req, dns.RcodeSuccess, 0, 0), 0, 0, reasonNoSOA},
		{"truncated", with(replyA(req, 300), func(m *dns.Msg) { m.Truncated = true }), 0, 0, reasonTruncated},
		{"other name", replyA(other, 300), 0, 0, reasonQuestion},
		{"other type", replyNeg(otherType, dns.RcodeNameError, 60, 60), 0, 0, reasonQuestion},
		{"no question", with(replyA(req, 300), func(m *dns.Msg) { m.Question = nil }), 0, 0, reasonQuestion},
		{"REFUSED", replyNeg(req, dns.RcodeRefused, 60, 60), 0, 0, reasonRcode},
		{"NOTIMP", replyNeg(req, dns.RcodeNotImplemented, 0, 0), 0, 0, reasonRcode},
		{"FORMERR", replyNeg(req, dns.RcodeFormatError, 0, 0), 0, 0, reasonRcode},
		{"positive TTL 0", replyA(req, 300, 0), 0, 0, reasonZeroTTL},
		{"negative SOA MINIMUM 0", replyNeg(req, dns.RcodeNameError, 300, 0), 0, 0, reasonZeroTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ttl, k, why := decide(lim, &key, tt.reply)
			if ttl != tt.ttl || k != tt.kind || why != tt.why {
				t.Errorf("got (%v, %v, %q), want (%v, %v, %q)", ttl, k, why, tt.ttl, tt.kind, tt.why)
			}
			// The same reply judged from its bytes, as the miss path does.
			tt.reply.Compress = true
			raw, err := tt.reply.Pack()
			if err != nil {
				t.Fatal(err)
			}
			u, ok := wire.ScanUpstream(raw)
			if refused := tt.why == reasonTruncated || len(tt.reply.Question) != 1; ok == refused {
				t.Fatalf("ScanUpstream took it: %t, want %t", ok, !refused)
			}
			if !ok {
				return
			}
			if ttl, k, why := decideScanned(lim, &key, &u); ttl != tt.ttl || k != tt.kind || why != tt.why {
				t.Errorf("decideScanned: got (%v, %v, %q), want (%v, %v, %q)", ttl, k, why, tt.ttl, tt.kind, tt.why)
			}
		})
	}
}

func TestCapTTLWholeSeconds(t *testing.T) {
	tests := []struct {
		ttl, limit, want time.Duration
		why              reason
	}{
		{90 * time.Second, 30500 * time.Millisecond, 30 * time.Second, reasonNone},
		{90 * time.Second, time.Hour, 90 * time.Second, reasonNone},
		{90 * time.Second, 500 * time.Millisecond, 0, reasonZeroTTL},
	}
	for _, tt := range tests {
		got, _, why := capTTL(tt.ttl, tt.limit, kindPositive)
		if got != tt.want || why != tt.why {
			t.Errorf("capTTL(%v, %v) = %v, %q; want %v, %q", tt.ttl, tt.limit, got, why, tt.want, tt.why)
		}
	}
}

func TestClampTTLs(t *testing.T) {
	req := new(dns.Msg)
	req.SetQuestion("example.org.", dns.TypeA)
	m := replyA(req, 300, 20)
	m.Ns = replyNeg(req, 0, 900, 900).Ns
	m.SetEdns0(1232, true)
	c := clampTTLs(m, 60*time.Second)
	if got, want := ttls(c), []uint32{60, 20, 60}; !slices.Equal(got, want) {
		t.Errorf("clamped TTLs: got %v, want %v", got, want)
	}
	if opt := c.IsEdns0(); opt == nil || !opt.Do() {
		t.Errorf("OPT record: got %v, want it kept with DO", opt)
	}
}

func TestElapsedRoundsUp(t *testing.T) {
	e := &entry{stored: t0.UnixNano()}
	tests := []struct {
		after time.Duration
		want  uint32
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Nanosecond, 1},
		{time.Second, 1},
		{1500 * time.Millisecond, 2},
		{59 * time.Second, 59},
	}
	for _, tt := range tests {
		if got := e.elapsed(t0.Add(tt.after)); got != tt.want {
			t.Errorf("elapsed after %v: got %d, want %d", tt.after, got, tt.want)
		}
	}
}

func TestDeadAndUsable(t *testing.T) {
	e := &entry{stored: t0.UnixNano(), ttl: 60} // seconds
	tests := []struct {
		at       time.Duration
		maxAge   time.Duration
		dead, ok bool
	}{
		{30 * time.Second, time.Hour, false, true},
		{time.Minute, time.Hour, false, true},
		{time.Minute + time.Hour, time.Hour, false, true},
		{time.Minute + time.Hour + time.Second, time.Hour, true, false},
		{30 * time.Second, -1, false, true},
		{time.Minute, -1, true, false},
	}
	for _, tt := range tests {
		now := t0.Add(tt.at)
		if got := dead(e, now, tt.maxAge); got != tt.dead {
			t.Errorf("dead at +%v, max age %v: got %v, want %v", tt.at, tt.maxAge, got, tt.dead)
		}
		if got := usable(e, now, tt.maxAge); got != tt.ok {
			t.Errorf("usable at +%v, max age %v: got %v, want %v", tt.at, tt.maxAge, got, tt.ok)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"stale disabled", Config{StaleMaxAge: -1}, true},
		{"prefetch disabled", Config{PrefetchPercent: -1}, true},
		{"one shard, small", Config{MaxBytes: 8 << 10, Shards: 1}, true},
		{"negative MaxBytes", Config{MaxBytes: -1}, false},
		{"negative MaxTTL", Config{MaxTTL: -time.Second}, false},
		{"negative ServfailTTL", Config{ServfailTTL: -time.Second}, false},
		{"negative FlightMaxAge", Config{FlightMaxAge: -time.Second}, false},
		{"sub-second StaleTTL", Config{StaleTTL: time.Millisecond}, false},
		{"PrefetchPercent over 100", Config{PrefetchPercent: 101}, false},
		{"negative PrefetchMinHits", Config{PrefetchMinHits: -1}, false},
		{"Shards not a power of two", Config{Shards: 3}, false},
		{"too many shards", Config{Shards: 2048}, false},
		{"shards too small", Config{MaxBytes: 64 << 10, Shards: 64}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Errorf("Validate: got %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestAutoShards(t *testing.T) {
	tests := []struct {
		maxBytes int64
		procs    int
		want     int
	}{
		{64 << 20, 1, 4},
		{64 << 20, 2, 8},
		{64 << 20, 3, 16},
		{64 << 20, 32, 64},
		{64 << 20, 1000, 64},
		{1 << 20, 32, 4},
		{100 << 10, 32, 1},
	}
	for _, tt := range tests {
		if got := autoShards(tt.maxBytes, tt.procs); got != tt.want {
			t.Errorf("autoShards(%d, %d): got %d, want %d", tt.maxBytes, tt.procs, got, tt.want)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	d := Config{}.withDefaults()
	if d.MaxBytes != DefaultMaxBytes || d.MaxTTL != DefaultMaxTTL || d.MaxNegativeTTL != DefaultMaxNegativeTTL ||
		d.ServfailTTL != DefaultServfailTTL || d.StaleMaxAge != DefaultStaleMaxAge || d.StaleTTL != DefaultStaleTTL ||
		d.FlightMaxAge != DefaultFlightMaxAge || d.PrefetchPercent != DefaultPrefetchPercent ||
		d.PrefetchMinHits != DefaultPrefetchMinHits || d.MaxPrefetches != DefaultMaxPrefetches || d.Shards == 0 || d.Now == nil {
		t.Errorf("defaults: got %+v", d)
	}
	if d := (Config{StaleMaxAge: -1, PrefetchPercent: -1}).withDefaults(); d.StaleMaxAge != -1 || d.PrefetchPercent != -1 {
		t.Errorf("disabled features: got StaleMaxAge %v PrefetchPercent %d, want -1ns and -1", d.StaleMaxAge, d.PrefetchPercent)
	}
}
