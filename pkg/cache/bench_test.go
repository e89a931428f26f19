package cache

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// benchCache holds n positive entries (TTL 1h) and returns their questions.
func benchCache(b *testing.B, n int) (*Cache, []*question) {
	b.Helper()
	c := newTestCache(b, Config{}, &fakeUpstream{reply: answerA(3600)}, nil)
	qs := make([]*question, n)
	for i := range qs {
		qs[i] = newQuestion(b, fmt.Sprintf("host-%d.example.org.", i), dns.TypeA)
		resolve(b, c, qs[i])
	}
	return c, qs
}

// BenchmarkLookupHit is the server's hit path: Lookup plus AppendReply.
func BenchmarkLookupHit(b *testing.B) {
	c, qs := benchCache(b, 1)
	q := &qs[0].q
	buf := make([]byte, 0, 1232)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		p, mode, ok := c.Lookup(q, now)
		if !ok {
			b.Fatal("miss")
		}
		buf = p.AppendReply(buf[:0], q, mode, 1232)
	}
}

// BenchmarkLookupParallel spreads hits over 1024 names on every P.
func BenchmarkLookupParallel(b *testing.B) {
	c, qs := benchCache(b, 1024)
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 1232)
		i := 0
		for pb.Next() {
			q := &qs[i&1023].q
			p, mode, ok := c.Lookup(q, now)
			if !ok {
				b.Fatal("miss")
			}
			buf = p.AppendReply(buf[:0], q, mode, 1232)
			i++
		}
	})
}

// BenchmarkResolveMiss is a miss answered by an instant fake upstream:
// flight, store and the policy, with the cache kept from growing by Flush.
func BenchmarkResolveMiss(b *testing.B) {
	c := newTestCache(b, Config{}, &fakeUpstream{reply: answerA(300)}, nil)
	qs := newQuestion(b, "www.example.org.", dns.TypeA)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.Flush("www.example.org.")
		if _, err := c.Resolve(ctx, qs.key, qs.req); err != nil {
			b.Fatal(err)
		}
	}
}
