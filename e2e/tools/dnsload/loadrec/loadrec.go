// Package loadrec is the line format of dnsload's output: one JSON Second
// per protocol and second, with latencies in log-scale buckets. dnsload
// writes it and the real-node e2e test reads it back.
package loadrec

import (
	"math"
	"time"
)

// Second is one second's outcome for one protocol.
type Second struct {
	T     int64  `json:"t"` // unix seconds the queries were sent in
	Proto string `json:"proto"`
	Sent  int    `json:"sent"`
	OK    int    `json:"ok"`
	Lost  int    `json:"lost"`
	// Resent counts TCP queries answered on a second connection after the
	// first was reset or closed before its reply, as a stub resolver does:
	// counted in OK (or Rcodes) too.
	Resent  int            `json:"resent,omitempty"`
	Rcodes  map[string]int `json:"rcodes,omitempty"` // non-NOERROR rcodes, plus "error"
	Buckets map[int]int    `json:"buckets"`          // latency bucket (BucketOf) → count
	Err     string         `json:"err,omitempty"`
}

// BucketOf maps a latency to a bucket: 8 per power of two of microseconds.
func BucketOf(d time.Duration) int {
	us := float64(d.Microseconds())
	if us < 1 {
		us = 1
	}
	return int(math.Ceil(math.Log2(us) * 8))
}

// BucketUpper is the upper bound of bucket b: 2^(b/8) µs.
func BucketUpper(b int) time.Duration {
	return time.Duration(math.Pow(2, float64(b)/8)) * time.Microsecond
}
