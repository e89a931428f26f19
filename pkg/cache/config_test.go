package cache

import (
	"testing"
	"time"
)

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
